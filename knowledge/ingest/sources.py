"""The source kinds, in one registry: what each kind is called and reads, how a web or API user's location for it is
checked, its typed options, whether files may be uploaded into it, and its producer (knowledge/ingest/producer.py),
which `SyncRun` runs. Nothing else compares a source's kind or a job's kind; forms, REST choices, templates and help
texts read this registry. A new kind is its module, one `register` line, and a migration only if it needs one.

A sync job records the location it was queued for, checked then; the worker checks it again right before reading
(`job_location`), unless the operator's command line queued it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from knowledge.ingest import website
from knowledge.ingest.dokuwiki import WikiConfig, dokuwiki_permissions, produce_dokuwiki, wiki_location_check
from knowledge.ingest.folder_sync import produce_folder
from knowledge.ingest.git_sync import GitConfig, forget_clone, produce_git
from knowledge.ingest.mailbox import MailConfig, mail_location_check, mailbox_permissions, produce_mailbox
from knowledge.ingest.producer import KindConfig, NoConfig, Produce
from knowledge.ingest.redmine import RedmineConfig, produce_redmine, redmine_location_check, redmine_permissions
from knowledge.ingest.sync_run import PermissionRun, SyncRun
from knowledge.ingest.vault_sync import produce_vault
from knowledge.locations import (
    FolderNotAllowed,
    folder_path_check,
    git_location_check,
    web_location_check,
    web_prefixes,
)
from knowledge.models import IngestJob, Source
from knowledge.options import IngestOptions


def _folder(path: str, tenant_slug: str) -> str:
    return str(folder_path_check(path, tenant_slug))


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())


@dataclass(frozen=True)
class SourceKind:
    """One kind of source.
    - `check`: a web or API user's location and their tenant → the location to read (FolderNotAllowed says why not);
    - `produce`: what one sync reads (None: a kind that does not sync); `param`: where a job records the location;
    - `operator_location`: the location as the operator's command line gave it (not checked);
    - `config`: its typed options (stored on the source); `reads_ahead`: its files are embedded ahead of their
      writes; `links`: its documents link to each other (stored and resolved after each sync);
    - `available`: whether a web or API user may create one on this server now (a website needs an allowed prefix);
    - `forget`: removes what it keeps outside the database (a clone) when its source is deleted;
    - `permissions`: for a kind whose system has read rights of its own (a wiki), the producer of a permission sync
      (an `Access` for each document, nothing else read), run every `permission_minutes(config)` minutes."""

    name: str
    label: Any
    job_kind: str = IngestJob.Kind.SYNC
    check: Callable[[str, str], str] | None = None
    produce: Produce | None = None
    param: str = "location"
    operator_location: Callable[[str], str] = str.strip
    what: str = ""  # in words, for refusals
    creatable: bool = True  # whether a web or API user may create a source of this kind
    accepts_uploads: bool = False  # whether files may be uploaded into it (a synced kind's next sync retires them)
    config: type[KindConfig] = NoConfig
    reads_ahead: bool = False
    links: bool = False
    available: Callable[[], bool] = lambda: True
    forget: Callable[[Source], None] | None = None  # what it keeps outside the database, removed with the source
    permissions: Produce | None = None
    permission_minutes: Callable[[Any], int] = lambda config: 5

    @property
    def syncable(self) -> bool:
        return self.produce is not None

    @property
    def syncs_rights(self) -> bool:
        """Its system has read rights of its own, synced on their own schedule (and on request)."""
        return self.permissions is not None

    def config_of(self, source: Source) -> KindConfig:
        return self.config.from_dict(source.config)


KINDS: dict[str, SourceKind] = {}


def register(kind: SourceKind) -> Callable[[], None]:
    """Add a kind to the registry; returns what removes it again (a test's throwaway kind)."""
    KINDS[kind.name] = kind

    def remove() -> None:
        KINDS.pop(kind.name, None)

    return remove


register(SourceKind("upload", _("Uploaded files"), IngestJob.Kind.UPLOAD, what="uploaded files", accepts_uploads=True))
register(
    SourceKind("external", _("External reference"), IngestJob.Kind.UPLOAD, what="external references", creatable=False)
)
register(
    SourceKind(
        "folder",
        _("Server folder"),
        IngestJob.Kind.FOLDER,
        _folder,
        produce_folder,
        param="path",
        operator_location=_absolute,
        what="a folder",
        reads_ahead=True,
    )
)
register(
    SourceKind(
        "obsidian",
        _("Obsidian vault"),
        IngestJob.Kind.FOLDER,
        _folder,
        produce_vault,
        param="path",
        operator_location=_absolute,
        what="a vault",
        links=True,
    )
)
register(
    SourceKind(
        "git",
        _("Git repository"),
        IngestJob.Kind.GIT,
        git_location_check,
        produce_git,
        what="a git repository",
        config=GitConfig,
        forget=forget_clone,
    )
)
register(
    SourceKind(
        "website",
        _("Website (a start URL or sitemap.xml)"),
        IngestJob.Kind.WEB,
        web_location_check,
        website.produce_website,
        what="a website",
        available=lambda: bool(web_prefixes()),
    )
)


register(
    SourceKind(
        "dokuwiki",
        _("DokuWiki (its pages, revisions and read rights)"),
        check=wiki_location_check,
        produce=produce_dokuwiki,
        what="a DokuWiki wiki",
        config=WikiConfig,
        links=True,
        available=lambda: bool(web_prefixes()),
        permissions=dokuwiki_permissions,
        permission_minutes=lambda config: config.every,
    )
)


register(
    SourceKind(
        "redmine",
        _("Redmine (its issues, journals and visibility)"),
        check=redmine_location_check,
        produce=produce_redmine,
        what="a Redmine issue tracker",
        config=RedmineConfig,
        available=lambda: bool(web_prefixes()),
        permissions=redmine_permissions,
        permission_minutes=lambda config: config.every,
    )
)

register(
    SourceKind(
        "mailbox",
        _("Shared mailbox (IMAP: its conversations and folder ACLs)"),
        check=mail_location_check,
        produce=produce_mailbox,
        what="a shared mailbox",
        config=MailConfig,
        available=lambda: bool(settings.RAG_ALLOWED_MAIL_SERVERS),
        permissions=mailbox_permissions,
        permission_minutes=lambda config: config.every,
    )
)


def kind_of(source: Source) -> SourceKind:
    return KINDS[source.kind]


def known_kind(kind: str) -> bool:
    return kind in KINDS


def creatable_kinds() -> list[str]:
    """The kinds a web or API user may create (the operator's command line may create any)."""
    return [name for name, kind in KINDS.items() if kind.creatable]


def offered_kinds() -> list[SourceKind]:
    """The kinds the new-source form offers on this server now, in the registry's order."""
    return [kind for kind in KINDS.values() if kind.creatable and kind.available()]


def upload_kinds() -> list[str]:
    """The kinds files may be uploaded into: every door's upload asks this registry (upload_refusal)."""
    return [name for name, kind in KINDS.items() if kind.accepts_uploads]


def upload_refusal(source: Source) -> str:
    """Why files may not be uploaded into `source` ("" when they may), in words for the uploader."""
    kind = kind_of(source)
    if kind.accepts_uploads:
        return ""
    return (
        f"{source.name} is read from {kind.what}: a file uploaded into it would be retired by its next sync. "
        "Upload into a source of uploaded files instead."
    )


def syncable_kinds() -> list[str]:
    return [name for name, kind in KINDS.items() if kind.syncable]


def config_options() -> dict[str, list[dict[str, Any]]]:
    """Each kind's own options (name, label, help, type), for the forms and the API's help."""
    return {name: kind.config.described() for name, kind in KINDS.items() if kind.config is not NoConfig}


def config_for(kind: str, values: dict[str, Any]) -> dict:
    """A kind's options from a form's or a request's values (only its own names), checked: ValueError says why."""
    registered = KINDS[kind].config
    types = {entry["name"]: entry["type"] for entry in registered.described()}
    given = {
        key: int(value) if types[key] == "int" else str(value).strip()
        for key, value in values.items()
        if key in types and value not in ("", None)
    }
    config = registered.from_dict(given)
    config.check()
    return config.as_dict()


def location_check(kind: str, location: str, tenant_slug: str) -> str:
    """A web or API user's location for a source of `kind` in their tenant, checked (FolderNotAllowed); kinds that
    read nothing have no location."""
    checker = KINDS[kind].check
    if checker is None:
        raise FolderNotAllowed(f"A source of {KINDS[kind].what} reads no location.")
    return checker(location, tenant_slug)


def sync_params(source: Source, *, operator: bool) -> tuple[str, dict[str, Any]]:
    """The job kind of a sync of this source and where it reads, checked now unless the operator queues it."""
    kind = kind_of(source)
    if not kind.syncable:
        raise FolderNotAllowed(f"{source.label} holds {kind.what}: it has nothing to sync; upload files instead.")
    location = (
        kind.operator_location(source.path) if operator else location_check(kind.name, source.path, source.tenant.slug)
    )
    return kind.job_kind, {kind.param: location}


def job_location(job: IngestJob) -> str:
    """The location a sync job may read: the one it recorded, checked again unless the operator queued it. Never the
    source's current location, which an admin may have changed since."""
    assert job.source is not None
    kind = kind_of(job.source)
    params = job.params or {}
    if not params.get(kind.param):
        raise FolderNotAllowed(f"This job recorded nothing to read ({kind.what}); sync the source again.")
    if params.get("operator"):
        return str(params[kind.param])
    return location_check(kind.name, str(params[kind.param]), job.tenant.slug)


def is_sync(job: IngestJob) -> bool:
    return job.kind != IngestJob.Kind.UPLOAD and job.source is not None and kind_of(job.source).syncable


def sync(
    source: Source,
    location: str,
    options: IngestOptions,
    job: IngestJob | None = None,
    progress: Callable[[IngestJob], None] | None = None,
) -> IngestJob:
    """One sync of a source from `location` (checked by the caller), by its kind's producer."""
    return SyncRun(kind_of(source), source, location, options=options, job=job, progress=progress).run()


def permission_sync(source: Source, location: str, job: IngestJob | None = None) -> IngestJob:
    """One permission sync of a source whose kind has one (`SourceKind.permissions`), from `location` (checked by
    the caller): who may read each document, applied as payload changes."""
    return PermissionRun(kind_of(source), source, location, options=IngestOptions(), job=job).run()


def is_permission_sync(job: IngestJob) -> bool:
    return job.kind == IngestJob.Kind.PERMISSIONS and job.source is not None


def run_sync(job: IngestJob, options: IngestOptions) -> IngestJob:
    """Run a sync job (or a permission sync): its location checked again right before reading, then its kind's
    producer."""
    assert job.source is not None
    if is_permission_sync(job):
        return permission_sync(job.source, job_location(job), job)
    return sync(job.source, job_location(job), options, job)


def scheduled_failure_kind(source: Source) -> str:
    """The job kind that records a scheduled sync which could not be queued."""
    return kind_of(source).job_kind
