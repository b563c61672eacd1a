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
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from django.conf import settings

from core.problems import DomainError
from core.tokens import estimate_tokens
from inference.gguf import FAMILY_FORMATS as FAMILY_FORMATS
from inference.gguf import SYSTEMLESS_FORMATS as SYSTEMLESS_FORMATS
from inference.gguf import GGUFInfo as GGUFInfo
from inference.gguf import ModelLoadError as ModelLoadError
from inference.gguf import chat_format_for as chat_format_for
from inference.gguf import configured_paths as configured_paths
from inference.gguf import gguf_info as gguf_info
from inference.gguf import model_path_allowed as model_path_allowed
from inference.gguf import server_threads as server_threads
from inference.runtime import FAILED, READY, STARTING, read_state

logger = logging.getLogger(__name__)


# A model that starts writing the next "Question:" (or another excerpt) has finished its answer.
STOP = ["\nQuestion:", "\nExcerpts:"]
CONNECT_TIMEOUT_S = 5.0


class ModelUnavailable(DomainError):
    """The model server cannot answer now (starting, restarting, or it died mid-answer): retry later. `upstream`:
    the model server's own HTTP status, when it answered one."""

    status, code = 503, "model_unavailable"

    def __init__(self, reason: str, retry_after: int = 5, status: int | None = None) -> None:
        super().__init__(reason, retry_after=retry_after)
        self.reason, self.upstream = reason, status


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
        return estimate_tokens(text)  # the product's one estimate: the server's tokenizer would queue behind answers

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
                if n == len(formats) - 1 or exc.upstream not in (400, 422, 500):
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
