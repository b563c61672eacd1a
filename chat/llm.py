"""Chat models through llama-cpp-python: a default GGUF and an ordered fallback chain.

Models load lazily, once per process, under a lock; generation is serialised per model (a
llama.cpp context is not thread-safe), so concurrent requests queue instead of crashing. If no
model loads, `get_gateway().model()` is None and callers fall back to extractive answers.
The chat model never embeds and never touches the corpus: it only sees the grounded prompt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

# GGUFs without a chat template (base models such as the packaged Gemma 3 270M) make
# llama-cpp-python fall back to Llama-2 markup, and the model then answers nothing; pick the
# family's own format from the GGUF metadata instead.
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


class ModelLoadError(Exception):
    pass


@dataclass
class ChatModel:
    name: str
    path: str
    llama: object
    chat_format: str
    n_ctx: int
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_tokens(self, text: str) -> int:
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))  # type: ignore[attr-defined]

    def stream(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None = None,
    ) -> Iterator[str]:
        if self.chat_format in SYSTEMLESS_FORMATS and messages and messages[0]["role"] == "system":
            system, rest = messages[0]["content"], messages[1:]
            rest = [{**rest[0], "content": f"{system}\n\n{rest[0]['content']}"}, *rest[1:]]
            messages = rest
        with self.lock:
            chunks = self.llama.create_chat_completion(  # type: ignore[attr-defined]
                messages=messages, max_tokens=max_tokens, temperature=temperature, top_p=top_p, stream=True,
                repeat_penalty=1.1, seed=seed, stop=STOP,
            )  # fmt: skip
            for chunk in chunks:
                delta = chunk["choices"][0].get("delta", {}).get("content")
                if delta:
                    yield delta


def _detect_format(llama: object, path: str) -> str:
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
    try:
        llama = llama_cpp.Llama(
            model_path=str(file), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False
        )
    except Exception as exc:  # llama.cpp reports corrupt files, wrong formats and OOM as ValueError/RuntimeError
        raise ModelLoadError(f"{path}: {type(exc).__name__}: {exc}") from exc
    chat_format = _detect_format(llama, str(file))
    if not (getattr(llama, "metadata", {}) or {}).get("tokenizer.chat_template"):
        llama.chat_format = chat_format
        llama.chat_handler = None
    logger.info("Loaded chat model %s (%s) in %.2f s", file.name, chat_format, time.perf_counter() - started)
    return ChatModel(name=file.name, path=str(file), llama=llama, chat_format=chat_format, n_ctx=n_ctx)


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

    def unavailable_reason(self) -> str:
        return "No chat model could be loaded: " + "; ".join(self.failures or ["none configured"])


def configured_paths() -> list[str]:
    from ragsite.packaged_models import packaged_llm_path

    paths = [settings.RAG_LLM_MODEL_PATH] if settings.RAG_LLM_MODEL_PATH else []
    paths += [p for p in settings.RAG_LLM_FALLBACK_PATHS if p]
    if not settings.RAG_LLM_MODEL_PATH:
        try:
            paths.append(str(packaged_llm_path()))
        except Exception as exc:  # the packaged model is missing: extractive answers still work
            logger.warning("The packaged chat model is unavailable: %s", exc)
    return paths


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
