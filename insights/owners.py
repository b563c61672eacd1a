"""A gap's owner closes it: they write (or approve the draft as) the missing text, and the gap's questions join the
tenant's evaluation set with the phrase a right answer contains — so the fix is measured and stays fixed. The gap
closes when an evaluation run answers all its questions with that phrase (`close_answered`, on every finished run);
until then it is `written`.

Where the text goes (`Destination`):
- `new`: a new document in a source that accepts one (a source of uploaded files; the tenant's own by default);
- `edit`: an edit of the gap's nearest document, when ragsite holds its text (a text document of a source of uploaded
  files): its text as ragsite read it, with the missing sentence, becomes the document's next version;
- `there`: the nearest document lives elsewhere (a folder, a repository, a wiki, a website): the owner edits it where
  it lives and says so here, with the phrase; a sync of its source is queued, and the evaluation checks the edit.
The nearest document is always one the whole tenant may read (insights/gaps._open_hits): nothing restricted is shown
to the owner or rewritten through a gap."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from feedback import evaluation
from feedback.models import EvalQuestion, EvalRun
from insights.models import Gap
from knowledge import selectors
from knowledge import services as knowledge
from knowledge.locations import FolderNotAllowed
from knowledge.models import Document, Source, Status
from tenants.models import Membership
from tenants.principals import Viewer, viewer_for

MAX_TEXT = 20_000
MAX_EDITED = 200_000  # an edited document's whole text
EDITABLE = frozenset({".md", ".markdown", ".txt", ".text", ".rst"})  # what ragsite can write back as it read it
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


@dataclass
class Destination:
    """Where a gap's text can go, for the page: sources that accept a new document, and the nearest document —
    editable here (`editable`), or to be edited where it lives (`lives`: its source, in words, and its address)."""

    sources: list[Source]
    document: Document | None
    editable: bool
    current: str  # the nearest document's text as ragsite read it ("" unless editable)
    lives: str
    url: str
    elsewhere: bool = False  # read from a source that syncs: edited where it lives


def _nearest_document(gap: Gap) -> Document | None:
    """The document whose sentence bears most on the gap (its draft's first), else the retriever's first hit; only
    a live one the whole tenant may read (the one resolver, for a viewer holding `tenant`)."""
    sentences = gap.draft.get("sentences") or []
    document_id = (sentences[0].get("document_id") if sentences else None) or gap.nearest.get("document_id")
    if not document_id:
        return None
    everyone = Viewer(tenant=gap.tenant, principals=frozenset({"tenant"}))
    found = selectors.visible_documents(everyone).filter(document_id=str(document_id), status=Status.ACTIVE)
    return found.select_related("source").first()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _editable(document: Document) -> bool:
    suffix = PurePosixPath(document.document_key).suffix.casefold()
    return knowledge.source_capabilities(document.source)["accepts_uploads"] and suffix in EDITABLE


def destinations(gap: Gap) -> Destination:
    everyone = Viewer(tenant=gap.tenant, principals=frozenset({"tenant"}))
    sources = [  # a gap's answer is for everyone who asked: only a source the whole tenant reads
        source
        for source in Source.objects.for_tenant(gap.tenant).order_by("-is_default", "label")
        if knowledge.source_capabilities(source)["accepts_uploads"] and everyone.sees(source.access or [])
    ]
    document = _nearest_document(gap)
    if document is None:
        return Destination(sources, None, False, "", "", "")
    editable = _editable(document)
    current = ""
    if editable:
        version = selectors.version_get(viewer=everyone, document=document, version=document.version)
        current = selectors.version_text(viewer=everyone, version=version) if version else ""
        # Only a text ragsite can give back byte for byte (its chunks joined hash to the file's SHA-256): a front
        # matter, a line the chunker left out, would otherwise be lost from the next version. Not too long either.
        exact = version is not None and version.content_hash in {_sha256(current), _sha256(current + "\n")}
        editable = exact and 0 < len(current) <= MAX_EDITED
    capabilities = knowledge.source_capabilities(document.source)
    url = document.source_path if document.source_path.startswith(("http://", "https://")) else ""
    return Destination(sources, document, editable, current, capabilities["label"], url, capabilities["syncable"])


def _checked(text: str, expected: str, *, limit: int, written_elsewhere: bool = False) -> tuple[str, str]:
    text, expected = text.strip(), expected.strip()
    errors = {}
    if not text and not written_elsewhere:
        errors["text"] = _("Write the missing text (or keep the draft).")
    elif len(text) > limit:
        errors["text"] = _("At most %(limit)s characters.") % {"limit": f"{limit:,}"}
    if not expected:
        errors["expected"] = _("Give a phrase every right answer contains, e.g. a number or a name.")
    elif not written_elsewhere and expected.casefold() not in text.casefold():
        errors["expected"] = _("The phrase must be in the text you wrote.")
    if errors:
        raise GapInvalid(errors)
    return text, expected


def _writer(gap: Gap, user: Any) -> list[str] | None:
    """The writer's principals (None for an admin, who sees everything): an upload job changes no document they cannot
    see."""
    membership = Membership.objects.filter(tenant_id=gap.tenant_id, user=user).first()
    return viewer_for(tenant=gap.tenant, membership=membership).principal_list


def gap_write(
    *, gap: Gap, text: str, expected: str, user: Any, where: str = "new", source: str = "", version: str = ""
) -> Gap:
    """The missing text where it goes (`where`: new, edit, there — see the module), the gap's questions into the
    evaluation set with `expected`; the gap is then written, waiting for its questions to be answered. Only an open
    gap is written (a second submission is refused); an edit names the `version` it was made on, and is refused when
    the document has changed since (nothing of the newer version is overwritten)."""
    if gap.state != Gap.State.OPEN:
        raise GapInvalid({"where": _("This gap was already written.")})
    if where == "new":
        text, expected = _checked(text, expected, limit=MAX_TEXT)
        chosen = destinations(gap).sources
        target = next((s for s in chosen if str(s.public_id) == source), None) if source else None
        if source and target is None:
            raise GapInvalid({"source": _("Choose a source of uploaded files of this workspace.")})
        key = document_key(gap)
        relevant, document = key, None
        body = f"{text}\n"  # the owner's words only: a heading made of the question would read as its answer
        upload = (target, key, body)
        gap.checked = {"source": (target or knowledge.source_default_get(tenant=gap.tenant)).pk, "key": key, "after": 0}
    elif where in ("edit", "there"):
        document = _nearest_document(gap)
        if document is None:
            raise GapInvalid({"where": _("No document is near this gap: add a new one.")})
        if where == "edit" and not _editable(document):
            raise GapInvalid(
                {"where": _("%(key)s is not kept here: edit it where it lives.") % {"key": document.document_key}}
            )
        if where == "edit":
            text, expected = _checked(text, expected, limit=MAX_EDITED)
            if version != str(document.version):
                raise GapInvalid({"text": _("The document changed while you edited it: here is its new text.")})
            offered = destinations(gap)
            if not offered.editable:
                raise GapInvalid({"where": _("This document cannot be edited here: add a new one.")})
            if text == offered.current.strip():
                raise GapInvalid({"text": _("Nothing was changed: add the missing sentence to the text.")})
            upload = (document.source, document.document_key, text + "\n")
        else:
            if not knowledge.source_capabilities(document.source)["syncable"]:
                kept_here = _("%(key)s is kept here: add a new document.") % {"key": document.document_key}
                raise GapInvalid({"where": kept_here})
            text, expected = _checked(text, expected, limit=MAX_TEXT, written_elsewhere=True)
            upload = None
        relevant = document.document_key
        gap.checked = {"after": document.version}  # its text is in a later version
    else:
        raise GapInvalid({"where": _("Choose where the text goes.")})
    with transaction.atomic():
        if not Gap.objects.select_for_update().filter(pk=gap.pk, state=Gap.State.OPEN).exists():
            raise GapInvalid({"where": _("This gap was already written.")})  # by a submission at the same moment
        if upload is not None:
            target, key, body = upload
            writer = _writer(gap, user)
            try:
                knowledge.upload_enqueue(
                    tenant=gap.tenant, source=target, uploads=[(key, body.encode())], writer=writer
                )
            except (knowledge.UploadRefused, knowledge.UploadQuotaExceeded, knowledge.UploadNotStored) as refused:
                raise GapInvalid({"text": str(refused)}) from refused
        elif document is not None:
            try:  # the edit made where it lives comes in with the next sync: queued now
                knowledge.source_sync_enqueue(tenant=gap.tenant, source=document.source, trigger="gap")
            except FolderNotAllowed:  # a source that may not be synced on request comes in on its schedule
                pass
        for question in gap.questions.all():
            made = EvalQuestion.objects.create(
                tenant=gap.tenant,
                question=question.question,
                relevant_docs=[relevant],
                answer=expected,
                answerable=True,
                created_by=user.get_username(),
            )
            question.eval_question = made
            question.save(update_fields=["eval_question"])
        gap.written, gap.expected, gap.written_by, gap.written_at = text, expected, user.get_username(), timezone.now()
        gap.document, gap.state = document, Gap.State.WRITTEN
        gap.save(update_fields=["written", "expected", "written_by", "written_at", "state", "document", "checked"])
    return gap


def _written_document(gap: Gap) -> Document | None:
    if gap.document_id is not None:
        return gap.document
    where = gap.checked
    found = Document.objects.for_tenant(gap.tenant).filter(source_id=where.get("source"), document_key=where.get("key"))
    return found.filter(status=Status.ACTIVE).first()


def check_written(tenant: Any) -> int:
    """Each written gap whose text has come into the index since (a version of its document after the one the text
    was written on, not asked against yet) has its questions asked again, as an evaluation run asks them
    (feedback.evaluation: the whole knowledge, the model): it closes when every one is answered with its phrase. A
    check that could not ask (no model) is tried again at the next run. Returns how many closed."""
    closed = 0
    for gap in Gap.objects.for_tenant(tenant).filter(state=Gap.State.WRITTEN).select_related("document"):
        document = _written_document(gap)
        if document is None:
            continue  # its text is not indexed yet
        if document.version <= gap.checked.get("after", 0) or gap.checked.get("version") == document.version:
            continue  # not there yet (an edit made where it lives comes with a sync), or already asked against it
        asked = [q.eval_question for q in gap.questions.select_related("eval_question") if q.eval_question]
        rows = [evaluation.score_question(gap.tenant, q, answers=True) for q in asked]
        if any(row.get("error") for row in rows):
            continue
        passed = sum(1 for row in rows if row.get("ans_phrase") == 1.0 and not row.get("refused"))
        gap.document = document
        at = timezone.now().isoformat()
        gap.checked = {**gap.checked, "version": document.version, "at": at, "passed": passed, "of": len(rows)}
        fields = ["document", "checked"]
        if rows and passed == len(rows):
            gap.state, gap.closed_at = Gap.State.CLOSED, timezone.now()
            fields += ["state", "closed_at"]
            closed += 1
        gap.save(update_fields=fields)
    return closed


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


def tell_owners(tenant: Any) -> int:
    """E-mail each open gap to whoever closes it — its owner, else the tenant's admins — once each (a gap given to
    someone else tells them too), through the mail settings, in the platform's language, with a link when
    RAG_PUBLIC_URL is set. Only those with an address are told; the page lists the gaps for all. Returns how many
    e-mails were sent."""
    sent = 0
    members = set(Membership.objects.filter(tenant=tenant).values_list("user_id", flat=True))
    admins = Membership.objects.filter(tenant=tenant, role=Membership.Role.ADMIN, user__is_active=True)
    for gap in Gap.objects.for_tenant(tenant).filter(state=Gap.State.OPEN).select_related("owner"):
        owned = gap.owner is not None and gap.owner_id in members  # one who left the tenant is never told
        people = [gap.owner] if gap.owner is not None and owned else [m.user for m in admins.select_related("user")]
        for person in people:
            if person.pk in gap.told or not person.email or not person.is_active:
                continue
            context = {"tenant": tenant, "gap": gap, "site": settings.RAG_PUBLIC_URL, "owner": owned}
            with translation.override(settings.LANGUAGE_CODE):
                subject = render_to_string("insights/email/gap_subject.txt", context).strip()
                body = render_to_string("insights/email/gap.txt", context)
            send_mail(subject, body, None, [person.email])
            gap.told = [*gap.told, person.pk]
            gap.save(update_fields=["told"])
            sent += 1
    return sent
