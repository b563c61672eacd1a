"""A gap's owner closes it: they write (or approve the draft as) the missing text, which becomes a document of the
tenant's upload source, and the gap's questions join the tenant's evaluation set with the phrase a right answer
contains — so the fix is measured and stays fixed. The gap closes when an evaluation run answers all its questions
with that phrase (`close_answered`, on every finished run); until then it is `written`."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.utils import timezone

from feedback.models import EvalQuestion, EvalRun
from insights.models import Gap
from knowledge import services as knowledge
from tenants.models import Membership

MAX_TEXT = 20_000
GAP_PREFIX = "gap-answer"  # an upload's key has no folder: "gap-answer-where-can-employees-park-1a2b3c4d.md"


class GapInvalid(ValueError):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def may_close(gap: Gap, user: Any) -> bool:
    """Its owner, or one of the tenant's admins."""
    if gap.owner_id is not None and gap.owner_id == user.pk:
        return True
    return Membership.objects.filter(tenant_id=gap.tenant_id, user=user, role=Membership.Role.ADMIN).exists()


def document_key(gap: Gap) -> str:
    words = re.findall(r"[a-z0-9]+", gap.representative.casefold())[:8] or ["gap"]
    return f"{GAP_PREFIX}-{'-'.join(words)}-{str(gap.public_id)[:8]}.md"


def gap_write(*, gap: Gap, text: str, expected: str, user: Any) -> Gap:
    """The missing text into a new document (the tenant's upload source, ingested by the worker), the gap's questions
    into the evaluation set with `expected`; the gap is then written, waiting for its questions to be answered."""
    text, expected = text.strip(), expected.strip()
    errors = {}
    if not text:
        errors["text"] = "Write the missing text (or keep the draft)."
    elif len(text) > MAX_TEXT:
        errors["text"] = f"At most {MAX_TEXT:,} characters."
    if not expected:
        errors["expected"] = "Give a phrase every right answer contains, e.g. a number or a name."
    elif expected.casefold() not in text.casefold():
        errors["expected"] = "The phrase must be in the text you wrote."
    if errors:
        raise GapInvalid(errors)
    key = document_key(gap)
    body = f"# {gap.representative.strip().rstrip('?')}\n\n{text}\n"
    with transaction.atomic():
        knowledge.upload_enqueue(tenant=gap.tenant, source=None, uploads=[(key, body.encode())])
        for question in gap.questions.all():
            made = EvalQuestion.objects.create(
                tenant=gap.tenant,
                question=question.question,
                relevant_docs=[key],
                answer=expected,
                answerable=True,
                created_by=user.get_username(),
            )
            question.eval_question = made
            question.save(update_fields=["eval_question"])
        gap.written, gap.expected, gap.written_by, gap.written_at = text, expected, user.get_username(), timezone.now()
        gap.state = Gap.State.WRITTEN
        gap.save(update_fields=["written", "expected", "written_by", "written_at", "state"])
    return gap


def close_answered(run: EvalRun) -> int:
    """After an evaluation run with answers: each written gap of the tenant whose questions were all answered with
    their expected phrase closes. Returns how many closed."""
    if run.state != EvalRun.State.DONE or not run.answers:
        return 0
    passed = {row.get("uuid") for row in run.results if row.get("ans_phrase") == 1.0 and not row.get("refused")}
    closed = 0
    for gap in Gap.objects.filter(tenant_id=run.tenant_id, state=Gap.State.WRITTEN):
        asked = [
            str(q.eval_question.public_id) for q in gap.questions.select_related("eval_question") if q.eval_question
        ]
        if asked and all(uuid in passed for uuid in asked):
            gap.state, gap.closed_at = Gap.State.CLOSED, timezone.now()
            gap.save(update_fields=["state", "closed_at"])
            closed += 1
    return closed
