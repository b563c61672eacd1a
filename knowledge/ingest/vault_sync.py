"""An Obsidian vault's producer: the folder's (knowledge/ingest/folder_sync.py) with each note rendered as Obsidian
shows it (knowledge/ingest/obsidian.py), an embed shown only where every reader of the note may read the embedded
one, and each note's links yielded with it (the sync stores them, and makes a note that carries another's text as
strict as what it carries)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from knowledge import ids
from knowledge.ingest import obsidian
from knowledge.ingest.folder_sync import Notes, produce_folder
from knowledge.ingest.producer import Event, Reading
from knowledge.ingest.walker import WalkedFile
from knowledge.models import Document, DocumentLink, Source
from tenants.principals import admits_all_of


class VaultNotes(Notes):
    """A vault's notes for the folder producer: each note rendered before it is read (so nothing reads ahead), its
    images walked too, a note read again when a file it embeds changed."""

    images = True
    reads_ahead = False

    def __init__(self, source: Source) -> None:
        self.source = source
        self.vault: obsidian.Vault | None = None

    def start(self, root: Path, files: list[WalkedFile], known: dict) -> set[str]:
        self.vault = obsidian.Vault([f.key for f in files], root, _embed_rule(self.source))
        return _embedding_changed(self.source, files, known)

    def read(self, walked: WalkedFile) -> tuple[bytes | None, tuple[str, ...], tuple | None]:
        """A note's bytes as they are ingested (rendered), its tags and its links; any other file's None (read it
        when ingesting)."""
        if self.vault is None or not obsidian.is_note(walked.key):
            return None, (), None
        try:
            text = walked.path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            return None, (), None  # the ingest reads it again and records why it cannot
        rendered = obsidian.render(self.vault, walked.key, text)
        return rendered.text.encode("utf-8"), tuple(rendered.tags), tuple(rendered.links)


def produce_vault(reading: Reading) -> Iterator[Event]:
    """A vault's notes, as the folder producer reads files, each note rendered (the sync stores their links)."""
    return produce_folder(reading, VaultNotes(reading.source))


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
