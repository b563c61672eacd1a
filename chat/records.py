"""Answers as they were given, and the verdicts people and agents give them.

Every door (the chat page, REST, MCP) records its answer here, so a verdict can name an answer by id and the
curation queue can show exactly what was retrieved, what was said and what the index held at that moment.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from chat.models import AnswerGround, AnswerRecord, Verdict
from chat.services import Answer
from knowledge import selectors, validity
from knowledge.models import Document, Status
from knowledge.shapes import HitSerializer
from tenants.models import ApiKey, Tenant
from tenants.principals import Viewer

HIT_TEXT_CHARS = 600  # a hit's text as kept with the answer: enough to judge it, not a copy of the corpus
MAX_CORRECT_ANSWER_CHARS = 2000


def index_state(*, viewer: Viewer, documents: list[Document]) -> dict[str, Any]:
    """What the index held for this answer: the versions of the documents it read, and the live total and last
    change the asker could see (a later reindex or curation shows as a different state)."""
    return {"documents": {d.document_id: d.version for d in documents}, **selectors.index_state(viewer=viewer)}


def answer_record(*, viewer: Viewer, question: str, result: Answer, channel: str, user: Any = None,
                  api_key: ApiKey | None = None, asked: dict[str, Any] | None = None,
                  agent_session: Any = None) -> AnswerRecord:  # fmt: skip
    """Keep the answer as it was given, with its receipt's ground: one AnswerGround row per cited document (what the
    recall scan compares with the documents as they become)."""
    hits = []
    for rank, data in enumerate(HitSerializer(result.hits, many=True).data, 1):
        text = str(data.get("text", ""))
        hits.append({**data, "rank": rank, "text": text[:HIT_TEXT_CHARS] + ("…" if len(text) > HIT_TEXT_CHARS else "")})
    documents = {hit.chunk.document_id: hit.chunk.document for hit in result.hits}
    principals = {"principals": viewer.principal_list}
    record = AnswerRecord.objects.create(
        tenant=viewer.tenant, channel=channel, question=question, answer=result.answer, status=result.status,
        generated=result.generated, model=result.model, citations=result.citations, claims=result.claims, hits=hits,
        index_state=index_state(viewer=viewer, documents=list(documents.values())),
        user=user if user is not None and user.is_authenticated else None, api_key=api_key,
        asked={**(asked or {}), **principals}, computed=result.computed, agent_session=agent_session,
        total_ms=result.total_ms or None, ttft_ms=result.ttft_ms, groups=_groups(viewer),
        top_source=result.hits[0].chunk.document.source.source_id if result.hits else "",
    )  # fmt: skip
    cited = {c.get("document_id"): c.get("version") for c in result.citations if isinstance(c, dict)}
    # Every cited document, whether a hit brought it or the answer's own note on time did ("before 2026, … said").
    read = [d for d in documents.values() if d.document_id in cited]
    missing = set(cited) - {d.document_id for d in read}
    if missing:
        read += list(selectors.visible_documents(viewer).filter(document_id__in=missing))
    successors = validity.successors_in_force([d.pk for d in read], viewer.tenant, record.created_at) if read else {}
    today = timezone.localdate(record.created_at)
    grounds = []
    for d in read:
        successor, expired = successors.get(d.pk), validity.expired(d.valid_until, today)
        grounds.append(
            AnswerGround(
                tenant_id=viewer.tenant.pk,
                answer=record,
                document_id=d.pk,
                version=int(cited[d.document_id] or d.version),
                readers=d.readers,
                retired=d.status == Status.RETIRED,
                expired=expired,
                superseded_by=successor[0] if successor else None,
                settled=bool(successor) or expired,
            )
        )
    AnswerGround.objects.bulk_create(grounds)
    return record


def _groups(viewer: Viewer) -> str:
    """The asker's groups as the insights filter them: " hr sales " (an admin, who reads everything: none)."""
    names = sorted(p.removeprefix("group:") for p in viewer.principals or () if p.startswith("group:"))
    return f" {' '.join(names)} " if names else ""


class VerdictInvalid(ValueError):
    """A verdict that cannot be recorded; `errors` maps each field to what is wrong with it."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass
class VerdictGiven:
    helpful: bool
    reason: str = ""
    claims: list[int] = field(default_factory=list)
    correct_answer: str = ""
    document_id: str = ""  # a hit's document_id, or a document's public id


def verdict_record(*, viewer: Viewer, record: AnswerRecord, given: VerdictGiven, channel: str, user: Any = None,
                   api_key: ApiKey | None = None) -> Verdict:  # fmt: skip
    """Check and keep one verdict. A document is looked up among those the giver sees in the answer's tenant."""
    if viewer.tenant.pk != record.tenant_id:
        raise ValueError("A verdict is given in the answer's own tenant.")
    errors: dict[str, str] = {}
    if given.reason and given.reason not in Verdict.Reason.values:
        errors["reason"] = "One of " + ", ".join(Verdict.Reason.values) + "."
    if given.helpful and given.reason:
        errors["reason"] = "A reason goes with a thumbs-down."
    claims = sorted(set(given.claims))
    if any(not 0 <= n < len(record.claims) for n in claims):
        errors["claims"] = (
            f"Claim indexes run from 0 to {len(record.claims) - 1}." if record.claims else "This answer has no claims."
        )
    correct = given.correct_answer.strip()
    if len(correct) > MAX_CORRECT_ANSWER_CHARS:
        errors["correct_answer"] = f"At most {MAX_CORRECT_ANSWER_CHARS:,} characters."
    document = None
    if given.document_id.strip():
        document = selectors.document_get(viewer=viewer, document_id=given.document_id.strip())
        if document is None:
            errors["document_id"] = "No such document in this knowledge base."
    if errors:
        raise VerdictInvalid(errors)
    return Verdict.objects.create(
        tenant=record.tenant, answer=record, helpful=given.helpful, reason=given.reason, claims=claims,
        correct_answer=correct, document=document, channel=channel,
        user=user if user is not None and user.is_authenticated else None, api_key=api_key,
    )  # fmt: skip


def answer_get(*, tenant: Tenant, answer_id: Any) -> AnswerRecord | None:
    return AnswerRecord.objects.for_tenant(tenant).filter(public_id=answer_id).first() if _is_uuid(answer_id) else None


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return False
    return True


MAX_LISTED_DOCUMENTS = 500


def verdict_documents(record: AnswerRecord, viewer: Viewer) -> dict[str, list[tuple[str, str]]]:
    """The documents a verdict may name: those retrieved for the answer first, then the tenant's other live
    documents by key (the first MAX_LISTED_DOCUMENTS), as (document_id, label) pairs; only those the viewer sees."""
    seen = _visible_ids(viewer, [str(hit.get("document_id")) for hit in record.hits])
    retrieved: dict[str, str] = {}
    for hit in record.hits:
        if str(hit.get("document_id")) not in seen:
            continue
        title = f" — {hit['title']}" if hit.get("title") else ""
        retrieved.setdefault(str(hit.get("document_id")), f"{hit.get('document_key')}{title}")
    others = (
        selectors.live_documents(viewer=viewer)
        .exclude(document_id__in=list(retrieved))
        .order_by("document_key")
        .only("document_id", "document_key", "title")[:MAX_LISTED_DOCUMENTS]
    )
    return {
        "retrieved": list(retrieved.items()),
        "others": [(d.document_id, d.display_key + (f" — {d.title}" if d.title else "")) for d in others],
    }


NOT_AVAILABLE = "(not available to you)"


def _visible_ids(viewer: Viewer, document_ids: list[str]) -> set[str]:
    wanted = sorted({d for d in document_ids if d})
    if not wanted:
        return set()
    return set(selectors.visible_documents(viewer).filter(document_id__in=wanted).values_list("document_id", flat=True))


def masked_for(viewer: Viewer, *, text: str, citations: list[dict[str, Any]], claims: list[dict[str, Any]]
               ) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """A kept answer as this viewer may read it now: a citation of a document it can no longer see says "not
    available to you" (no key, no title, no text), and so does every sentence resting on one, with its evidence."""
    visible = _visible_ids(viewer, [str(c.get("document_id") or "") for c in citations])
    hidden = {c.get("n") for c in citations if str(c.get("document_id") or "") not in visible}
    if not hidden:
        return text, citations, claims
    shown_citations = [
        {"n": c.get("n"), "hidden": True, "label": NOT_AVAILABLE} if c.get("n") in hidden else c for c in citations
    ]
    shown_claims = []
    for claim in claims:
        if hidden & set(claim.get("citations") or []):
            shown_claims.append({**claim, "text": NOT_AVAILABLE, "quotes": [], "hidden": True})
        else:
            shown_claims.append({**claim, "quotes": [q for q in claim.get("quotes") or [] if q.get("n") not in hidden]})
    shown_text = " ".join(str(c["text"]) for c in shown_claims) if shown_claims else NOT_AVAILABLE
    return shown_text, shown_citations, shown_claims
