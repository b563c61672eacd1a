"""The permission sync's bookkeeping, without a server: a run every 5 minutes keeps only the last quiet runs (those
that changed someone's access stay), and a scheduled run waits while any sync of the source is busy."""

from __future__ import annotations

from knowledge import tasks
from knowledge.models import IngestJob
from tests.factories import make_folder_source


def test_quiet_permission_syncs_are_pruned_and_those_that_changed_access_are_kept(tenant_a, tmp_path):
    source = make_folder_source(tenant=tenant_a, root=tmp_path, files={"a.md": "# A\n\nText.\n"})
    quiet = {"access": {"documents": 3, "opened": 0, "closed": 0}}
    for _n in range(tasks.PERMISSION_JOBS_KEPT + 5):
        IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.PERMISSIONS,
                                 state=IngestJob.State.SUCCEEDED, params=quiet)  # fmt: skip
    changed = IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.PERMISSIONS,
                                       state=IngestJob.State.SUCCEEDED,
                                       params={"access": {"documents": 3, "opened": 1, "closed": 0}})  # fmt: skip
    failed = IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.PERMISSIONS,
                                      state=IngestJob.State.FAILED, params={})  # fmt: skip
    content = IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.FOLDER,
                                       state=IngestJob.State.SUCCEEDED)  # fmt: skip
    assert tasks.permission_jobs_prune(source) == 6
    left = IngestJob.objects.filter(source=source, kind=IngestJob.Kind.PERMISSIONS)
    assert left.count() == tasks.PERMISSION_JOBS_KEPT + 1 and left.filter(pk=changed.pk).exists()
    assert left.filter(pk=failed.pk).exists()  # the newest failure is among the kept quiet ones
    assert IngestJob.objects.filter(pk=content.pk).exists()  # content syncs are never pruned here


def test_a_scheduled_permission_sync_waits_while_a_sync_of_the_source_is_busy(tenant_a, tmp_path):
    source = make_folder_source(tenant=tenant_a, root=tmp_path, files={"a.md": "# A\n\nText.\n"})
    IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.FOLDER, state=IngestJob.State.RUNNING)
    tasks.scheduled_permissions_task(source.pk)
    assert not IngestJob.objects.filter(source=source, kind=IngestJob.Kind.PERMISSIONS).exists()
