"""The link graph of a vault source: each note's outgoing links as written (kept when the note is ingested), resolved
again after every sync against the vault as it is now, so a link to a note added later resolves and a name that
became ambiguous is reported. Read through the viewer's access (knowledge/selectors.py): a link to or from a note
the viewer may not see is not shown."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, Q

from knowledge.ingest.obsidian import Link, Vault
from knowledge.ingest.obsidian import embedded_source as embedded_source  # published: a citation of an embed
from knowledge.models import Document, DocumentLink, DocumentVersion, Source, Status, carries_record
from knowledge.selectors import readers_match
from tenants.principals import Viewer


def links_store(source: Source, links_by_key: dict[str, list[Link]]) -> None:
    """Replace the outgoing links of these notes (by document key) with the ones their new text holds."""
    if not links_by_key:
        return
    documents = dict(Document.objects.filter(source=source, document_key__in=list(links_by_key))
                     .values_list("document_key", "pk"))  # fmt: skip
    with transaction.atomic():
        DocumentLink.objects.filter(document_id__in=list(documents.values())).delete()
        DocumentLink.objects.bulk_create([
            DocumentLink(tenant_id=source.tenant_id, source=source, document_id=documents[key],
                         target=link.target[:1000], heading=link.heading[:500], embed=link.embed,
                         carried=link.carried)
            for key, links in links_by_key.items() if key in documents
            for link in dict.fromkeys(links)
        ], batch_size=500)  # fmt: skip


def links_resolve(source: Source) -> list[dict[str, str]]:
    """Resolve every link of the source against its live files now; returns the problems of live notes
    ({"key", "problem"}: "Notes/Meeting.md: [[Ana]] is ambiguous: Archive/Ana.md, People/Ana.md")."""
    live = dict(Document.objects.filter(source=source).exclude(status=Status.RETIRED)
                .values_list("document_key", "pk"))  # fmt: skip
    vault = Vault(list(live))
    fields = ("pk", "target", "heading", "embed", "resolved_id", "problem", "document__document_key",
              "document__status")  # fmt: skip
    rows = list(DocumentLink.objects.filter(source=source).select_related("document").only(*fields))
    changed, problems = [], []
    for row in rows:
        note = row.document.document_key
        key, _ = vault.resolve(row.target) if row.target else (note, [])
        problem = "" if key is not None else vault.problem(note, Link(row.target, row.heading, row.embed))
        resolved = live.get(key) if key is not None else None
        if (resolved, problem) != (row.resolved_id, row.problem):
            row.resolved_id, row.problem = resolved, problem[:2000]
            changed.append(row)
        if problem and row.document.status != Status.RETIRED:
            problems.append({"key": note, "problem": problem})
    DocumentLink.objects.bulk_update(changed, ["resolved", "problem"], batch_size=500)
    return sorted({p["problem"]: p for p in problems}.values(), key=lambda p: p["problem"])


def carries_store(source: Source) -> None:
    """Each note's newest version keeps the notes whose text its rendering carries (models.VersionCarry), for as long
    as the version lives: a later narrowing of one of them narrows that version too, served or not."""
    rows = DocumentLink.objects.filter(source=source, carried=True, resolved__isnull=False)
    carried: dict[int, set[int]] = {}
    for document_pk, note_pk in rows.values_list("document_id", "resolved_id"):
        if note_pk is not None:
            carried.setdefault(document_pk, set()).add(note_pk)
    newest = (DocumentVersion.objects.filter(document_id__in=list(carried)).exclude(status=Status.FAILED)
              .order_by("document_id", "-version"))  # fmt: skip
    recorded: set[int] = set()
    for version in newest:
        if version.document_id not in recorded:
            recorded.add(version.document_id)
            carries_record(version, carried[version.document_id])


def document_links(*, viewer: Viewer, document: Document) -> dict[str, list[dict[str, Any]]]:
    """A note's outgoing links and its backlinks, as the viewer may see them: a link to a hidden note shows as
    unresolved text only when the viewer sees everything; otherwise it is left out, like the note."""
    outgoing = []
    for row in (document.links_out.select_related("resolved").order_by("pk")
                .filter(Q(resolved__isnull=True) | readers_match(viewer, path="resolved__"))):  # fmt: skip
        target = row.resolved
        outgoing.append({
            "target": row.target, "heading": row.heading, "embed": row.embed,
            "problem": row.problem if viewer.sees_all or not row.problem else "it resolves to no one note you see",
            "document_id": target.document_id if target is not None else None,
            "document_key": target.display_key if target is not None else None,
            "id": str(target.public_id) if target is not None else None,
        })  # fmt: skip
    incoming = (DocumentLink.objects.for_tenant(viewer.tenant).filter(resolved=document)
                .filter(readers_match(viewer, path="document__")).exclude(document__status=Status.RETIRED)
                .select_related("document").order_by("document__document_key"))  # fmt: skip
    backlinks = list({row.document_id: {
        "document_id": row.document.document_id, "document_key": row.document.display_key,
        "id": str(row.document.public_id), "heading": row.heading, "embed": row.embed,
    } for row in incoming}.values())  # fmt: skip
    return {"links": outgoing, "backlinks": backlinks}


def backlink_counts(document_pks: list[int]) -> dict[int, int]:
    """How many distinct live notes link to each of these documents (a hub note has many)."""
    rows = (DocumentLink.objects.filter(resolved_id__in=document_pks).exclude(document__status=Status.RETIRED)
            .values("resolved_id").annotate(n=Count("document_id", distinct=True))
            .values_list("resolved_id", "n"))  # fmt: skip
    return dict(rows)
