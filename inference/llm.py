"""The chat model gateway: OpenAI's chat-completions API, never a model inside this process.

Both apps use this module — `chat` to answer, `knowledge` to enrich documents at ingest — so it lives
beside the packaged weights, not inside either app. It speaks to one of two kinds of server:

- **an operator's engine** (`RAG_LLM_URL`, `RAG_LLM_MODEL`, `RAG_LLM_API_KEY`): vLLM, llama.cpp's server,
  Ollama, TGI…; the product then maps no model file at all;
- **the embedded default**: llama.cpp's server run and watched by `manage.py llm_serve`
  (`inference/runtime.py`), found through its state file. Its chain is RAG_LLM_MODEL_PATH, then
  RAG_LLM_FALLBACK_PATHS, then (when no path is set) the packaged Qwen2.5-Coder 1.5B and 0.5B Instruct.

If the server is starting or restarting after a crash, `model()` raises `ModelUnavailable` (callers answer
503 with Retry-After); if no model of the chain could be served, or none runs, `model()` is None with a
reason and callers fall back to extractive answers. A model process that dies mid-answer ends the token
stream with `ModelUnavailable`. The chat model never embeds and never touches the corpus: it only sees the
prompt it is given.

Speed: llama.cpp's server keeps the KV state of the previous prompt and re-evaluates only what differs, so
the fixed system prefix is computed once per loaded model (`ChatModel.warm`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

# GGUFs without a chat template (base models such as Gemma 3 270M) make llama.cpp fall back to Llama-2
# markup, and the model then answers nothing; the server gets the family's own format instead.
FAMILY_FORMATS = {
    "gemma": "gemma",
    "qwen": "chatml",
    "llama": "llama-3",
    "mistral": "mistral-instruct",
    "phi": "chatml",
}
# Formats whose template silently drops the system turn (llama.cpp's "gemma"): the rules are folded into the
# first user turn instead, or the model would answer without them.
SYSTEMLESS_FORMATS = {"gemma"}

# A model that starts writing the next "Question:" (or another excerpt) has finished its answer.
STOP = ["\nQuestion:", "\nExcerpts:"]
CHARS_PER_TOKEN = 3  # conservative for English/Spanish prose and code; the budget never overflows the context
CONNECT_TIMEOUT_S = 5.0


class ModelLoadError(Exception):
    pass


class ModelUnavailable(Exception):
    """The model server cannot answer now (starting, restarting, or it died mid-answer): retry later."""

    def __init__(self, reason: str, retry_after: int = 5, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.status = reason, retry_after, status


@dataclass(frozen=True)
class GGUFInfo:
    architecture: str
    name: str
    has_chat_template: bool
    context_length: int | None


# GGUF metadata value types (ggml's gguf.h): fixed sizes for the scalars, 8 = string, 9 = array.
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_WANTED = ("general.architecture", "general.name", "tokenizer.chat_template")


def _read_gguf_metadata(path: str) -> dict[str, Any]:
    """The scalar and string metadata of a GGUF (arrays such as the vocabulary are skipped unread).

    Written here rather than with ggml-org's `gguf` reader: that one parses every tensor and array into numpy
    and took 15.6 s on the 1.5B; this reads only the header, in well under a second."""
    import struct

    with open(path, "rb") as file:

        def unpack(fmt: str) -> Any:
            size = struct.calcsize("<" + fmt)
            data = file.read(size)
            if len(data) != size:
                raise ValueError("truncated GGUF header")
            return struct.unpack("<" + fmt, data)[0]

        def string() -> str:
            length = unpack("Q")
            if length > 1 << 24:
                raise ValueError("implausible string length in GGUF header")
            return file.read(length).decode("utf-8", errors="replace")

        def value(kind: int) -> Any:
            if kind in _GGUF_SCALARS:
                return unpack(_GGUF_SCALARS[kind])
            if kind == _GGUF_STRING:
                return string()
            if kind == _GGUF_ARRAY:
                item, count = unpack("I"), unpack("Q")
                if item in _GGUF_SCALARS:
                    file.seek(count * struct.calcsize("<" + _GGUF_SCALARS[item]), 1)
                elif item == _GGUF_STRING:
                    for _ in range(count):
                        file.seek(unpack("Q"), 1)
                else:
                    raise ValueError(f"unsupported GGUF array item type {item}")
                return None
            raise ValueError(f"unknown GGUF value type {kind}")

        if file.read(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        if unpack("I") < 2:
            raise ValueError("GGUF version 1 is not supported")
        unpack("Q")  # tensor count
        metadata: dict[str, Any] = {}
        for _ in range(unpack("Q")):
            key = string()
            found = value(unpack("I"))
            if key in _GGUF_WANTED or key.endswith(".context_length"):
                metadata[key] = found
        return metadata


@lru_cache(maxsize=64)
def _gguf_info(path: str, size: int, mtime: float) -> GGUFInfo:
    metadata = _read_gguf_metadata(path)
    architecture = str(metadata.get("general.architecture") or "")
    return GGUFInfo(
        architecture=architecture,
        name=str(metadata.get("general.name") or ""),
        has_chat_template=bool(metadata.get("tokenizer.chat_template")),
        context_length=metadata.get(f"{architecture}.context_length"),
    )


def gguf_info(path: str) -> GGUFInfo:
    """A GGUF's metadata, read from its header without loading weights (nor llama.cpp).

    Raises ModelLoadError for a missing, truncated or foreign file."""
    try:
        stat = Path(path).stat()
        return _gguf_info(path, stat.st_size, stat.st_mtime)
    except (OSError, ValueError) as exc:  # missing, truncated, foreign or damaged
        raise ModelLoadError(f"{path}: {type(exc).__name__}: {exc}") from exc


def chat_format_for(path: str) -> str | None:
    """None when the GGUF carries its chat template (llama.cpp then uses it); otherwise its family's format."""
    try:
        info = gguf_info(path)
    except ModelLoadError:
        return None  # the server reports the file itself
    if info.has_chat_template:
        return None
    family = f"{info.architecture} {info.name} {Path(path).name}".lower()
    return next((fmt for key, fmt in FAMILY_FORMATS.items() if key in family), "chatml")


def server_threads() -> int:
    """RAG_LLM_THREADS, or with 0 ("auto") every core: the model server is the only thing decoding."""
    return settings.RAG_LLM_THREADS or os.cpu_count() or 1


def approximate_tokens(text: str) -> int:
    """An upper estimate of a text's tokens: asking the server would queue behind the answer it is writing."""
    return len(text) // CHARS_PER_TOKEN + 1


@dataclass
class ChatModel:
    """One model behind an OpenAI-compatible endpoint."""

    name: str  # what answers report (the GGUF's file name, or the remote model's id)
    url: str
    request_model: str  # the `model` field sent
    n_ctx: int
    api_key: str = ""
    llama_cpp: bool = True  # the embedded llama.cpp server (its own sampling fields and JSON mode)
    fold_system: bool = False  # its chat format drops the system turn (SYSTEMLESS_FORMATS)
    warmed: set[str] = field(default_factory=set)
    prefill_rate: float | None = None  # prompt tokens/s measured on real answers (moving average)

    @cached_property
    def client(self) -> Any:
        """One OpenAI client per served model (thread-safe; its connection pool is reused across answers)."""
        import httpx2 as httpx  # the HTTP client openai 3 is built on
        import openai

        timeout = httpx.Timeout(settings.RAG_LLM_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        return openai.OpenAI(base_url=self.url, api_key=self.api_key or "none", max_retries=0, timeout=timeout)

    def record_prefill(self, tokens: int, seconds: float) -> None:
        """Fold one measured prefill (prompt tokens after the cached prefix, time to first token) into the rate."""
        if tokens <= 0 or seconds <= 0:
            return
        rate = tokens / seconds
        self.prefill_rate = rate if self.prefill_rate is None else 0.7 * self.prefill_rate + 0.3 * rate

    def count_tokens(self, text: str) -> int:
        return approximate_tokens(text)

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
    ) -> Generator[str, None, None]:
        """Token deltas as they are generated. Closing the iterator closes the connection, and the server stops
        generating. A server that fails or dies raises ModelUnavailable, before or after the first token."""
        import httpx2 as httpx  # the HTTP client openai 3 is built on
        import openai

        extra: dict[str, Any] = {"repeat_penalty": 1.1} if self.llama_cpp else {}
        if self.fold_system and len(messages) > 1 and messages[0]["role"] == "system":
            system, first, *rest = messages
            messages = [{**first, "content": f"{system['content']}\n\n{first['content']}"}, *rest]
        kwargs: dict[str, Any] = {
            "model": self.request_model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
            "top_p": top_p, "stream": True, "stop": STOP if stop is None else (stop or None), "extra_body": extra,
        }  # fmt: skip
        if seed is not None:
            kwargs["seed"] = seed
        if response_format is not None:
            kwargs["response_format"] = response_format
        try:
            chunks = self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:  # 5xx, 429, the operator's configuration (401 key, 404 model)…
            raise ModelUnavailable(f"The chat model server answered {exc.status_code}: {_detail(exc)}",
                                   status=exc.status_code) from exc  # fmt: skip
        except (openai.APIConnectionError, httpx.HTTPError) as exc:
            raise ModelUnavailable(f"The chat model server cannot be reached ({type(exc).__name__}).") from exc
        try:
            for chunk in chunks:
                delta = chunk.choices[0].delta.content if chunk.choices else None
                if delta:
                    yield delta
        except (openai.APIError, httpx.HTTPError) as exc:
            raise ModelUnavailable("The chat model process stopped in the middle of the answer; it is being "
                                   "restarted. Ask again in a moment.") from exc  # fmt: skip
        finally:
            chunks.close()  # a client that went away closes the connection: the server stops decoding

    def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any], max_tokens: int,
                      timeout_s: float) -> dict[str, Any]:  # fmt: skip
        """Generate under a JSON schema (a grammar on llama.cpp, `json_schema` elsewhere): the output parses."""
        formats = [{"type": "json_object", "schema": schema}] if self.llama_cpp else [
            {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": True}},
            {"type": "json_object", "schema": schema},  # llama.cpp's server behind RAG_LLM_URL knows only this
        ]  # fmt: skip
        for n, response_format in enumerate(formats):
            started, pieces = time.perf_counter(), []
            try:
                for delta in self.stream(messages, max_tokens=max_tokens, temperature=0.1, top_p=0.9, stop=[],
                                         response_format=response_format):  # fmt: skip
                    pieces.append(delta)
                    if time.perf_counter() - started > timeout_s:
                        raise TimeoutError(f"the model took longer than {timeout_s:.0f} s")
            except ModelUnavailable as exc:
                # A server that rejects this JSON mode (400/422; llama.cpp's says 500) may take the next one.
                if n == len(formats) - 1 or exc.status not in (400, 422, 500):
                    raise
                logger.info("The chat model server refused %s; trying the next JSON mode", response_format["type"])
                continue
            return dict(json.loads("".join(pieces)))
        raise AssertionError("unreachable")

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


def _detail(exc: Any) -> str:
    try:
        return str(exc.response.json().get("detail") or exc.message)[:300]
    except Exception:
        return str(getattr(exc, "message", exc))[:300]


class LLMGateway:
    """Which served model answers for a chain of wanted GGUFs (or the operator's remote engine)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.failures: list[str] = []
        self.reason = ""
        self._model: ChatModel | None = None
        self._models: dict[tuple[str, ...], ChatModel] = {}  # one per server start and model: keeps its warm state
        self._lock = threading.Lock()

    def model(self) -> ChatModel | None:
        """The model to answer with; None (see unavailable_reason) when there is none; ModelUnavailable when the
        local server is starting or restarting."""
        with self._lock:
            self._model = self._remote() if settings.RAG_LLM_URL else self._local()
            return self._model

    def _remote(self) -> ChatModel:
        url, api_key, name = settings.RAG_LLM_URL or "", settings.RAG_LLM_API_KEY or "", settings.RAG_LLM_MODEL or ""
        key = ("remote", url, name, api_key)
        if key not in self._models:
            name = name or "default"
            self._models[key] = ChatModel(name=name, url=url.rstrip("/"), request_model=name,
                                          n_ctx=settings.RAG_LLM_CONTEXT, api_key=api_key,
                                          llama_cpp=False)  # fmt: skip
        self.failures = []
        return self._models[key]

    def _local(self) -> ChatModel | None:
        from inference.runtime import FAILED, READY, STARTING, read_state

        state = read_state()
        self.failures = []
        if state is None or not state.is_current():
            self.reason = ("No chat model server is running (start it with `manage.py llm_serve`, as up.sh does, "
                           "or set RAG_LLM_URL).")  # fmt: skip
            return None
        if state.state == FAILED:
            self.failures = list(state.failures)
            self.reason = "No chat model could be served: " + "; ".join(state.failures or [state.detail])
            return None
        if state.state != READY:
            wait = 10 if state.state == STARTING else 5
            raise ModelUnavailable(f"The chat model is {state.state}: {state.detail}".rstrip(": "), wait)
        served = {path: alias for alias, path in state.models.items()}
        # The first wanted model this server can load; where that is the chain's default, the chain's own
        # failures (the models it fell back from) are the reason it is not the first.
        alias = None
        for path in self.paths:
            if path in served:
                alias = served[path]
                break
            why = ("not served by the model server (a model that failed, or one added after it started)"
                   if Path(path).is_file() else "no such file")  # fmt: skip
            self.failures.append(f"{Path(path).name}: {why}")
        if alias is None or alias == state.model:
            alias = state.model
            self.failures += state.failures
        key = (state.url, str(state.pid), alias)
        if key not in self._models:
            # A restarted server is a new URL and pid: the clients (and warm state) of earlier ones go.
            self._models = {k: m for k, m in self._models.items() if k[0] == state.url and k[1] == str(state.pid)}
            systemless = chat_format_for(state.models[alias]) in SYSTEMLESS_FORMATS
            self._models[key] = ChatModel(name=alias, url=state.url, request_model=alias, n_ctx=state.n_ctx,
                                          api_key=state.api_key, fold_system=systemless)  # fmt: skip
        return self._models[key]

    def loaded_model(self) -> ChatModel | None:
        """The model the last answer used (never contacts the server)."""
        return self._model

    def fallback_note(self) -> str:
        """Why the model serving is not the first of the chain ('' when it is)."""
        if not self.failures or self._model is None:
            return ""
        return f"Fell back to {self._model.name}: " + "; ".join(self.failures)

    def unavailable_reason(self) -> str:
        return self.reason or "No chat model is configured."


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
    """One gateway per wanted chain per process (the default chain when `paths` is None)."""
    chain = tuple(paths or ())
    with _gateways_lock:
        if chain not in _gateways:
            _gateways[chain] = LLMGateway(list(chain))
        return _gateways[chain]


def reset_gateways() -> None:
    with _gateways_lock:
        _gateways.clear()
