"""An English gloss of a question in another language, with Apertium (rule-based machine translation: Debian's
`apertium` and `apertium-eng-spa`), for the English legs of a cross-lingual retrieve.

A gloss is word-for-word rough ("How I redirect to the user to another view?"), but its words are the English
documents' words: `redirect`, `permanent session`, `yes or no`. The multilingual encoder places a whole Spanish
question near its English passage less often than the English legs place the gloss (bench/crosslingual.py).

Each translation runs in a process of its own (a crash there never reaches the web worker), bounded by
TIMEOUT_S. Apertium loads its transducers for about 75 ms at start, so the process for the next question is started
as soon as one is taken, and waits, loaded, for its input: a question then costs about 30 ms. No Apertium, no pair
for the language, a failure or a timeout: no gloss (None), and the retrieve goes on without it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from collections import OrderedDict
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

PAIRS = {"es": "spa-eng"}  # a question's language → the Apertium mode that glosses it into English
MODES_DIR = Path("/usr/share/apertium/modes")
TIMEOUT_S = 2.0
MAX_CHARS = 2000  # a question longer than this is glossed on its first MAX_CHARS characters
CACHE_SIZE = 1024  # glosses kept (an agent, a chat client and a bench repeat their questions)


class Glosser:
    """One Apertium mode, with a process started ahead for the next text."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._lock = threading.Lock()
        self._spare: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["apertium", "-u", self.mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )

    def _take(self) -> subprocess.Popen[bytes]:
        with self._lock:
            spare, self._spare = self._spare, None
            if self._owner != os.getpid():  # a forked worker: the parent's process is not this one's to use
                spare, self._owner = None, os.getpid()
            if spare is None or spare.poll() is not None:
                spare = self._start()
            self._spare = self._start()  # loads while this one translates, and waits for the next text
            return spare

    def gloss(self, text: str) -> str | None:
        try:
            process = self._take()
        except OSError as exc:
            log.warning("apertium %s could not start: %s", self.mode, exc)
            return None
        try:
            out, _ = process.communicate(text[:MAX_CHARS].encode(), timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            log.warning("apertium %s took over %s s", self.mode, TIMEOUT_S)
            return None
        if process.returncode != 0:
            return None
        return " ".join(out.decode("utf-8", "replace").split()) or None

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.poll() is None:
            spare.kill()
            spare.wait()


_glossers: dict[str, Glosser | None] = {}
_glossers_lock = threading.Lock()


def glosser(language: str) -> Glosser | None:
    """The glosser into English for a language, or None (turned off, no pair, or Apertium not installed)."""
    if not settings.RAG_GLOSS or language not in PAIRS:
        return None
    with _glossers_lock:
        if language not in _glossers:
            mode = PAIRS[language]
            found = shutil.which("apertium") is not None and (MODES_DIR / f"{mode}.mode").exists()
            if not found:
                log.info("no Apertium %s: questions in %s are not glossed into English", mode, language)
            _glossers[language] = Glosser(mode) if found else None
        return _glossers[language]


_cache: OrderedDict[tuple[str, str], str] = OrderedDict()


def gloss(text: str, language: str) -> str | None:
    """An English gloss of `text` (in `language`), or None. A gloss made lately is read again from a small cache
    (a failure is not kept: the next call tries again)."""
    found = glosser(language)
    if found is None:
        return None
    key = (found.mode, text)
    with _glossers_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    made = found.gloss(text)
    if made is not None:
        with _glossers_lock:
            _cache[key] = made
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return made
