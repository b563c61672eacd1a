from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inference.embedders import become_batch_process
from knowledge import ids
from knowledge.ids import OCR_LANGUAGES_RE
from knowledge.index.storage import StorageFull, is_storage_full, storage_full_reason
from knowledge.ingest import git, pipeline, sources
from knowledge.ingest.producer import SourceProblem
from knowledge.jobs import SourceBusy
from knowledge.models import IngestJob, Source
from knowledge.schedules import MAX_MINUTES, source_set_sync_every
from knowledge.services import (
    ingest_options,
    source_create_for,
    source_set_access,
    source_set_config,
    source_set_review_every,
    source_sync_enqueue,
)  # fmt: skip
from tenants.models import Tenant
from tenants.principals import UnknownPrincipal, parse_principal_list, principals_check


class Command(BaseCommand):
    help = (
        "Ingest a folder, an Obsidian vault or a git repository into a tenant (the operator's CLI may read any "
        "readable path or URL)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("path", help="a folder, a vault, (--kind git) a repository's path or URL, or (--kind "
                                         "website) a start URL or sitemap.xml")  # fmt: skip
        parser.add_argument("--kind", default="auto", choices=["auto", *sources.syncable_kinds()],
                            help="auto: a vault when the folder has .obsidian/ at its root, else a folder")  # fmt: skip
        parser.add_argument("--branch", default="", help="git: the branch read (default: the repository's HEAD)")
        parser.add_argument("--depth", type=int, default=None, metavar="COMMITS",
                            help="git: commits of each file's history the first import reads (default 50)")  # fmt: skip
        parser.add_argument(
            "--option",
            dest="kind_options",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="one of the kind's own options (knowledge/ingest/sources.py), such as branch=main",
        )
        parser.add_argument("--source", default="", help="source name (default: the folder's name)")
        parser.add_argument("--mode", default="auto", choices=["auto", "documental", "code"])
        parser.add_argument("--tags", default="", help="comma-separated tags for every document")
        parser.add_argument("--ocr-languages", default="", help="Tesseract languages for scanned pages (spa+eng)")
        parser.add_argument("--async", dest="run_async", action="store_true", help="enqueue a background job")
        parser.add_argument("--access", default=None,
                            help="who sees the source's documents: tenant (a new source's default), or "
                                 "principals such as group:hr,user:bob; an existing source keeps its list unless "
                                 "given")  # fmt: skip
        parser.add_argument(
            "--enrich",
            default="",
            metavar="MODEL",
            help="an enrichment model of the catalog by name: it writes each document's title, "
            "summary, topics and key points (checked against the text; never cited)",
        )
        parser.add_argument("--directives", default="", help="the administrator's directives to the --enrich model")
        parser.add_argument("--review-every", dest="review_every", type=int, default=None, metavar="DAYS",
                            help="documents whose review date is not stated are due a review DAYS after their "
                                 "content last changed (0: never); kept by the source for later syncs")  # fmt: skip
        parser.add_argument("--sync-every", dest="sync_every", type=int, default=None, metavar="MINUTES",
                            help="the worker syncs this source again every MINUTES (0: only on request)")  # fmt: skip

    def handle(self, *args: Any, tenant: str, path: str, source: str, mode: str, tags: str, run_async: bool,
               ocr_languages: str = "", access: str | None = None, review_every: int | None = None,
               **options: Any) -> None:  # fmt: skip
        become_batch_process()  # every core for embedding, below the web server's priority
        owner = Tenant.objects.filter(slug=tenant).first()
        if owner is None:
            raise CommandError(f"No tenant with slug {tenant!r}.")
        kind = options.get("kind") or "auto"
        # a repository's or a website's URL (or another kind's address); otherwise a folder here
        url = kind != "auto" and (git.is_url(path) or "://" in path)
        root = Path(path).expanduser().resolve()
        if not url and not root.is_dir():
            raise CommandError(f"{path} is not a readable folder.")
        if kind == "auto":
            kind = "obsidian" if (root / ".obsidian").is_dir() else "folder"
        depth = options.get("depth")
        if depth is not None and not 1 <= depth <= 100_000:
            raise CommandError("--depth takes a number of commits from 1 to 100000.")
        if review_every is not None and not 0 <= review_every <= 3650:
            raise CommandError("--review-every takes a number of days from 1 to 3650 (0: never).")
        sync_every = options.get("sync_every")
        if sync_every is not None and not 0 <= sync_every <= MAX_MINUTES:
            raise CommandError(f"--sync-every takes a number of minutes from 1 to {MAX_MINUTES} (0: only on request).")
        if access is not None and not parse_principal_list(access):
            raise CommandError("--access needs tenant, or principals such as group:hr,user:bob.")
        try:  # before anything is created: an unknown group or user stops the command
            wanted = None if access is None else principals_check(tenant=owner, principals=parse_principal_list(access))
        except UnknownPrincipal as exc:
            raise CommandError(str(exc)) from exc
        name = source or (git.repository_name(path) if url else root.name)
        location = path.strip() if url else str(root)
        try:
            given = dict(option.split("=", 1) for option in options.get("kind_options") or [] if "=" in option)
            given.update({"branch": options.get("branch") or "", "history_depth": depth})
            folder = _source(owner, kind, name, location, given)
        except (ids.InvalidIdentifier, SourceProblem) as exc:
            raise CommandError(str(exc)) from exc
        if wanted is not None and sorted(wanted) != sorted(folder.access):
            changed = source_set_access(tenant=owner, source=folder, access=wanted, actor="manage.py ingest")
            self.stdout.write(f"Access of {folder.source_id}: {', '.join(wanted)} ({changed} documents changed)")
        if ocr_languages:
            if not OCR_LANGUAGES_RE.match(ocr_languages):
                raise CommandError(f"{ocr_languages!r} is not a list of Tesseract language codes such as spa+eng.")
            folder.ocr_languages = ocr_languages
            folder.save(update_fields=["ocr_languages"])
        if review_every is not None:
            source_set_review_every(tenant=owner, source=folder, days=review_every or None)
        if sync_every is not None:  # the operator's command: its folder need not be inside the allowed roots
            source_set_sync_every(tenant=owner, source=folder, minutes=sync_every or None, operator=True)
            self.stdout.write(f"{folder.source_id} syncs every {sync_every} minute(s)" if sync_every else
                              f"{folder.source_id} syncs only on request")  # fmt: skip
        try:
            how = ingest_options(
                mode=mode,
                tags=[t.strip() for t in tags.split(",") if t.strip()],
                enrich_model=options.get("enrich") or "",
                directives=options.get("directives") or "",
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if run_async:
            job = source_sync_enqueue(tenant=owner, source=folder, options=how, operator=True)
            self.stdout.write(f"Queued job {job.public_id} for {folder.source_id}")
            return
        started = time.monotonic()
        try:  # the operator's own location, read now in this process by the source's kind
            job = sources.sync(folder, location, how, progress=self._progress)
        except (SourceBusy, StorageFull, SourceProblem) as exc:
            raise CommandError(str(exc)) from exc
        except Exception as exc:
            if is_storage_full(exc):  # before the job could even be recorded
                raise CommandError(storage_full_reason(None)) from exc
            raise
        if job.state == IngestJob.State.INDEXING:
            self.stdout.write("\nWaiting for the process that owns the vector store to index the new versions…")
            job = pipeline.wait_for_job(job)
        sys.stderr.write("\n")
        elapsed = time.monotonic() - started
        self.stdout.write(
            f"{folder.source_id}: {job.added} added, {job.updated} updated, {job.unchanged} unchanged, "
            f"{job.retired} retired, {job.skipped} skipped, {job.failed} failed; "
            f"{job.chunks_done} chunks embedded in {elapsed:.1f} s ({job.state})"
        )
        for error in job.errors:
            self.stdout.write(f"  failed  {error['key']}: {error['error']}")
        for problem in (job.params or {}).get("link_problems", []):
            self.stdout.write(f"  link    {problem}")
        if options.get("verbosity", 1) > 1:
            for skip in job.skips:
                self.stdout.write(f"  skipped {skip['key']}: {skip['reason']}")

    def _progress(self, job: IngestJob) -> None:
        total = max(job.documents_total, 1)
        filled = int(30 * job.documents_done / total)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {job.documents_done}/{job.documents_total} documents, "
            f"{job.chunks_done} chunks"
        )
        sys.stderr.flush()


def _source(tenant: Tenant, kind: str, name: str, location: str, given: dict[str, Any]) -> Source:
    """The tenant's source of this kind and name (created by the operator: any location it can read), reading
    `location`, the kind's own options set as given (the others kept)."""
    found = Source.objects.for_tenant(tenant).filter(source_id=ids.source_id(tenant.slug, kind, name)).first()
    given = {key: value for key, value in given.items() if value not in ("", None)}
    if found is None:
        return source_create_for(tenant=tenant, kind=kind, name=name, location=location, config=given, operator=True)
    found.set_location(location)
    found.save(update_fields=["path", "credential"])
    return source_set_config(source=found, values=given)
