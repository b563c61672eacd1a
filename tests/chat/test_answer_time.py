"""Answers that know when (issue 48, in part): a question about a past year reads what was in force then, one about
an earlier state or a change reads every version, each excerpt says when it was in force, a git file's excerpt
carries its commit message, and a claim that gives a reason must find that reason in the evidence. The fixtures are
those of bench/time_corpus.py (bench/data/time/), ingested by the real pipeline into a real store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from chat import excerpts, verdicts
from knowledge.claims import EvidenceText, Verifier
from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.ingest.pipeline import sync_git
from knowledge.models import Source
from knowledge.search.when import read_time
from tenants.principals import Viewer

NOW = dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC)


def test_the_time_a_question_asks_about_is_read_by_rules():
    assert read_time("What was the per diem in 2025?", now=NOW).at.date() == dt.date(2025, 12, 31)  # type: ignore[union-attr]
    assert read_time("¿Cuánto era la dieta en 2024?", now=NOW).at.date() == dt.date(2024, 12, 31)  # type: ignore[union-attr]
    assert read_time("How many retries before November 2025?", now=NOW).at.date() == dt.date(2025, 10, 31)  # type: ignore[union-attr]
    assert read_time("What was the value originally?", now=NOW).history  # type: ignore[union-attr]
    assert read_time("Why was the timeout raised to 90 s?", now=NOW).history  # type: ignore[union-attr]
    both = read_time("What was the allowance in 2025 and what is it now?", now=NOW)
    assert both is not None and both.at is not None and both.history
    for now_question in ("What is the per diem?", "Why does Flask use a secret key?", "Which Python 3.11 features?",
                         f"What is the plan for {NOW.year}?"):  # fmt: skip
        assert read_time(now_question, now=NOW) is None, now_question


@pytest.fixture
def company(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from time_corpus import stage_one, stage_two

    stage_one(tmp_path)
    policies = pipeline.folder_source_get_or_create(tenant=tenant_a, name="policies", path=tmp_path / "policies")
    pipeline.sync_folder(source=policies, root=tmp_path / "policies")
    stage_two(tmp_path)
    pipeline.sync_folder(source=policies, root=tmp_path / "policies")
    repo = Source.objects.create(tenant=tenant_a, kind="git", name="order-service", label="order-service",
                                 source_id="src:acme:git:order-service",
                                 path=str(tmp_path / "order-service"))  # fmt: skip
    sync_git(source=repo)
    indexer.drain()
    return tenant_a


def _sources(tenant, question: str) -> excerpts.Sources:  # type: ignore[no-untyped-def]
    return excerpts.prepare(viewer=Viewer.everything(tenant), question=question,
                            options=excerpts.AnswerSettings(top_k=6))  # fmt: skip


def test_a_question_about_a_past_year_reads_the_policy_in_force_then(company):
    then = _sources(company, "What was the per diem for business travel in 2025?")
    keys = [hit.chunk.document.document_key for hit in then.excerpts]
    assert keys[0] == "travel-2025.md" and "travel-2026.md" not in keys
    prompt, _ = excerpts.focused_prompt("What was the per diem in 2025?", then, excerpts.AnswerSettings())
    assert "in force 2025-01-01 to 2025-12-31" in prompt.messages[1]["content"]
    now = _sources(company, "What is the per diem for business travel?")
    assert [hit.chunk.document.document_key for hit in now.excerpts][0] == "travel-2026.md" and now.when is None


def test_a_question_about_an_earlier_state_reads_every_version_labelled(company):
    before = _sources(company, "How many office days a week were required before the remote work policy changed?")
    texts = [hit.chunk.text for hit in before.excerpts if hit.chunk.document.document_key == "remote-work.md"]
    assert any("2 days" in text for text in texts) and any("3 days" in text for text in texts)
    prompt, _ = excerpts.focused_prompt("Before?", before, excerpts.AnswerSettings())
    assert "the version before the current one" in prompt.messages[1]["content"]
    assert (
        "Before this change: Staff work from the office 2 days a week. / The home-office allowance is 25 EUR a month. "
        "After it: Staff work from the office 3 days a week."
    ) in prompt.messages[1]["content"]


def test_a_git_files_excerpt_carries_the_commit_message_as_evidence(company):
    why = _sources(company, "Why was the payment timeout raised to 60 seconds?")
    prompt, evidence = excerpts.focused_prompt(
        "Why was the payment timeout raised to 60 seconds?", why, excerpts.AnswerSettings()
    )
    assert "3-D Secure" in prompt.messages[1]["content"]
    notes = [unit[unit.index("Commit of ") :] for e in evidence for unit in e.units if "Commit of " in unit]
    assert any(
        n.startswith(
            "Commit of 2025-05-12 (12 May 2025) by Marta Silva. Message: Raise the payment timeout to 60 s: the card "
            "provider's 3-D Secure step takes up to 45 seconds. Before this change: payment_timeout_s = 30. After it: "
            "payment_timeout_s = 60."
        )
        for n in notes
    ), notes
    assert not any("accounting system" in n for n in notes)  # the invoice change's reason is not offered here


def test_a_reason_the_evidence_does_not_state_is_not_supported():
    text = (
        "Commit of 2025-05-12 by Marta Silva: Raise the payment timeout to 60 s: the card provider's 3-D Secure "
        "step takes up to 45 seconds\npayment_timeout_s = 60"
    )
    evidence = [EvidenceText(text=text, units=[])]
    verifier = Verifier(evidence, question="Why was the payment timeout raised to 60 seconds?")
    stated = "The payment timeout was raised to 60 seconds because the 3-D Secure step takes up to 45 seconds."
    invented = "The payment timeout was raised to 60 seconds because finance requested a longer checkout window."
    assert max(verifier.support(stated, None)) >= 1.0
    assert max(verifier.support(invented, None)) < 1.0


def _verdict(tenant, question: str, draft: str) -> verdicts.Verdict:  # type: ignore[no-untyped-def]
    sources = _sources(tenant, question)
    _, evidence = excerpts.focused_prompt(question, sources, excerpts.AnswerSettings())
    return verdicts.verified(question, draft, sources, evidence)


def test_a_claim_rests_on_evidence_in_force_at_the_time_it_speaks_of(company):
    question = "What was the per diem for business travel in 2025 and what is it now?"
    stale = _verdict(company, question, "The per diem for business travel was 55 EUR a day in 2025.")
    assert stale.status == "not_verified" and "problem: time" in stale.reason
    assert [c["problem"] for c in stale.claims if c["supported"] is not None] == ["time"]
    right = _verdict(company, question, "The per diem for business travel was 42 EUR a day in 2025. "
                                        "Now the per diem is 55 EUR a day.")  # fmt: skip
    assert right.status == "answered", right.claims
    assert {c["document_key"] for c in right.citations} == {"travel-2025.md", "travel-2026.md"}
    backwards = _verdict(company, question, "Now the per diem for business travel is 42 EUR a day.")
    assert backwards.status == "not_verified" and backwards.claims[0]["problem"] == "time"


def test_the_value_before_the_last_change_is_the_one_that_change_replaced(company):
    question = "What was max_items_per_order before the last change?"
    sources = _sources(company, question)
    assert sources.when is not None and sources.when.earlier
    current = _verdict(company, question, "Before the last change, max_items_per_order was 60.")
    older = _verdict(company, question, "Before the last change, max_items_per_order was 50.")
    replaced = _verdict(company, question, "Before the last change, max_items_per_order was 40.")
    assert current.status == "not_verified" and current.claims[0]["problem"] == "time"  # today's value
    assert older.status == "not_verified"  # the value of two changes ago is not the one before the last
    assert replaced.status == "answered", replaced.claims
    original = _verdict(company, "What was max_items_per_order originally?", "Originally max_items_per_order was 50.")
    assert original.status == "answered", original.claims
    # Without the first version among the excerpts, the earliest change that touched it says what it replaced.
    question = "What was max_items_per_order originally?"
    sources = _sources(company, question)
    kept = [(f, hit) for f, hit in zip(sources.focused, sources.excerpts, strict=True)
            if hit.chunk.document_version.version != 1]  # fmt: skip
    sources.focused, sources.excerpts = [f for f, _ in kept], [hit for _, hit in kept]
    _, evidence = excerpts.focused_prompt(question, sources, excerpts.AnswerSettings())
    verifier = verdicts.answer_verifier(question, evidence, sources.when)
    assert verifier.check("Originally max_items_per_order was 50.")[0].supported
    assert not verifier.check("Originally max_items_per_order was 40.")[0].supported


def test_an_answer_about_now_whose_value_changed_says_what_it_was_before_cited(company):
    viewer = Viewer.everything(company)

    def answer(question: str, draft: str) -> verdicts.Verdict:
        sources = _sources(company, question)
        _, evidence = excerpts.focused_prompt(question, sources, excerpts.AnswerSettings())
        return verdicts.verified(question, draft, sources, evidence, viewer=viewer)

    hotel = answer("What is the hotel allowance per night?", "The hotel allowance is 140 EUR a night in every city.")
    assert hotel.status == "answered"
    assert [c["document_key"] for c in hotel.citations] == ["travel-2026.md", "travel-2025.md"]
    n = len(_sources(company, "What is the hotel allowance per night?").excerpts) + 1  # after every excerpt's number
    assert hotel.text.endswith(
        "Before 2026-01-01 (1 January 2026), travel-2025.md said: “The hotel allowance is 120 EUR a night in "
        f"every city.” [{n}]"
    )
    assert hotel.claims[-1]["note"] == "earlier" and hotel.claims[-1]["citations"] == [n]
    assert "# Travel policy 2025" in hotel.citations[-1]["text"]
    office = answer("How many days a week do staff work from the office?", "Staff work from the office 3 days a week.")
    assert [c["document_key"] for c in office.citations] == ["remote-work.md", "remote-work.md"]
    assert "remote-work.md said: “Staff work from the office 2 days a week" in office.text
    assert office.citations[1]["version"] == 1 and office.citations[0]["version"] == 2
    plain = answer("What is the per diem for business travel?", "The per diem for business travel is 55 EUR a day.")
    assert "said: “The per diem for business travel is 42 EUR a day.”" in plain.text
    # A value that came with an earlier change than the document's latest has nothing to add here.
    unchanged = answer("How many retry attempts does the order service make?", "retry_attempts is 5.")
    assert unchanged.status == "answered" and len(unchanged.citations) == 1 and "said:" not in unchanged.text
    assert unchanged.citations[0]["commit"]["date"] == "2026-06-09" and unchanged.citations[0]["versions"] == 7
