"""Chat models through llama-cpp-python: a default GGUF and an ordered fallback chain.

Both apps use this module — `chat` to answer, `knowledge` to enrich documents at ingest — so it
lives beside the packaged weights, not inside either app. Models load lazily, once per process,
under a lock; generation is serialised per model (a llama.cpp context is not thread-safe), so
concurrent requests queue instead of crashing. If no model loads, `get_gateway().model()` is None
and callers fall back to extractive answers. The chat model never embeds and never touches the
corpus: it only sees the prompt it is given.

Speed: llama-cpp-python keeps the KV state of the previous prompt and re-evaluates only what
differs, so a fixed system prefix is computed once per model (`ChatModel.warm`); generation uses
every core when the rest of the machine is idle and one fewer when it is not (`pick_threads`),
since llama.cpp threads spin on barriers and collapse when they share a core.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

# GGUFs without a chat template (base models such as Gemma 3 270M) make llama-cpp-python fall
# back to Llama-2 markup, and the model then answers nothing; pick the family's own format from
# the GGUF metadata instead.
FAMILY_FORMATS = {
    "gemma": "gemma",
    "qwen": "chatml",
    "llama": "llama-3",
    "mistral": "mistral-instruct",
    "phi": "chatml",
}
SYSTEMLESS_FORMATS = {"gemma"}  # formats that silently drop the system turn: fold it into the user turn

# A model that starts writing the next "Question:" (or another excerpt) has finished its answer.
STOP = ["\nQuestion:", "\nExcerpts:"]
IDLE_SAMPLE_S = 0.05


class ModelLoadError(Exception):
    pass


def _cpu_busy_fraction(sample_s: float = IDLE_SAMPLE_S) -> float | None:
    """Share of the machine's CPU time spent busy over a short sample (None off Linux)."""

    def read() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        return sum(values), idle

    try:
        total_a, idle_a = read()
        time.sleep(sample_s)
        total_b, idle_b = read()
    except (OSError, ValueError, IndexError):
        return None
    total = total_b - total_a
    return None if total <= 0 else 1.0 - (idle_b - idle_a) / total


def pick_threads(configured: int) -> int:
    """RAG_LLM_THREADS, or with 0 ("auto"): all cores when the box is otherwise idle, else one fewer."""
    if configured > 0:
        return configured
    cores = os.cpu_count() or 1
    busy = _cpu_busy_fraction()
    if busy is None or cores == 1:
        return cores
    other_cores_busy = busy * cores
    return cores if other_cores_busy < 0.5 else max(1, cores - round(other_cores_busy))


@dataclass
class ChatModel:
    name: str
    path: str
    llama: Any
    chat_format: str
    n_ctx: int
    threads_setting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    warmed: set[str] = field(default_factory=set)
    threads_now: int = 0
    prefill_rate: float | None = None  # prompt tokens/s measured on real answers (moving average)

    def record_prefill(self, tokens: int, seconds: float) -> None:
        """Fold one measured prefill (prompt tokens after the cached prefix, time to first token) into the rate."""
        if tokens <= 0 or seconds <= 0:
            return
        rate = tokens / seconds
        self.prefill_rate = rate if self.prefill_rate is None else 0.7 * self.prefill_rate + 0.3 * rate

    def count_tokens(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _messages(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        if self.chat_format in SYSTEMLESS_FORMATS and messages and messages[0]["role"] == "system":
            system, rest = messages[0]["content"], messages[1:]
            return [{**rest[0], "content": f"{system}\n\n{rest[0]['content']}"}, *rest[1:]]
        return messages

    def _set_threads(self) -> None:
        import llama_cpp

        threads = pick_threads(self.threads_setting)
        if threads != self.threads_now:
            llama_cpp.llama_set_n_threads(self.llama.ctx, threads, threads)
            self.threads_now = threads

    def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None = None,
        stop: list[str] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> Iterator[str]:
        """Token deltas as they are generated. Closing the iterator stops generation at once."""
        with self.lock:
            self._set_threads()
            chunks = self.llama.create_chat_completion(
                messages=self._messages(messages), max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                stream=True, repeat_penalty=1.1, seed=seed, stop=STOP if stop is None else stop,
                response_format=response_format,
            )  # fmt: skip
            try:
                for chunk in chunks:
                    delta = chunk["choices"][0].get("delta", {}).get("content")
                    if delta:
                        yield delta
            finally:
                chunks.close()  # a client that went away stops the decode loop here

    def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any], max_tokens: int,
                      timeout_s: float) -> dict[str, Any]:  # fmt: skip
        """Generate under a JSON-schema grammar: the output always parses."""
        started, pieces = time.perf_counter(), []
        for delta in self.stream(messages, max_tokens=max_tokens, temperature=0.1, top_p=0.9, stop=[],
                                 response_format={"type": "json_object", "schema": schema}):  # fmt: skip
            pieces.append(delta)
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError(f"the model took longer than {timeout_s:.0f} s")
        return json.loads("".join(pieces))

    def warm(self, system: str) -> None:
        """Evaluate a fixed system prefix once, so that every later prompt starting with it reuses its KV state."""
        if system in self.warmed:
            return
        started = time.perf_counter()
        for _ in self.stream([{"role": "system", "content": system}, {"role": "user", "content": "Hi"}],
                             max_tokens=1, temperature=0.0, top_p=1.0):  # fmt: skip
            pass
        self.warmed.add(system)
        logger.info("Chat model %s: system prefix evaluated in %.2f s", self.name, time.perf_counter() - started)


def _detect_format(llama: Any, path: str) -> str:
    metadata = getattr(llama, "metadata", {}) or {}
    if metadata.get("tokenizer.chat_template"):
        return getattr(llama, "chat_format", None) or "chat_template.default"
    family = f"{metadata.get('general.architecture', '')} {metadata.get('general.name', '')} {Path(path).name}".lower()
    for key, chat_format in FAMILY_FORMATS.items():
        if key in family:
            return chat_format
    return "chatml"


def load_model(path: str, *, threads: int, n_ctx: int) -> ChatModel:
    import llama_cpp

    file = Path(path)
    if not file.is_file():
        raise ModelLoadError(f"{path}: no such file")
    started = time.perf_counter()
    first_threads = pick_threads(threads)
    try:
        llama = llama_cpp.Llama(
            model_path=str(file), n_ctx=n_ctx, n_threads=first_threads, n_threads_batch=first_threads,
            n_batch=512, verbose=False,
        )  # fmt: skip
    except Exception as exc:  # llama.cpp reports corrupt files, wrong formats and OOM as ValueError/RuntimeError
        raise ModelLoadError(f"{path}: {type(exc).__name__}: {exc}") from exc
    chat_format = _detect_format(llama, str(file))
    if not (getattr(llama, "metadata", {}) or {}).get("tokenizer.chat_template"):
        llama.chat_format = chat_format
        llama.chat_handler = None
    logger.info("Loaded chat model %s (%s) in %.2f s", file.name, chat_format, time.perf_counter() - started)
    return ChatModel(name=file.name, path=str(file), llama=llama, chat_format=chat_format, n_ctx=n_ctx,
                     threads_setting=threads, threads_now=first_threads)  # fmt: skip


class LLMGateway:
    """The default model and its fallbacks; the first one that loads serves."""

    def __init__(self, paths: list[str], *, threads: int, n_ctx: int) -> None:
        self.paths = paths
        self.threads, self.n_ctx = threads, n_ctx
        self.failures: list[str] = []
        self._model: ChatModel | None = None
        self._loaded = False
        self._lock = threading.Lock()

    def model(self) -> ChatModel | None:
        with self._lock:
            if not self._loaded:
                for path in self.paths:
                    try:
                        self._model = load_model(path, threads=self.threads, n_ctx=self.n_ctx)
                        break
                    except ModelLoadError as exc:
                        logger.warning("Chat model failed to load, trying the next: %s", exc)
                        self.failures.append(str(exc))
                self._loaded = True
            return self._model

    def loaded_model(self) -> ChatModel | None:
        """The model if it is loaded already (never loads it)."""
        return self._model if self._loaded else None

    def fallback_note(self) -> str:
        """Why the model serving is not the first of the chain ('' when it is)."""
        if not self.failures or self._model is None:
            return ""
        return f"Fell back to {self._model.name}: " + "; ".join(self.failures)

    def unavailable_reason(self) -> str:
        return "No chat model could be loaded: " + "; ".join(self.failures or ["none configured"])


def configured_paths() -> list[str]:
    """RAG_LLM_MODEL_PATH, then RAG_LLM_FALLBACK_PATHS, then (unless a path is set) the packaged chain."""
    from inference.packaged import PACKAGED_CHAT_CHAIN, PackagedModelError, assemble_gguf

    paths = [settings.RAG_LLM_MODEL_PATH] if settings.RAG_LLM_MODEL_PATH else []
    paths += [p for p in settings.RAG_LLM_FALLBACK_PATHS if p]
    if not settings.RAG_LLM_MODEL_PATH:
        for model in PACKAGED_CHAT_CHAIN:
            try:
                paths.append(str(assemble_gguf(model)))
            except (PackagedModelError, OSError) as exc:  # the next model, or extractive answers, still work
                logger.warning("A packaged chat model is unavailable: %s", exc)
                paths.append(str(model.target()))  # kept in the chain so the failure is reported
    return list(dict.fromkeys(paths))


def model_path_allowed(path: str) -> bool:
    """A chat GGUF a tenant's assistant may name: a .gguf inside RAG_MODELS_DIR, or one the operator
    configured (RAG_LLM_MODEL_PATH, RAG_LLM_FALLBACK_PATHS). Never an arbitrary file of the server."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    operator = {
        Path(p).expanduser().resolve() for p in [settings.RAG_LLM_MODEL_PATH, *settings.RAG_LLM_FALLBACK_PATHS] if p
    }
    models_dir = Path(settings.RAG_MODELS_DIR).resolve()
    return resolved in operator or (resolved.suffix == ".gguf" and models_dir in resolved.parents)


_gateways: dict[tuple[str, ...], LLMGateway] = {}
_gateways_lock = threading.Lock()


def get_gateway(paths: list[str] | None = None) -> LLMGateway:
    """One gateway (and so one loaded model) per model chain per process."""
    chain = tuple(paths or configured_paths())
    with _gateways_lock:
        if chain not in _gateways:
            _gateways[chain] = LLMGateway(list(chain), threads=settings.RAG_LLM_THREADS, n_ctx=settings.RAG_LLM_CONTEXT)
        return _gateways[chain]


def reset_gateways() -> None:
    with _gateways_lock:
        _gateways.clear()
