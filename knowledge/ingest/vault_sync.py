"""An Obsidian vault's sync: the folder sync (knowledge/ingest/folder_sync.py) with each note rendered as Obsidian
shows it (knowledge/ingest/obsidian.py), an embed shown only where every reader of the note may read the embedded
one, and the links kept after the sync."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from knowledge import ids
from knowledge import links as link_graph
from knowledge.access import access_enforce
from knowledge.ingest import obsidian
from knowledge.ingest.folder_sync import Notes, sync_folder
from knowledge.ingest.walker import WalkedFile
from knowledge.models import Document, DocumentLink, IngestJob, Source
from knowledge.options import DEFAULT_OPTIONS, IngestOptions
from tenants.principals import admits_all_of


class VaultNotes(Notes):
    """A vault's notes for the folder sync: each note rendered before it is read (so nothing reads ahead), its
    images walked too, a note read again when a file it embeds changed, and the links stored after the sync."""

    images = True
    reads_ahead = False

    def __init__(self, source: Source) -> None:
        self.source = source
        self.vault: obsidian.Vault | None = None
        self.links: dict[str, list[obsidian.Link]] = {}

    def start(self, root: Path, files: list[WalkedFile], known: dict) -> set[str]:
        self.vault = obsidian.Vault([f.key for f in files], root, _embed_rule(self.source))
        return _embedding_changed(self.source, files, known)

    def read(self, walked: WalkedFile, options: IngestOptions) -> tuple[bytes | None, IngestOptions]:
        """A note's bytes as they are ingested, rendered, its tags added to the job's and its links kept; any other
        file's None (read it when ingesting)."""
        if self.vault is None or not obsidian.is_note(walked.key):
            return None, options
        try:
            text = walked.path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return None, options  # the ingest reads it again and records why it cannot
        rendered = obsidian.render(self.vault, walked.key, text)
        self.links[ids.normalise_document_key(walked.key)] = rendered.links
        tags = tuple(dict.fromkeys([*options.tags, *rendered.tags]))
        return rendered.text.encode("utf-8"), dataclasses.replace(options, tags=tags)

    def finish(self, job: IngestJob) -> None:
        """The links stored and resolved (their problems on the job), and the access of every note that carries
        another's text made as strict as what it carries."""
        source = self.source
        link_graph.links_store(source, self.links)
        job.params = {**(job.params or {}), "link_problems": link_graph.links_resolve(source)}
        job.save(update_fields=["params"])
        link_graph.carries_store(source)
        access_enforce(Document.objects.filter(source=source, links_out__embed=True).distinct()
                       .select_related("source"))  # fmt: skip


def sync_vault(*, source: Source, root: Path, options: IngestOptions = DEFAULT_OPTIONS, job: IngestJob | None = None,
               progress: Callable[[IngestJob], None] | None = None) -> IngestJob:  # fmt: skip
    return sync_folder(source=source, root=root, options=options, job=job, progress=progress, notes=VaultNotes(source))


def _embed_rule(source: Source) -> Callable[[str, str], bool]:
    """Whether a vault note may show another's text: every reader of the note may read the embedded one, by their
    lists now (a note not yet ingested has its source's). Otherwise the embed renders as a placeholder."""
    lists = {key: (own if own is not None else source.access)
             for key, own in Document.objects.filter(source=source).values_list("document_key", "access")}  # fmt: skip

    def access_of(key: str) -> list[str]:
        try:
            return lists.get(ids.normalise_document_key(key), source.access)
        except ids.InvalidIdentifier:
            return []

    return lambda note, embedded: admits_all_of(access_of(embedded), access_of(note))


def _embedding_changed(source: Source, files: list[WalkedFile], known: dict) -> set[str]:
    """Keys of vault notes that embed a file changed (or gone) since the last sync: their text shows its text."""
    present = {f.key: (f.size, f.mtime) for f in files}
    changed = {key for key, stat in known.items() if present.get(key) != stat}
    if not changed:
        return set()
    rows = DocumentLink.objects.filter(source=source, embed=True, resolved__document_key__in=changed)
    return set(rows.values_list("document__document_key", flat=True))
