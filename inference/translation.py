"""An English gloss of a question in another language, with Apertium (rule-based machine translation: Debian's
`apertium` and `apertium-eng-spa`), for the English legs of a cross-lingual retrieve.

A gloss is word-for-word rough ("How I redirect to the user to another view?"), but its words are the English
documents' words: `redirect`, `permanent session`, `yes or no`. The multilingual encoder places a whole Spanish
question near its English passage less often than the English legs place the gloss (bench/crosslingual.py).

Apertium runs in a process of its own, one per worker and language (a crash there never reaches the web worker),
started at the first question (about 50 ms to load its dictionaries) and kept: a question then costs about a
millisecond. Each is bounded by TIMEOUT_S. No Apertium, no pair for the language, a failure or a timeout: no gloss
(None), and the retrieve goes on without it; after a failure the next question starts a new process.

The same processes render an answer across languages (`translate`): a sentence checked against English evidence is
shown to a Spanish asker in Spanish, and the other way round (chat/rendering.py keeps its values, names, codes and
markers as they are).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from collections import OrderedDict
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

PAIRS = {"es": "spa-eng"}  # a question's language → the Apertium mode that glosses it into English
MODES = {("es", "en"): "spa-eng", ("en", "es"): "eng-spa"}  # (from, into) → the Apertium mode that translates
MODES_DIR = Path("/usr/share/apertium/modes")
TIMEOUT_S = 2.0
WAIT_S = 0.25  # how long a question waits for another's gloss before going on without one
MAX_CHARS = 2000  # a question longer than this is glossed on its first MAX_CHARS characters
CACHE_SIZE = 1024  # glosses kept (an agent, a chat client and a bench repeat their questions)


class GlosserBusy(Exception):
    """Another question's gloss held the process past WAIT_S."""


class Glosser:
    """One Apertium mode, in one long-lived process: every stage flushes on a null character, so a text sent with
    its null comes back glossed, with a null after it, and the dictionaries are loaded once."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._pending = b""
        self._owed = 0  # empty blocks still to come: the second null of each text (`gloss`)

    def _start(self) -> subprocess.Popen[bytes]:
        # The mode's pipeline with `-z` on every stage, as Apertium's own wrapper builds it for null flushing;
        # `-n`: unknown words come through unmarked. No deformatter: the text is escaped here (`_escape`).
        script = subprocess.run(["apertium-wblank-mode", "-z", str(MODES_DIR / f"{self.mode}.mode")],
                                capture_output=True, text=True, check=True, timeout=TIMEOUT_S).stdout  # fmt: skip
        # A session of its own: stopping it stops every stage of the pipeline, not only the shell that started them.
        return subprocess.Popen(["bash", "-c", script, "apertium", "-n", ""], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip

    def _running(self) -> subprocess.Popen[bytes]:
        if self._owner != os.getpid():  # a forked worker: the parent's process is not this one's to use
            self._process, self._owner, self._pending, self._owed = None, os.getpid(), b"", 0
        if self._process is None or self._process.poll() is not None:
            self._stop()  # what is left of a pipeline whose shell ended
            self._process = self._start()
        return self._process

    def _block(self, process: subprocess.Popen[bytes], deadline: float) -> bytes:
        """The next output up to a null."""
        assert process.stdout is not None
        while b"\0" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
                raise TimeoutError(f"apertium {self.mode} took over {TIMEOUT_S} s")
            read = os.read(process.stdout.fileno(), 65536)
            if not read:
                raise OSError(f"apertium {self.mode} ended")
            self._pending += read
        block, self._pending = self._pending.split(b"\0", 1)
        return block

    def gloss(self, text: str) -> str | None:
        escaped = _escape(" ".join(_MARKUP_RE.sub(" ", text[:MAX_CHARS].replace("\0", " ")).split()))
        if not escaped:
            return None
        # Another question's gloss is under way: wait for it a little (a gloss takes a few milliseconds), never for
        # the whole of its deadline, so a question that slows Apertium down never holds up the others.
        if not self._lock.acquire(timeout=WAIT_S):
            raise GlosserBusy(f"apertium {self.mode} busy: a question went without its gloss")
        with contextlib.ExitStack() as held:
            held.callback(self._lock.release)
            try:
                process = self._running()
                assert process.stdin is not None
                # A second null pushes the first through (without it the dictionary stage held each text back until
                # the next one came); its own output is an empty block, read before the next text's.
                process.stdin.write(escaped.encode() + b"\0\0")
                process.stdin.flush()
                deadline = time.monotonic() + TIMEOUT_S
                while self._owed:
                    self._block(process, deadline)
                    self._owed -= 1
                out, self._owed = self._block(process, deadline), 1
                if not out.strip():  # everything the text had, Apertium dropped: the empty block is the gloss
                    out, self._owed = self._block(process, deadline), 0
            except (OSError, subprocess.SubprocessError) as exc:  # TimeoutError is an OSError
                log.warning("apertium %s: %s", self.mode, exc)
                self._stop()
                return None
        return " ".join(_unescape(out.decode("utf-8", "replace")).split()) or None

    def _stop(self) -> None:
        process, self._process, self._pending, self._owed = self._process, None, b"", 0
        if process is None or self._owner != os.getpid():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # the shell and every stage it started
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # stdin's unflushed bytes to a dead pipeline: BrokenPipeError
                    pipe.close()

    def close(self) -> None:
        with self._lock:
            self._stop()


# What Apertium's stream format reads as markup: glossed as a space (it carries no word; a `^` left unpaired had the
# pipeline hold its output back until the deadline), except what a name holds ("C#", "C++", "*.py"), escaped.
_MARKUP_RE = re.compile(r"[\\\[\]^$/@<>{}|]")
_SPECIAL_RE = re.compile(r"([*#+])")
_ESCAPED_RE = re.compile(r"\\(.)")


def _escape(text: str) -> str:
    return _SPECIAL_RE.sub(r"\\\1", text)


def _unescape(text: str) -> str:
    return _ESCAPED_RE.sub(r"\1", text)


_glossers: dict[str, Glosser | None] = {}
_glossers_lock = threading.Lock()


def glosser(language: str) -> Glosser | None:
    """The glosser into English for a language, or None (turned off, no pair, or Apertium not installed)."""
    return translator(language, "en") if language in PAIRS else None


def translator(source: str, target: str) -> Glosser | None:
    """The Apertium process that translates `source` into `target`, or None (turned off, no such pair, or
    Apertium not installed)."""
    mode = MODES.get((source, target))
    if not settings.RAG_GLOSS or mode is None:
        return None
    with _glossers_lock:
        if mode not in _glossers:
            found = shutil.which("apertium") is not None and (MODES_DIR / f"{mode}.mode").exists()
            if not found:
                log.info("no Apertium %s: %s is not translated into %s", mode, source, target)
            _glossers[mode] = Glosser(mode) if found else None
        return _glossers[mode]


_cache: OrderedDict[tuple[str, str, str], str] = OrderedDict()


def gloss(text: str, language: str, *, scope: str = "") -> str | None:
    """An English gloss of `text` (in `language`), or None. A gloss made lately for the same `scope` (the asking
    tenant: how fast a question comes back never tells one tenant what another asked) is read again from a small
    cache; so is a failure (no gloss), so a question that breaks Apertium costs its deadline once, not at every call."""
    return translate(text, language, "en", scope=scope) if language in PAIRS else None


def translate(text: str, source: str, target: str, *, scope: str = "") -> str | None:
    """`text` (in `source`) in `target`, or None (no pair, Apertium missing, busy, failed or past its deadline);
    cached per `scope` as `gloss` says."""
    found = translator(source, target)
    if found is None:
        return None
    key = (scope, found.mode, text)
    with _glossers_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key] or None
    try:
        made = found.gloss(text)
    except GlosserBusy as exc:  # not this text's fault: not kept, the next call tries again
        log.warning("%s", exc)
        return None
    with _glossers_lock:  # a text that failed is kept as "no translation": asked again, it never reaches Apertium
        _cache[key] = made or ""
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return made
