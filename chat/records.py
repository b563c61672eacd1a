"""Answers as they were given, and the verdicts people and agents give them.

Every door (the chat page, REST, MCP) records its answer here, so a verdict can name an answer by id and the
curation queue can show exactly what was retrieved, what was said and what the index held at that moment.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from chat.models import AnswerRecord, Verdict
from chat.services import Answer
from knowledge import selectors
from knowledge.models import Document
from knowledge.shapes import HitSerializer
from tenants.models import ApiKey, Tenant

HIT_TEXT_CHARS = 600  # a hit's text as kept with the answer: enough to judge it, not a copy of the corpus
MAX_CORRECT_ANSWER_CHARS = 2000


def index_state(*, tenant: Tenant, documents: list[Document]) -> dict[str, Any]:
    """What the index held for this answer: the versions of the documents it read, and the tenant's live total and
    last change (a later reindex or curation shows as a different state)."""
    return {"documents": {d.document_id: d.version for d in documents}, **selectors.index_state(tenant=tenant)}


def answer_record(*, tenant: Tenant, question: str, result: Answer, channel: str, user: Any = None,
                  api_key: ApiKey | None = None) -> AnswerRecord:  # fmt: skip
    hits = []
    for rank, data in enumerate(HitSerializer(result.hits, many=True).data, 1):
        text = str(data.get("text", ""))
        hits.append({**data, "rank": rank, "text": text[:HIT_TEXT_CHARS] + ("…" if len(text) > HIT_TEXT_CHARS else "")})
    documents = list({hit.chunk.document_id: hit.chunk.document for hit in result.hits}.values())
    return AnswerRecord.objects.create(
        tenant=tenant, channel=channel, question=question, answer=result.answer, status=result.status,
        generated=result.generated, model=result.model, citations=result.citations, claims=result.claims, hits=hits,
        index_state=index_state(tenant=tenant, documents=documents),
        user=user if user is not None and user.is_authenticated else None, api_key=api_key,
    )  # fmt: skip


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


def verdict_record(*, record: AnswerRecord, given: VerdictGiven, channel: str, user: Any = None,
                   api_key: ApiKey | None = None) -> Verdict:  # fmt: skip
    """Check and keep one verdict. A document is looked up in the answer's own tenant only."""
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
        document = selectors.document_get(tenant=record.tenant, document_id=given.document_id.strip())
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


def verdict_documents(record: AnswerRecord) -> dict[str, list[tuple[str, str]]]:
    """The documents a verdict may name: those retrieved for the answer first, then the tenant's other live
    documents by key (the first MAX_LISTED_DOCUMENTS), as (document_id, label) pairs."""
    retrieved: dict[str, str] = {}
    for hit in record.hits:
        title = f" — {hit['title']}" if hit.get("title") else ""
        retrieved.setdefault(str(hit.get("document_id")), f"{hit.get('document_key')}{title}")
    others = (
        selectors.live_documents(tenant=record.tenant)
        .exclude(document_id__in=list(retrieved))
        .order_by("document_key")
        .only("document_id", "document_key", "title")[:MAX_LISTED_DOCUMENTS]
    )
    return {
        "retrieved": list(retrieved.items()),
        "others": [(d.document_id, d.display_key + (f" — {d.title}" if d.title else "")) for d in others],
    }
