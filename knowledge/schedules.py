"""Scheduled syncs. A syncable source (folder, vault, git) with `sync_every_minutes` has one django-q2 `Schedule`
(in the ORM, whichever broker runs the tasks), which the worker's scheduler turns into a
`scheduled_sync_task` (knowledge/tasks.py).

Never two syncs of a source at once: a run that finds a sync of the source queued or running does nothing, and
the source lock (knowledge/jobs.py) serialises whatever else. A missed run (the worker was down) is caught up once,
not replayed: Q_CLUSTER's `catch_up` is off, so the scheduler runs it once and sets the next run after now."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django_q.models import Schedule

from knowledge.ingest import sources
from knowledge.models import IngestJob, Source
from tenants.models import Tenant

MAX_MINUTES = 525_600  # a year
TASK = "knowledge.tasks.scheduled_sync_task"
PERMISSIONS_TASK = "knowledge.tasks.scheduled_permissions_task"
BUSY = (IngestJob.State.QUEUED, IngestJob.State.RUNNING, IngestJob.State.INDEXING)


class ScheduleRefused(ValueError):
    """The schedule cannot be set as asked; the message says why."""


def source_set_sync_every(*, tenant: Tenant, source: Source, minutes: int | None, operator: bool = False) -> None:
    """Sync the source every `minutes` (None: only on request). `operator`: set by the operator's command line, so
    its folder need not lie inside RAG_ALLOWED_FOLDER_ROOTS (as `manage.py ingest` itself); otherwise the folder is
    checked now and again at each run."""
    if source.tenant_id != tenant.pk:
        raise PermissionError("Sources of another tenant cannot be changed here.")
    if minutes is not None:
        if not sources.kind_of(source).syncable:
            raise ScheduleRefused(f"Only folder, vault, git and website sources sync on a schedule; this one holds "
                                  f"{source.get_kind_display().lower()}.")  # fmt: skip
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
            raise ScheduleRefused(f"Give a whole number of minutes from 1 to {MAX_MINUTES}.")
        if not operator:  # FolderNotAllowed: the caller says why
            sources.location_check(source.kind, source.path, tenant.slug)
    source.sync_every_minutes = minutes
    source.save(update_fields=["sync_every_minutes"])
    if minutes is None:
        Schedule.objects.filter(name=source.schedule_name).delete()
        return
    Schedule.objects.update_or_create(name=source.schedule_name, defaults={
        "func": TASK, "args": repr(source.pk), "kwargs": repr({"operator": operator}),
        "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1,
        "next_run": timezone.now() + timedelta(minutes=minutes),
    })  # fmt: skip


def source_schedule_remove(source: Source) -> None:
    Schedule.objects.filter(name__in=[source.schedule_name, permission_schedule_name(source)]).delete()


def permission_schedule_name(source: Source) -> str:
    return f"{source.schedule_name}-rights"


def source_permissions_schedule(source: Source) -> None:
    """A source whose kind has a permission sync (a wiki's read rights) runs it every `permission_minutes` of its
    options, whatever its content schedule: set when the source is made and again when its options change."""
    kind = sources.kind_of(source)
    name = permission_schedule_name(source)
    if kind.permissions is None:
        Schedule.objects.filter(name=name).delete()
        return
    minutes = kind.permission_minutes(kind.config_of(source))
    Schedule.objects.update_or_create(
        name=name,
        defaults={
            "func": PERMISSIONS_TASK,
            "args": repr(source.pk),
            "schedule_type": Schedule.MINUTES,
            "minutes": minutes,
            "repeats": -1,
            "next_run": timezone.now() + timedelta(minutes=minutes),
        },
    )


def source_schedule(source: Source) -> dict[str, Any]:
    """What the source page and API show: every how many minutes, the next run, the last scheduled run's job."""
    schedule = Schedule.objects.filter(name=source.schedule_name).first() if source.sync_every_minutes else None
    last = (IngestJob.objects.filter(source=source, params__trigger="schedule")
            .order_by("-created_at").first())  # fmt: skip
    return {
        "every_minutes": source.sync_every_minutes,
        "next_run": schedule.next_run if schedule is not None else None,
        "last_run": last.created_at if last is not None else None,
        "last_job": last,
    }


def next_runs(sources: list[Source]) -> dict[int, datetime]:
    """The next scheduled run of each of these sources that has one."""
    names = {s.schedule_name: s.pk for s in sources if s.sync_every_minutes}
    rows = Schedule.objects.filter(name__in=names).values_list("name", "next_run")
    return {names[name]: next_run for name, next_run in rows}


def last_runs(sources: list[Source]) -> dict[int, datetime]:
    """When each of these sources' last scheduled sync was queued (one query)."""
    from django.db.models import Max

    pks = [s.pk for s in sources if s.sync_every_minutes]
    rows = (IngestJob.objects.filter(source_id__in=pks, params__trigger="schedule").values("source_id")
            .annotate(last=Max("created_at")).values_list("source_id", "last"))  # fmt: skip
    return dict(rows)
