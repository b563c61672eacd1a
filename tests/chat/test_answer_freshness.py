"""Answers and validity, with the real packaged chat model in its own process: an answer whose only evidence is
due a review says so (in its text and its claims), and a superseded value is never the answer while the current
document is retrievable."""

from __future__ import annotations

import datetime as dt

import pytest

from chat import excerpts, services
from knowledge.index import indexer
from tenants.principals import Viewer
from tests.factories import make_folder_source

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_model")]

TODAY = dt.date.today()


def _ask(tenant, question: str) -> services.Answer:  # type: ignore[no-untyped-def]
    return services.answer_question(viewer=Viewer.everything(tenant), question=question,
                                    options=excerpts.AnswerSettings(top_k=4))  # fmt: skip


def test_an_answer_resting_on_evidence_due_a_review_says_so(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    overdue = TODAY - dt.timedelta(days=10)
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={
        "warranty.md": f"---\nreview_by: {overdue}\n---\n# Warranty\n\nEvery laptop carries a two year warranty.\n",
    })  # fmt: skip
    indexer.drain()
    result = _ask(tenant_a, "How long is the laptop warranty?")
    assert result.status in ("answered", "partial"), (result.status, result.reason)
    assert "due a review since" in result.answer and "warranty.md" in result.answer
    assert result.citations and result.citations[0]["freshness"]["status"] == "review_due"
    standing = [c for c in result.claims if c.get("evidence_status")]
    assert standing and standing[0]["evidence_status"] == ["review_due"]
    assert result.claims[-1].get("note") == "freshness"


def test_a_superseded_value_is_never_the_answer(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    make_folder_source(tenant=tenant_a, root=tmp_path / "limits", files={
        "upload-limits-old.md": "# Upload limits\n\nThe largest file a customer can upload is 10 MB.\n",
        "upload-limits.md": "---\nsupersedes: upload-limits-old.md\n---\n# Upload limits\n\n"
                            "The largest file a customer can upload is 25 MB.\n",
    })  # fmt: skip
    indexer.drain()
    result = _ask(tenant_a, "What is the largest file a customer can upload?")
    assert result.status in ("answered", "partial"), (result.status, result.reason)
    stated = [c for c in result.claims if not c.get("note")]
    assert any("25" in c["text"] for c in stated) and not any("10 MB" in c["text"] for c in stated)
    cited = {n for c in stated for n in c["citations"]}
    assert {c["document_key"] for c in result.citations if c["n"] in cited} == {"upload-limits.md"}
    assert all(h.chunk.document.document_key != "upload-limits-old.md" for h in result.hits)
    # What the superseded document said is told as what it said before, with its own citation, never as the answer.
    earlier = [c for c in result.claims if c.get("note") == "earlier"]
    assert len(earlier) == 1 and "upload-limits-old.md said: “The largest file a customer can upload is 10 MB.”" in (
        earlier[0]["text"])  # fmt: skip
    assert result.citations[-1]["document_key"] == "upload-limits-old.md"
