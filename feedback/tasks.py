"""django-q2 entry point for evaluation runs. The tenant comes from the run row, never from the caller."""

from __future__ import annotations

from feedback.evaluation import evaluation_run
from feedback.models import EvalRun


def evaluation_run_task(run_id: int) -> None:
    run = EvalRun.objects.select_related("tenant").filter(pk=run_id, state=EvalRun.State.QUEUED).first()
    if run is not None:  # delivered twice (the broker's retry), or already run: nothing to do
        evaluation_run(run)
