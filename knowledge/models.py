"""Tenant → Source → Document (→ versions) → Chunk."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable
from typing import Any, TypedDict

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from knowledge import ids
from knowledge.ids import OCR_LANGUAGES_RE
from knowledge.sealed import seal, split_credential
from tenants.models import TenantOwned, list_of_tenant
from tenants.principals import Viewer


class Tag(TenantOwned):
    """A curation label, unique per tenant. Sources, documents and single chunks can carry it."""

    name = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="tag_unique_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def normalise(name: str) -> str:
        return " ".join(name.split()).lower()


class Source(TenantOwned):
    class Kind(models.TextChoices):
        UPLOAD = "upload", _("Uploaded files")
        FOLDER = "folder", _("Server folder")
        EXTERNAL = "external", _("External reference")
        GIT = "git", _("Git repository")
        OBSIDIAN = "obsidian", _("Obsidian vault")
        WEBSITE = "website", _("Website")
        DOKUWIKI = "dokuwiki", _("DokuWiki")
        REDMINE = "redmine", _("Redmine")
        MAILBOX = "mailbox", _("Shared mailbox")

    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=400, help_text="Normalised name, part of the source id.")
    sync_state = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What its kind keeps between syncs (a website: each page's validators).",
    )
    label = models.CharField(max_length=200, help_text="The name as the user typed it.")
    source_id = models.CharField(max_length=700, unique=True, editable=False)
    path = models.CharField(
        max_length=1000, blank=True,
        help_text="Folder on the server (folder sources); the repository's path or URL (git sources).",
    )  # fmt: skip
    config = models.JSONField(
        default=dict,
        blank=True,
        help_text="Its kind's own options (a git source's branch and history depth): knowledge/ingest/sources.py.",
    )
    # A URL's credential, sealed (knowledge/sealed.py): never in `path`, never shown, searched or exported.
    credential = models.TextField(blank=True, editable=False)
    ref = models.CharField(max_length=1000, blank=True, help_text="Locator, for external sources.")
    default_mode = models.CharField(max_length=20, default="auto")
    ocr_languages = models.CharField(
        max_length=60, default="spa+eng", help_text="Tesseract languages for scanned pages, joined by '+'.",
        validators=[RegexValidator(OCR_LANGUAGES_RE, "Tesseract language codes joined by '+', such as spa+eng.")],
    )  # fmt: skip
    tags = models.ManyToManyField(Tag, blank=True, related_name="sources")
    is_default = models.BooleanField(default=False, help_text="Holds the tenant's loose uploads.")
    # Who answers for its knowledge (insights/gaps.py sends them the questions it could not answer): whoever created
    # it, until an admin names someone else; none: the tenant's admins.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    access = models.JSONField(
        default=list_of_tenant,
        help_text='Who sees its documents: ["tenant"], or principals such as ["group:hr", "user:bob"].',
    )
    review_every_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="A document whose review date is not stated is due this many days after its "
        "content last changed.",
    )  # fmt: skip
    sync_every_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Synced this often by the worker's scheduler (django-q2's Schedule); "
        "null: only on request.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "kind", "name"], name="source_unique_name")]
        ordering = ["tenant__slug", "kind", "name"]

    def __str__(self) -> str:
        return self.source_id

    @property
    def schedule_name(self) -> str:
        """The name of its django-q2 Schedule (knowledge/schedules.py)."""
        return f"sync-source-{self.public_id}"

    def set_location(self, location: str) -> None:
        """Where it reads: the path or URL kept in `path` without a credential, the credential sealed apart."""
        self.path, credential = split_credential(location)
        self.credential = seal(credential)

    @property
    def shown_path(self) -> str:
        """Its path as pages and the API show it: a repository URL without the credential it may carry."""
        return ids.public_url(self.path)


def readers_text(principals: list[str]) -> str:
    """An access list as Document.readers stores it: " group:hr user:bob " (sorted, space-wrapped)."""
    return " " + " ".join(sorted(set(principals))) + " "


def readers_match(viewer: Viewer, *, path: str = "") -> Q:
    """Rows (documents, or through `path` chunks) whose enforced access list holds one of the viewer's principals.
    For a viewer who sees everything it is a condition every row meets, never an empty Q(): Django drops an empty
    Q from `X | Q()`, which would turn "X or visible" into "X" alone."""
    if viewer.principals is None:
        return Q(pk__isnull=False)
    if not viewer.principals:
        return Q(pk__in=[])
    return functools.reduce(
        operator.or_, (Q(**{f"{path}readers__contains": f" {p} "}) for p in sorted(viewer.principals))
    )


def stricter_access(old: list[str], new: list[str]) -> list[str]:
    """A list that lets through no one either list keeps out: enforced while a change reaches the payloads.
    `tenant` lets every member through, so the other list decides; otherwise the principals both lists share
    (a viewer let in by each list through different principals waits the few seconds the change takes)."""
    if "tenant" in new:
        return sorted(set(old))
    if "tenant" in old:
        return sorted(set(new))
    return sorted(set(old) & set(new))


def strictest(lists: Iterable[Iterable[str]]) -> list[str]:
    """One list that admits no one any of the lists keeps out (stricter_access over all of them)."""
    result: list[str] | None = None
    for access in lists:
        result = sorted(set(access)) if result is None else stricter_access(result, list(access))
    return result or []


def carried_lists(document_pks: Iterable[int]) -> dict[int, list[list[str]]]:
    """For each of these documents, the effective lists of the notes whose text its served version carries."""
    found: dict[int, list[list[str]]] = {}
    links = DocumentLink.objects.filter(document_id__in=list(document_pks), carried=True, resolved__isnull=False)
    for link in links.select_related("resolved__source"):
        if link.resolved is not None:
            found.setdefault(link.document_id, []).append(link.resolved.effective_access)
    return found


def enforced_access(document: Document, carried: dict[int, list[list[str]]] | None = None) -> list[str]:
    """Who may read the document's text: its effective list, made stricter by the effective list of every note whose
    text its served version carries (a vault embed; `carried`: carried_lists, read ahead for many documents).
    Derived text carries the strictest access of what it came from; the next sync renders an embed that not every
    reader of the note may see as a placeholder, and the list widens again."""
    lists = (carried if carried is not None else carried_lists([document.pk])).get(document.pk, [])
    return strictest([document.effective_access, *lists])


def version_carried_lists(version_pks: Iterable[int]) -> dict[int, list[list[str]]]:
    """For each of these versions, the effective lists of the notes whose text it carries (VersionCarry): what an
    earlier version of a note still holds after its embed was rendered as a placeholder."""
    found: dict[int, list[list[str]]] = {}
    rows = VersionCarry.objects.filter(version_id__in=list(version_pks)).select_related("note__source")
    for row in rows:
        found.setdefault(row.version_id, []).append(row.note.effective_access if row.note is not None else [])
    return found


def version_access(version_readers: list[str], document_readers: list[str]) -> list[str]:
    """Who may read one version's text, as its vector points carry it: the document's enforced list made stricter by
    the version's own (what the text of that version carries). SQL asks both lists (readers_match on each)."""
    return strictest([document_readers, version_readers])


def versions_carrying(document_pks: Iterable[int]) -> dict[int, list[DocumentVersion]]:
    """The versions of these documents that carry another note's text, or did until a change (a list of their own)."""
    found: dict[int, list[DocumentVersion]] = {}
    rows = DocumentVersion.objects.filter(document_id__in=list(document_pks)).exclude(status=Status.FAILED)
    rows = rows.filter(Q(carries__isnull=False) | ~Q(readers=" tenant ")).distinct().order_by("pk")
    for version in rows:
        found.setdefault(version.document_id, []).append(version)
    return found


def version_list(version: DocumentVersion, lists: dict[int, list[list[str]]] | None = None) -> list[str]:
    """The list a version's own text calls for: the strictest of the notes it carries (["tenant"]: none)."""
    carried = (lists if lists is not None else version_carried_lists([version.pk])).get(version.pk, [])
    return sorted(set(strictest(carried))) if carried else ["tenant"]


def carries_record(version: DocumentVersion, note_pks: Iterable[int]) -> None:
    """This version carries these notes' text (a vault note rendered with their embeds): kept for the version's life."""
    VersionCarry.objects.bulk_create(
        [VersionCarry(tenant_id=version.tenant_id, version=version, note_id=pk) for pk in set(note_pks)],
        ignore_conflicts=True,
    )


class Status(models.TextChoices):
    PENDING = "pending", _("Pending (being indexed)")
    ACTIVE = "active", _("Active")
    SUPERSEDED = "superseded", _("Superseded")
    RETIRED = "retired", _("Retired")
    FAILED = "failed", _("Failed")


class Mode(models.TextChoices):
    DOCUMENTAL = "documental", _("Documental")
    CODE = "code", _("Code")


class Document(TenantOwned):
    """One logical document of a source; its content lives in numbered versions."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="documents")
    document_key = models.CharField(max_length=1100, help_text="Identity relative to the source.")
    document_id = models.CharField(max_length=1900, unique=True, editable=False)
    source_path = models.CharField(max_length=2000, blank=True, help_text="Where the file was read from.")
    source_ref = models.CharField(max_length=2000, blank=True, help_text="Locator for non-file documents.")
    source_type = models.CharField(max_length=20, blank=True, help_text="markdown, pdf, html, python…")
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.DOCUMENTAL)
    title = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    version = models.PositiveIntegerField(default=0, help_text="The version readers are served (0: none yet).")
    tags = models.ManyToManyField(Tag, blank=True, related_name="documents")
    critical = models.BooleanField(default=False, db_index=True)
    needs_sync = models.BooleanField(
        default=False, db_index=True, help_text="Curation changed: vector payloads await the indexer."
    )
    access = models.JSONField(
        null=True, blank=True, help_text="The document's own access list, replacing its source's; null: inherit."
    )
    # The access list enforced now, as " tenant group:hr " (space-delimited, space-wrapped: a portable LIKE filter,
    # principals never hold spaces). It is the effective list, except while an access change is being applied
    # to the vector payloads (`access_pending`): then it is the stricter of the old and the new list.
    readers = models.TextField(default=" tenant ", editable=False)
    access_pending = models.BooleanField(
        default=False, db_index=True, editable=False, help_text="An access change awaits the vector payloads."
    )
    # Validity (knowledge/validity.py): when the document is in force, when it is due a review, what it replaces.
    valid_from = models.DateField(null=True, blank=True, help_text="In force from this day (none: always was).")
    valid_until = models.DateField(null=True, blank=True, help_text="In force through this day (none: no end).")
    review_by = models.DateField(null=True, blank=True, help_text="Due a review after this day.")
    review_by_origin = models.CharField(
        max_length=10, blank=True, choices=[("stated", "Stated"), ("source", "The source's default"),
                                            ("reviewed", "Reviewed")],
    )  # fmt: skip
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="successors",
        help_text="The document of the tenant this one replaces.",
    )  # fmt: skip
    supersedes_ref = models.CharField(max_length=1900, blank=True, help_text="`supersedes` as the file stated it.")
    validity_problems = models.JSONField(default=list, blank=True, help_text="Why a stated value was not applied.")
    content_changed_at = models.DateTimeField(null=True, blank=True, help_text="When the served content last changed.")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.CharField(max_length=150, blank=True)
    # Its own owner, when an admin named one (else its source's owner answers for it).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "document_key"], name="document_unique_key")]
        indexes = [  # the documents with a list of their own: few, read by every restricted query (query_principals)
            models.Index(fields=["tenant"], condition=models.Q(access__isnull=False), name="document_own_access"),
            # the documents that use validity: few, asked by every read now (validity.Clock.rules_apply)
            models.Index(fields=["tenant"], name="document_validity", condition=(
                models.Q(valid_from__isnull=False) | models.Q(valid_until__isnull=False)
                | models.Q(supersedes__isnull=False))),
        ]  # fmt: skip
        ordering = ["source_id", "document_key"]

    def __str__(self) -> str:
        return self.document_id

    @property
    def effective_access(self) -> list[str]:
        """Who should see it: its own list, else its source's."""
        return list(self.access) if self.access is not None else list(self.source.access)

    @property
    def reader_list(self) -> list[str]:
        """The principals enforced now (the vector payloads' `access`)."""
        return self.readers.split()

    @property
    def restricted(self) -> bool:
        return "tenant" not in self.effective_access

    @property
    def display_key(self) -> str:
        return ids.display_name(self.document_key)


class DocumentVersion(TenantOwned):
    """One content state of a document. Exactly one version of a live document is active."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the raw bytes.")
    size = models.PositiveBigIntegerField(default=0)
    mtime = models.FloatField(null=True, blank=True, help_text="File modification time, for the fast diff.")
    title = models.CharField(max_length=500, blank=True)
    chunk_count = models.PositiveIntegerField(default=0)
    embedding_provider = models.CharField(max_length=50, blank=True)
    embedding_model = models.CharField(max_length=300, blank=True)
    embedding_dims = models.PositiveIntegerField(null=True, blank=True)
    indexing_version = models.PositiveIntegerField(default=0)
    # Re-embedded in SQL for the configured index (an upgrade that adds the multilingual leg, knowledge/reindex.py):
    # the store's owner writes its points into that index's collection at its next drain.
    reindex_pending = models.BooleanField(default=False, db_index=True)
    warnings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    enrichment = models.JSONField(
        default=dict,
        blank=True,
        help_text="Model-written title, summary, topics and key points, with model and directives.",
    )
    job = models.ForeignKey("IngestJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What the file itself states (frontmatter, Office properties): {"valid_from": "2026-01-01", …, "problems": […]}
    stated = models.JSONField(default=dict, blank=True)
    # A git source's commit that made this version: {"sha", "author", "email", "date", "message", "blob"}, and
    # "unreachable": true once a force-push left it out of the branch's history.
    commit = models.JSONField(default=dict, blank=True)
    historical = models.BooleanField(
        default=False, help_text="Imported history: indexed as superseded, served over its commit's window only."
    )
    # The validity window this version was served with (the document's while it is the served one).
    valid_from = models.DateField(null=True, blank=True)
    valid_until = models.DateField(null=True, blank=True)
    # When it was the version readers were served: from its activation until the next one's (or retirement).
    served_from = models.DateTimeField(null=True, blank=True)
    served_until = models.DateTimeField(null=True, blank=True)
    # Who may read this version beyond the document's list: the strictest list of the notes whose text this version
    # carries (VersionCarry), " tenant " when it carries none. A reader of a version passes both lists; while a
    # change reaches the vector payloads it is the stricter of the old and the new list (like Document.readers).
    readers = models.TextField(default=" tenant ", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    status_changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "version"], name="version_unique_number")]
        indexes = [  # the versions with a list of their own: few, read by every restricted query (query_principals)
            models.Index(fields=["tenant"], condition=~models.Q(readers=" tenant "), name="version_own_access"),
        ]
        ordering = ["document_id", "-version"]

    def __str__(self) -> str:
        return f"{self.document.document_id} v{self.version} ({self.status})"

    @property
    def reader_list(self) -> list[str]:
        """The version's own list, enforced beside its document's (readers)."""
        return self.readers.split()


class VersionCarry(TenantOwned):
    """A note whose text a version carries (a vault embed rendered into it): recorded when the version is rendered and
    kept for the version's life, so a later narrowing of the note narrows every version that holds its text, not only
    the one served now (knowledge/access.py)."""

    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="carries")
    # null: the note was deleted; its text stays in this version, which then only those who see everything read
    note = models.ForeignKey("Document", null=True, on_delete=models.SET_NULL, related_name="carried_in")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "note"], name="carry_once")]

    def __str__(self) -> str:
        return f"{self.version_id} carries {self.note_id}"


class DocumentTable(TenantOwned):
    """A table of one document version, kept as a table (knowledge/ingest/tables.py): its columns with their types
    and its rows as found, so an answer can compute over it (knowledge/compute.py). It belongs to its version: who
    may see it, whether it is in force and as of when are its document's and version's, and a new version brings its
    own tables."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="tables")
    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="tables")
    position = models.PositiveIntegerField()  # its place among the document's tables
    name = models.CharField(max_length=500)  # the sheet, or the heading it sits under
    columns = models.JSONField(default=list)  # [{"name": "Region", "type": "text"}, …]
    rows = models.JSONField(default=list)  # each row's cells as found
    row_numbers = models.JSONField(default=list)  # each row's number as the source shows it (a sheet's row)
    row_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["version", "position"]
        constraints = [models.UniqueConstraint(fields=["version", "position"], name="table_once_a_version")]

    def __str__(self) -> str:
        return f"{self.name} ({self.row_count} rows)"


class ChunkLocation(TypedDict):
    """Where a chunk is, one shape in hits, citations, bootstrap items, MCP chunks and vector payloads."""

    chunk_id: str
    document_id: str
    document_key: str
    title: str
    heading: str
    line_start: int | None
    line_end: int | None
    page: int | None  # the page the matched or cited text is on (a chunk may span pages); else the first
    page_start: int | None  # the chunk's first page
    page_end: int | None  # the chunk's last page
    page_label: str  # the document's own label of `page` ("iv", "A-3", or its number); "" when not known
    url: str  # a web page's address (a website source: the page as read, after redirects); "" for a file


# Chunks that rank their document but are never returned as an excerpt: a model-written summary (enrichment) and
# a code file's card (knowledge/ingest/symbols.py). A hit on one is replaced by its document's best chunks.
RANKING_ONLY_MODES = ("summary", "card")


class Chunk(TenantOwned):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    document_version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="chunks")
    chunk_id = models.CharField(max_length=2000, editable=False, help_text="Stable across versions.")
    index = models.PositiveIntegerField()
    mode = models.CharField(max_length=20)
    heading = models.CharField(max_length=1000, blank=True, help_text='Heading path, e.g. "Install › Linux".')
    text = models.TextField()
    # Code: the names the chunk defines, bare and qualified, as written and lower case ("send", "Client.send",
    # "client.send"), from a parser (knowledge/ingest/symbols.py).
    defines = models.JSONField(default=list, blank=True)
    line_start = models.PositiveIntegerField(null=True, blank=True)
    line_end = models.PositiveIntegerField(null=True, blank=True)
    page = models.PositiveIntegerField(null=True, blank=True, help_text="The page the chunk starts on.")
    page_label = models.CharField(max_length=50, blank=True)
    page_end = models.PositiveIntegerField(null=True, blank=True, help_text="The page the chunk ends on.")
    page_spans = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="[[offset in text, page, label], …] where each page begins (multi-page chunks).",
    )
    content_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="chunks")
    critical = models.BooleanField(default=False, db_index=True)
    embedding_provider = models.CharField(max_length=50, blank=True)
    embedding_model = models.CharField(max_length=300, blank=True)
    embedding_dims = models.PositiveIntegerField(null=True, blank=True)
    indexing_version = models.PositiveIntegerField(default=0)
    # The language of the text (core/languages.py), which the lexical leg stems it as.
    language = models.CharField(max_length=8, blank=True, default="")
    # The vectors live in SQL too (the source of truth): the indexer applies them to Qdrant, and a
    # repair or a store rebuild never needs to re-embed. With a multilingual leg (an embedding model named
    # `…+usem3`), `dense` holds the embedder's vector and the multilingual one after it.
    dense = models.BinaryField(null=True, blank=True, editable=False)
    sparse = models.JSONField(null=True, blank=True, editable=False)
    point_id = models.CharField(max_length=36, blank=True, db_index=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["document_version", "index"], name="chunk_unique_index"),
        ]
        indexes = [models.Index(fields=["tenant", "content_hash"], name="chunk_tenant_text")]  # vector reuse
        ordering = ["document_id", "document_version_id", "index"]

    def __str__(self) -> str:
        return self.chunk_id

    def location(self, *, page: int | None = None, document: Document | None = None) -> ChunkLocation:
        """Where the chunk is; `page` is where the matched or cited text sits, when the caller knows it
        (`document`: the chunk's own, when the caller has it at hand)."""
        document = document or self.document
        page = page if page is not None else self.page
        label = self.page_label if page == self.page else ""
        for _start, number, span_label in self.page_spans or []:
            if number == page:
                label = str(span_label or "")
        return {
            "chunk_id": self.chunk_id,
            "document_id": document.document_id,
            "document_key": document.display_key,
            "title": document.title,
            "heading": self.heading,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "page": page,
            "page_start": self.page,
            "page_end": self.page_end or self.page,
            "page_label": label,
            "url": document.source_path if document.source_path.startswith(("http://", "https://")) else "",
        }


class DocumentLink(TenantOwned):
    """A link of a vault note to another file of its vault (knowledge/links.py): as written, and what it resolves
    to now (null: it names no file, or several; `problem` says which)."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey("Document", on_delete=models.CASCADE, related_name="links_out")
    target = models.CharField(max_length=1000, help_text="The link's target as written, without its heading.")
    heading = models.CharField(max_length=500, blank=True, help_text='"Heading" or "^block", when it names one.')
    embed = models.BooleanField(default=False, help_text="![[…]]: the target's text is shown in the note.")
    carried = models.BooleanField(
        default=False, help_text="The embed's text is in the note's served text (not a placeholder): the note's "
        "readers are limited to those the embedded note admits (enforced_access).",
    )  # fmt: skip
    resolved = models.ForeignKey("Document", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="links_in")  # fmt: skip
    problem = models.CharField(max_length=2000, blank=True)

    class Meta:
        indexes = [models.Index(fields=["source", "resolved"])]


class DocumentEvent(TenantOwned):
    """What happened to a document, when, by whom: the changes feed (`changes_since`) and the review trail."""

    class Kind(models.TextChoices):
        ADDED = "added", _("Added")
        CHANGED = "changed", _("Changed")
        RETIRED = "retired", _("Retired")
        RESTORED = "restored", _("Restored")
        VALIDITY = "validity", _("Validity changed")
        SUPERSEDED = "superseded", _("Superseded")
        REVIEWED = "reviewed", _("Reviewed: still true")

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    old_version = models.PositiveIntegerField(null=True, blank=True)
    new_version = models.PositiveIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=150, blank=True, help_text="Who did it; blank: a sync.")
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["tenant", "at"], name="document_event_feed")]
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.document_id} at {self.at:%Y-%m-%d %H:%M}"


class IngestJob(TenantOwned):
    """One ingestion run (folder sync, upload batch, reindex) with its progress and outcome."""

    class State(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        INDEXING = "indexing", _("Waiting for the indexer")
        SUCCEEDED = "succeeded", _("Succeeded")
        PARTIAL = "partial", _("Finished with errors")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    class Kind(models.TextChoices):
        SYNC = "sync", _("Sync")
        FOLDER = "folder", _("Folder sync")
        GIT = "git", _("Git sync")
        WEB = "web", _("Website sync")
        UPLOAD = "upload", _("Upload")
        REINDEX = "reindex", _("Reindex")
        PERMISSIONS = "permissions", _("Permission sync")

    source = models.ForeignKey(Source, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    documents_total = models.PositiveIntegerField(default=0)
    documents_done = models.PositiveIntegerField(default=0)
    # Every file sent or found, skipped and refused ones included ("4 of 4 files" when 2 of them were empty).
    files_total = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0)
    chunks_done = models.PositiveIntegerField(default=0)
    added = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    retired = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    skips = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True)
    # What the running job is doing now ("Reading scan.pdf with OCR: page 3 of 12"). Written only by
    # knowledge.jobs.report_activity, as a row update from whichever thread does the work; save() leaves it alone.
    activity = models.CharField(max_length=300, blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.public_id} ({self.state})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Saving the job's counts never writes `activity` back: another thread may have just reported it."""
        if not self._state.adding and kwargs.get("update_fields") is None and not kwargs.get("force_insert"):
            kwargs["update_fields"] = [
                f.name for f in self._meta.concrete_fields if not f.primary_key and f.name != "activity"
            ]
        super().save(*args, **kwargs)

    @property
    def seconds(self) -> float | None:
        if not self.started_at:
            return None
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()

    @property
    def files_done(self) -> int:
        """Files this job has dealt with: those read so far, and those skipped or refused before reading."""
        return self.documents_done + max(0, self.files_total - self.documents_total)

    @property
    def is_upload(self) -> bool:
        """It ingests the files an upload stored (every other job kind syncs a source's location)."""
        return self.kind == self.Kind.UPLOAD

    @property
    def is_finished(self) -> bool:
        return self.state in (
            self.State.SUCCEEDED,
            self.State.PARTIAL,
            self.State.FAILED,
            self.State.CANCELLED,
        )


class JobFile(TenantOwned):
    """One file of a job, as the job page lists it: what became of it, with its numbers and reason.

    An upload lists every file sent (skipped and refused ones too); a folder sync lists the files it read, skipped
    or could not read (unchanged files are only counted)."""

    class Status(models.TextChoices):
        WAITING = "waiting", _("Waiting")
        ADDED = "added", _("Added")
        UPDATED = "updated", _("Updated")
        UNCHANGED = "unchanged", _("Unchanged")
        SKIPPED = "skipped", _("Skipped")
        FAILED = "failed", _("Failed")

    job = models.ForeignKey(IngestJob, on_delete=models.CASCADE, related_name="files")
    position = models.PositiveIntegerField(default=0)
    key = models.CharField(max_length=1000)  # as stored (the document's key)
    sent_as = models.CharField(max_length=1000, blank=True)  # the name as sent, when it was stored under another
    notice = models.CharField(max_length=300, blank=True)  # "stored as passwd.md: the name had folder parts"
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.WAITING)
    chunks = models.PositiveIntegerField(default=0)
    ocr_pages = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    kind = models.CharField(max_length=20, blank=True)  # of a failure: error, needs_ocr, rejected, unreadable
    UNREADABLE = "unreadable"  # a failure of the file's own bytes (damaged, not its format): no retry reads them
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["position", "pk"]
        indexes = [models.Index(fields=["job", "key"])]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status != self.Status.WAITING


class SourceLock(TenantOwned):
    """Held while a job syncs a source, so that two syncs of one source never run at once (knowledge/jobs.py).

    The row names its holder (host and process): a lock whose process is gone is taken over, and the
    holder's job is recovered."""

    source = models.OneToOneField(Source, on_delete=models.CASCADE, related_name="sync_lock")
    job = models.ForeignKey(IngestJob, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    acquired_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.source_id} held by {self.host}:{self.pid}"


class AllowedLocation(models.Model):
    """A place the operator allows every tenant's web and API users to read, added on the operator's page (beside
    what RAG_ALLOWED_FOLDER_ROOTS, RAG_ALLOWED_GIT_URLS and RAG_ALLOWED_WEB_PREFIXES name): a server folder, a git
    URL prefix or a website prefix (knowledge/locations.py). Not tenant-owned: the operator's, for the server."""

    class Kind(models.TextChoices):
        FOLDER = "folder", _("Server folder (folders, vaults, local repositories)")
        GIT = "git", _("Git URL prefix")
        WEB = "web", _("Website prefix")

    kind = models.CharField(max_length=10, choices=Kind.choices)
    value = models.CharField(max_length=1000)
    added_by = models.CharField(max_length=150)  # the operator's user name, as the audit keeps it
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["kind", "value"]
        constraints = [models.UniqueConstraint(fields=["kind", "value"], name="allowed_location_once")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.value}"
