"""The source kinds, in one registry: what each kind reads, how a web or API user's location for it is checked, the
job that syncs it, and that sync. Nothing else compares a source's kind or a job's kind (the model itself aside:
`Source.syncable`, which a test holds equal to this registry). A new kind is one module and one line here.

A sync job records the location it was queued for, checked then; the worker checks it again right before reading
(`job_location`), unless the operator's command line queued it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowledge.ingest import website
from knowledge.ingest.folder_sync import sync_folder
from knowledge.ingest.git_sync import sync_git
from knowledge.ingest.vault_sync import sync_vault
from knowledge.locations import FolderNotAllowed, folder_path_check, git_location_check, web_location_check
from knowledge.models import IngestJob, Source
from knowledge.options import IngestOptions

# (source, its checked location, options, the job: None when the operator's CLI runs it in-process, progress)
Sync = Callable[[Source, str, IngestOptions, IngestJob | None, Callable[[IngestJob], None] | None], Any]


def _folder(path: str, tenant_slug: str) -> str:
    return str(folder_path_check(path, tenant_slug))


def _sync_folder(source: Source, location: str, options: IngestOptions, job: IngestJob | None,
                 progress: Callable[[IngestJob], None] | None = None) -> Any:  # fmt: skip
    return sync_folder(source=source, root=Path(location), options=options, job=job, progress=progress)


def _sync_vault(source: Source, location: str, options: IngestOptions, job: IngestJob | None,
                progress: Callable[[IngestJob], None] | None = None) -> Any:  # fmt: skip
    return sync_vault(source=source, root=Path(location), options=options, job=job, progress=progress)


def _sync_git(source: Source, location: str, options: IngestOptions, job: IngestJob | None,
              progress: Callable[[IngestJob], None] | None = None) -> Any:  # fmt: skip
    return sync_git(source=source, location=location, options=options, job=job, progress=progress)


def _sync_website(source: Source, location: str, options: IngestOptions, job: IngestJob | None,
                  progress: Callable[[IngestJob], None] | None = None) -> Any:  # fmt: skip
    return website.sync_website(source=source, location=location, options=options, job=job, progress=progress)


@dataclass(frozen=True)
class SourceKind:
    """One kind of source. `check`: a web or API user's location and their tenant → the location to read
    (FolderNotAllowed says why not); `sync`: one sync of a source from its checked location; `param`: where a job
    records that location; `operator_location`: the location as the operator's command line gave it (not checked,
    made absolute)."""

    name: str
    job_kind: str
    check: Callable[[str, str], str] | None = None
    sync: Sync | None = None
    param: str = "path"
    operator_location: Callable[[str], str] = str.strip
    what: str = ""  # in words, for refusals
    creatable: bool = True  # whether a web or API user may create a source of this kind
    accepts_uploads: bool = False  # whether files may be uploaded into it (a synced kind's next sync retires them)

    @property
    def syncable(self) -> bool:
        return self.sync is not None


KINDS: dict[str, SourceKind] = {
    kind.name: kind
    for kind in (
        SourceKind(Source.Kind.UPLOAD, IngestJob.Kind.UPLOAD, what="uploaded files", accepts_uploads=True),
        SourceKind(Source.Kind.EXTERNAL, IngestJob.Kind.UPLOAD, what="external references", creatable=False),
        SourceKind(Source.Kind.FOLDER, IngestJob.Kind.FOLDER, _folder, _sync_folder,
                   operator_location=lambda path: str(Path(path).expanduser().resolve()), what="a folder"),
        SourceKind(Source.Kind.OBSIDIAN, IngestJob.Kind.FOLDER, _folder, _sync_vault,
                   operator_location=lambda path: str(Path(path).expanduser().resolve()), what="a vault"),
        SourceKind(Source.Kind.GIT, IngestJob.Kind.GIT, git_location_check, _sync_git, param="location",
                   what="a git repository"),
        SourceKind(Source.Kind.WEBSITE, IngestJob.Kind.WEB, web_location_check, _sync_website, param="location",
                   what="a website"),
    )
}  # fmt: skip
JOB_SYNCS = {kind.job_kind: kind for kind in KINDS.values() if kind.syncable}  # the kind whose sync a job runs


def kind_of(source: Source) -> SourceKind:
    return KINDS[source.kind]


def creatable_kinds() -> list[str]:
    """The kinds a web or API user may create (the operator's command line may create any)."""
    return [name for name, kind in KINDS.items() if kind.creatable]


def upload_kinds() -> list[str]:
    """The kinds files may be uploaded into: every door's upload asks this registry (upload_refusal)."""
    return [name for name, kind in KINDS.items() if kind.accepts_uploads]


def upload_refusal(source: Source) -> str:
    """Why files may not be uploaded into `source` ("" when they may), in words for the uploader."""
    kind = kind_of(source)
    if kind.accepts_uploads:
        return ""
    return (f"{source.name} is read from {kind.what}: a file uploaded into it would be retired by its next sync. "
            "Upload into a source of uploaded files instead.")  # fmt: skip


def syncable_kinds() -> list[str]:
    return [name for name, kind in KINDS.items() if kind.syncable]


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
    location = (kind.operator_location(source.path) if operator
                else location_check(kind.name, source.path, source.tenant.slug))  # fmt: skip
    return kind.job_kind, {kind.param: location}


def job_location(job: IngestJob) -> str:
    """The location a sync job may read: the one it recorded, checked again unless the operator queued it. Never the
    source's current location, which an admin may have changed since."""
    kind = JOB_SYNCS[job.kind]
    params = job.params or {}
    if not params.get(kind.param):
        raise FolderNotAllowed(f"This job recorded nothing to read ({kind.what}); sync the source again.")
    if params.get("operator"):
        return str(params[kind.param])
    return location_check(kind.name, str(params[kind.param]), job.tenant.slug)


def is_sync(job: IngestJob) -> bool:
    return job.kind in JOB_SYNCS


def run_sync(job: IngestJob, options: IngestOptions) -> Any:
    """Run a sync job: its location checked again right before reading, then its kind's sync."""
    assert job.source is not None
    return kind_of(job.source).sync(job.source, job_location(job), options, job, None)  # type: ignore[misc]


def scheduled_failure_kind(source: Source) -> str:
    """The job kind that records a scheduled sync which could not be queued."""
    return kind_of(source).job_kind
