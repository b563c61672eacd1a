"""The lifecycle of an evaluation run (EvalRun), in one module: every change of its state is here.

queued (`queue`) → running (`claim`: one runner takes it; `start` for a run the CLI runs itself) → done (`done`) or
failed (`fail`); a run whose process could not search goes back to the queue (`requeue`), and a running run whose
runner fell silent (the web server stopped mid-run) is failed with that reason (`fail_silent`), never left running."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from feedback.models import EvalRun
from tenants.models import Tenant

RUNNER_SILENCE = timedelta(minutes=15)  # a running run whose runner wrote nothing for this long has died
SILENT = "The process running it stopped before the run finished; run it again."


def queue(*, tenant: Tenant, answers: bool, started_by: str = "", trigger: str = "page",
          running: bool = False) -> EvalRun:  # fmt: skip
    """A new run, queued for a runner; `running`: claimed from the start by the process that runs it (the CLI)."""
    state = EvalRun.State.RUNNING if running else EvalRun.State.QUEUED
    return EvalRun.objects.create(tenant=tenant, answers=answers, trigger=trigger, started_by=started_by, state=state,
                                  heartbeat_at=timezone.now() if running else None)  # fmt: skip


def claim(run: EvalRun) -> bool:
    """Take a queued run for this process; False when another runner took it first."""
    taken = EvalRun.objects.filter(pk=run.pk, state=EvalRun.State.QUEUED).update(
        state=EvalRun.State.RUNNING, heartbeat_at=timezone.now())  # fmt: skip
    return bool(taken)


def start(run: EvalRun) -> None:
    run.state, run.heartbeat_at = EvalRun.State.RUNNING, timezone.now()
    run.save(update_fields=["state", "heartbeat_at"])


def heartbeat(run: EvalRun) -> None:
    EvalRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())


def done(run: EvalRun, *, results: list[dict[str, Any]], context: dict[str, Any], metrics: dict[str, Any]) -> None:
    run.results, run.context, run.metrics = results, context, metrics
    run.state, run.finished_at = EvalRun.State.DONE, timezone.now()
    run.save()


def requeue(run: EvalRun) -> None:
    """Back to the queue: this process cannot search (another owns the embedded store)."""
    run.state = EvalRun.State.QUEUED
    run.save(update_fields=["state"])


def fail(run: EvalRun, error: str) -> None:
    run.state, run.error, run.finished_at = EvalRun.State.FAILED, error, timezone.now()
    run.save()


def fail_silent(*, tenant: Tenant | None = None) -> int:
    """Fail the running runs whose runner fell silent (of one tenant, or all)."""
    silent = EvalRun.objects.filter(state=EvalRun.State.RUNNING, heartbeat_at__lt=timezone.now() - RUNNER_SILENCE)
    if tenant is not None:
        silent = silent.filter(tenant=tenant)
    return silent.update(state=EvalRun.State.FAILED, finished_at=timezone.now(), error=SILENT)
