"""Closing a curation item: one fix (through knowledge's own curation services), who did it, and the evaluation
question the item becomes. All or nothing: a fix that fails leaves the item open and the knowledge unchanged."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from chat.models import Verdict
from feedback import runs
from feedback.models import EvalQuestion, EvalRun, Fix, VerifierCase
from knowledge import ids, selectors
from knowledge import services as knowledge_services
from knowledge.models import Document, Status, Tag
from knowledge.search.retrieval import RetrieveFilters, retrieve
from knowledge.search.when import read_time
from tenants.models import Tenant
from tenants.principals import Viewer

MAX_PHRASE_CHARS = 1000


class FixRefused(ValueError):
    """The fix cannot be applied as asked; the message says why, for the admin."""


@dataclass
class FixRequest:
    action: str
    chunk_id: str = ""  # a chunk's public id (critical)
    document_id: str = ""  # a document's document_id or public id (retire, tag)
    tag: str = ""
    upload: tuple[str, bytes] | None = None  # (file name, content)
    expected: str = ""  # the phrase a right answer contains, for the evaluation question
    in_force_at: dt.date | None = None  # wrong_version: the day whose version the answer should have used


def item_fix(*, tenant: Tenant, verdict: Verdict, wanted: FixRequest, user: Any) -> Fix:
    """Apply one fix to an open item of this tenant's queue, close it, and add its evaluation question."""
    if verdict.tenant_id != tenant.pk or verdict.helpful:
        raise FixRefused("This is not an item of this tenant's curation queue.")
    if wanted.action not in Fix.Action.values:
        raise FixRefused("Choose one of the fixes.")
    expected = " ".join(wanted.expected.split())
    if len(expected) > MAX_PHRASE_CHARS:
        raise FixRefused(f"The expected phrase is limited to {MAX_PHRASE_CHARS:,} characters.")
    if not expected and wanted.action != Fix.Action.NOT_IN_KNOWLEDGE:
        raise FixRefused("Type the phrase a right answer contains: the evaluation question checks answers for it.")
    try:
        with transaction.atomic():
            if Fix.objects.select_for_update().filter(verdict=verdict).exists():
                raise FixRefused("This item was closed already.")
            fix = Fix(tenant=tenant, verdict=verdict, action=wanted.action, by=user, by_name=user.get_username())
            cases: list[VerifierCase] = []
            relevant = _apply(tenant, verdict, wanted, fix, cases)
            fix.save()
            for case in cases:
                case.fix = fix
            VerifierCase.objects.bulk_create(cases)
            answerable = wanted.action != Fix.Action.NOT_IN_KNOWLEDGE
            dated = wanted.action == Fix.Action.WRONG_VERSION
            EvalQuestion.objects.create(
                tenant=tenant, question=dated_question(verdict.answer.question, wanted.in_force_at) if dated
                else verdict.answer.question, relevant_docs=relevant if answerable else [],
                answer=expected if answerable else "", answerable=answerable, fix=fix, created_by=fix.by_name,
                as_of=wanted.in_force_at if dated else None,
            )  # fmt: skip
    except IntegrityError as exc:  # another admin closed it at the same moment
        raise FixRefused("This item was closed already.") from exc
    return fix


def dated_question(question: str, day: dt.date | None) -> str:
    """The question of a wrong-version fix as its evaluation asks it: as written when it names the time itself ("in
    2025"), else with the day the staff member gave, in words the answer pipeline reads as a time
    (knowledge/search/when.py)."""
    if day is None or read_time(question, now=timezone.now()) is not None:
        return question
    return f"{question.rstrip()} (as of {day.isoformat()})"


VALUE_RE = re.compile(
    r"[-+]?\d[\d.,]*(?:\s?(?:%|percent|EUR|USD|GBP|€|\$|£|[a-zA-Z]+(?=[\s.,;:!?)]|$)))?|[€$£]\s?\d[\d.,]*"
    r"|`[^`]{1,80}`|\"[^\"]{1,80}\"|“[^”]{1,80}”"
)


def expected_phrase(correct_answer: str, question: str) -> str:
    """The phrase an evaluation checks answers for, from what a staff member wrote as the right answer: the value
    they gave (a number with its unit, a quoted or code phrase), not their whole sentence ("It should say 42 EUR,
    as in the 2025 policy" → "42 EUR"). A value the question itself names (its year) is not the answer; a short
    answer is kept whole."""
    text = " ".join(correct_answer.split())
    if len(text.split()) <= 3:
        return text[:MAX_PHRASE_CHARS]
    asked = " ".join(question.split()).lower()
    for match in VALUE_RE.finditer(text):
        value = match.group(0).strip().strip('`"“”').rstrip(".,")
        if value and value.lower() not in asked and value.split()[0].lower() not in asked:
            return value[:MAX_PHRASE_CHARS]
    return text[:MAX_PHRASE_CHARS]


def misread_cases(verdict: Verdict) -> list[VerifierCase]:
    """The claims of a judged answer with the excerpts they cite: the sentences judged wrong, else every cited one."""
    record = verdict.answer
    claims = [record.claims[n] for n in verdict.claims if n < len(record.claims)] or record.claims
    chunk_of = {c.get("n"): str(c.get("chunk_id") or "") for c in record.citations}
    text_of = {str(h.get("chunk_id")): h for h in record.hits}
    cases = []
    for claim in claims:
        for n in claim.get("citations") or []:
            hit = text_of.get(chunk_of.get(n, ""))
            if hit and str(claim.get("text") or "").strip() and str(hit.get("text") or "").strip():
                cases.append(VerifierCase(tenant=verdict.tenant, question=record.question, claim=str(claim["text"]),
                                          excerpt=str(hit["text"]), document_key=str(hit.get("document_key") or ""),
                                          chunk_id=str(hit.get("chunk_id") or "")))  # fmt: skip
    return cases


def _apply(tenant: Tenant, verdict: Verdict, wanted: FixRequest, fix: Fix, cases: list[VerifierCase]) -> list[str]:
    """Do the fix; returns the keys of the documents that hold the right answer (the question's relevant_docs).
    A fix whose effect already holds is refused (the item stays open): it would close the item and change nothing."""
    named = [verdict.document.display_key] if verdict.document is not None else []
    if wanted.action == Fix.Action.MISREAD:
        cases.extend(misread_cases(verdict))
        if not cases:
            raise FixRefused("This answer cites no excerpt, so no excerpt was misread: choose another fix.")
        fix.detail = f"{len(cases)} claim(s) with their excerpts, now verifier test cases"
        return list(dict.fromkeys([*named, *(c.document_key for c in cases if c.document_key)]))
    if wanted.action == Fix.Action.CRITICAL:
        chunk = selectors.chunk_get(viewer=Viewer.everything(tenant), public_id=wanted.chunk_id)
        if chunk is None or chunk.status != Status.ACTIVE:
            raise FixRefused("That chunk is no longer in the knowledge base (a newer version replaced it).")
        if chunk.critical:
            raise FixRefused("That chunk is marked critical already, so marking it again changes nothing: choose the "
                             "fix that fits (the answer misread it, or another chunk holds the answer).")  # fmt: skip
        knowledge_services.chunks_set_critical(
            tenant=tenant, chunks=selectors.chunk_rows(viewer=Viewer.everything(tenant), chunk=chunk), critical=True
        )
        fix.chunk, fix.document = chunk, chunk.document
        fix.detail = f"{chunk.document.display_key} · {chunk.heading or f'chunk {chunk.index + 1}'}"
        return [chunk.document.display_key]
    if wanted.action in (Fix.Action.RETIRE, Fix.Action.TAG):
        document = _document(tenant, wanted.document_id)
        rows = selectors.document_rows(viewer=Viewer.everything(tenant), document=document)
        if wanted.action == Fix.Action.RETIRE and document.status == Status.RETIRED:
            raise FixRefused(f"{document.display_key} is retired already: choose the fix that fits.")
        if wanted.action == Fix.Action.TAG and document.tags.filter(name=Tag.normalise(wanted.tag or "-")).exists():
            raise FixRefused(f"{document.display_key} has the tag {wanted.tag.strip()} already: choose the fix that "
                             "fits.")  # fmt: skip
        if wanted.action == Fix.Action.RETIRE:
            knowledge_services.documents_retire(tenant=tenant, documents=rows, actor=fix.by_name)
            fix.document, fix.detail = document, document.display_key
            return [key for key in named if key != document.display_key]
        try:
            knowledge_services.rows_add_tag(tenant=tenant, rows=rows, tag_name=wanted.tag)
        except ValueError as exc:
            raise FixRefused("Type the tag to add.") from exc
        fix.document, fix.detail = document, f"{document.display_key} · tag {wanted.tag.strip()}"
        return named or [document.display_key]
    if wanted.action == Fix.Action.UPLOAD:
        if wanted.upload is None or not wanted.upload[1]:
            raise FixRefused("Choose the file that holds the answer.")
        try:
            job = knowledge_services.upload_enqueue(tenant=tenant, source=None, uploads=[wanted.upload])
        except (knowledge_services.UploadQuotaExceeded, knowledge_services.UploadNotStored) as exc:
            raise FixRefused(str(exc)) from exc
        stored = list(job.params.get("files") or [])
        if not stored:  # the job row goes with the transaction; its folder goes now
            knowledge_services.upload_files_remove(job)
            problems = [e.get("error", "") for e in job.params.get("errors", []) + job.params.get("skips", [])]
            raise FixRefused("The file was not accepted: " + (" ".join(problems) or "nothing in it could be read."))
        fix.detail = ", ".join(ids.display_name(key) for key in stored)[:1000]
        return [ids.display_name(key) for key in stored]
    if wanted.action == Fix.Action.WRONG_VERSION:
        day = wanted.in_force_at
        if day is None or day > timezone.localdate():
            raise FixRefused("Give the day whose version the answer should have used (today or earlier).")
        fix.detail = f"in force at {day.isoformat()}"
        return named or _in_force_then(tenant, verdict.answer.question, day)
    if wanted.action in COMPUTED_FIXES:
        table = computed_table(verdict)
        if table is None:
            raise FixRefused("This answer was not computed over a table: choose another fix.")
        fix.detail = f"{table.get('name', '')}: {table.get('sql', '')}"[:1000]
        if wanted.action == Fix.Action.WRONG_TABLE:  # the table read is not where the answer is
            return named
        cited = [str(c.get("document_key")) for c in verdict.answer.citations if c.get("table")]
        return list(dict.fromkeys(named + cited))
    if wanted.action == Fix.Action.DISMISS:
        cited = [str(c.get("document_key")) for c in verdict.answer.citations if c.get("document_key")]
        return list(dict.fromkeys(named + cited))
    return []  # not in our knowledge


COMPUTED_FIXES = (Fix.Action.WRONG_FILTER, Fix.Action.WRONG_TABLE, Fix.Action.WRONG_DIRECTION)


def computed_table(verdict: Verdict) -> dict[str, Any] | None:
    """What a computed answer ran (chat/computing.py's citation: the table, the query, its result, the rows it stood
    on), or None when the answer was not computed."""
    return next((c["table"] for c in verdict.answer.citations if isinstance(c.get("table"), dict)), None)


def _in_force_then(tenant: Tenant, question: str, day: dt.date) -> list[str]:
    """The document that best answers the question among those in force on `day` (a stated window covering it, or
    the version served then): the evaluation question's relevant document when the staff member named none."""
    at = dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC)
    for filters in (RetrieveFilters(in_force_at=at), RetrieveFilters(as_of=at)):
        hits = retrieve(viewer=Viewer.everything(tenant), query=question, top_k=1, filters=filters)
        if hits:
            return [hits[0].chunk.document.display_key]
    return []


def _document(tenant: Tenant, document_id: str) -> Document:
    document = (
        selectors.document_get(viewer=Viewer.everything(tenant), document_id=document_id.strip())
        if document_id.strip()
        else None
    )
    if document is None:
        raise FixRefused("Choose a document of this knowledge base.")
    return document


def eval_set_jsonl(*, tenant: Tenant) -> str:
    """The tenant's evaluation set as JSON Lines in the public eval set's format (shared/eval/questions.jsonl), so
    `answer_eval.py --questions` and `run_eval.py` score it against a running server as they score the public one."""
    lines = []
    for n, q in enumerate(EvalQuestion.objects.for_tenant(tenant).order_by("created_at", "pk"), 1):
        lines.append(json.dumps(eval_question_row(q, n, corpus=tenant.slug), ensure_ascii=False))
    return "\n".join(lines) + ("\n" if lines else "")


def eval_question_row(q: EvalQuestion, n: int, *, corpus: str) -> dict[str, Any]:
    return {
        "id": f"T{n:03d}", "corpus": corpus, "lang": q.lang, "kind": q.kind, "question": q.question,
        "relevant_docs": q.relevant_docs, "answer": q.answer or None if q.answerable else None,
        "evidence": q.evidence or None, "answerable": q.answerable, "uuid": str(q.public_id),
        **({"as_of": q.as_of.isoformat()} if q.as_of else {}),
    }  # fmt: skip


def evaluation_enqueue(*, tenant: Tenant, answers: bool, started_by: str, trigger: str = "page") -> EvalRun:
    """Queue a run of the tenant's evaluation set: the web server's runner takes it within seconds
    (feedback/runner.py; answers take seconds each)."""
    return runs.queue(tenant=tenant, answers=answers, started_by=started_by, trigger=trigger)
