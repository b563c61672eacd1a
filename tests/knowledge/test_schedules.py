"""Scheduled syncs of folder sources: a django-q2 Schedule per source, run by django-q2's own scheduler; a new file
is picked up with nobody asking, never two syncs of a source at once, a missed run caught up once, not replayed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule
from django_q.scheduler import scheduler
from rest_framework.test import APIClient

from agent_sessions.services import CLEANUP_SCHEDULE as SESSIONS_CLEANUP
from knowledge.models import Document, IngestJob
from knowledge.schedules import source_set_sync_every
from knowledge.services import source_create, source_delete
from tenants.services import api_key_issue
from tests.factories import make_folder_source


@pytest.fixture
def folder(tenant_a, tmp_path, settings):  # type: ignore[no-untyped-def]
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    return make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"faq.md": "# FAQ\n\nOpen the page.\n"})


def _run_due(django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=True):  # Q_CLUSTER sync: each task runs inline
        scheduler()


def test_a_scheduled_sync_picks_up_a_new_file_with_nobody_asking(tenant_a, folder, tmp_path,
                                                                django_capture_on_commit_callbacks):  # fmt: skip
    source_set_sync_every(tenant=tenant_a, source=folder, minutes=5)
    schedule = Schedule.objects.get(name=folder.schedule_name)
    assert (schedule.schedule_type, schedule.minutes, schedule.func) == ("I", 5, "knowledge.tasks.scheduled_sync_task")
    (tmp_path / "kb" / "new.md").write_text("# New\n\nThe new page explains refunds.\n")
    _run_due(django_capture_on_commit_callbacks)
    assert not Document.objects.filter(source=folder, document_key="new.md").exists()  # not due yet
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    _run_due(django_capture_on_commit_callbacks)
    job = IngestJob.objects.filter(source=folder, params__trigger="schedule").get()
    assert job.state == IngestJob.State.SUCCEEDED and job.added == 1
    assert Document.objects.get(source=folder, document_key="new.md").status == "active"
    assert Schedule.objects.get(pk=schedule.pk).next_run > timezone.now() + timedelta(minutes=4)


def test_a_missed_run_is_caught_up_once_not_replayed(tenant_a, folder, django_capture_on_commit_callbacks):
    source_set_sync_every(tenant=tenant_a, source=folder, minutes=1)
    # The worker was down for an hour: sixty runs were missed.
    Schedule.objects.filter(name=folder.schedule_name).update(next_run=timezone.now() - timedelta(hours=1))
    _run_due(django_capture_on_commit_callbacks)
    _run_due(django_capture_on_commit_callbacks)
    assert IngestJob.objects.filter(source=folder, params__trigger="schedule").count() == 1
    assert Schedule.objects.get(name=folder.schedule_name).next_run > timezone.now()


def test_never_two_syncs_of_a_source_at_once(tenant_a, folder, django_capture_on_commit_callbacks):
    source_set_sync_every(tenant=tenant_a, source=folder, minutes=1)
    running = IngestJob.objects.create(tenant=tenant_a, source=folder, kind=IngestJob.Kind.FOLDER,
                                       state=IngestJob.State.RUNNING)  # fmt: skip
    Schedule.objects.filter(name=folder.schedule_name).update(next_run=timezone.now() - timedelta(seconds=1))
    _run_due(django_capture_on_commit_callbacks)
    assert list(IngestJob.objects.filter(source=folder, params__trigger="schedule")) == []
    assert IngestJob.objects.get(pk=running.pk).state == IngestJob.State.RUNNING


def test_the_api_sets_and_clears_a_schedule_and_refuses_bad_values(tenant_a, folder):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    url = f"/api/v1/tenants/acme/sources/{folder.public_id}/"
    for bad in (0, -5, "soon", 1.5, True):
        response = client.patch(url, {"sync_every_minutes": bad}, format="json")
        assert response.status_code == 400 and "sync_every_minutes" in response.json(), bad
    body = client.patch(url, {"sync_every_minutes": 30}, format="json").json()
    assert body["sync_every_minutes"] == 30 and body["schedule"]["every_minutes"] == 30
    assert body["schedule"]["next_run"] is not None and body["schedule"]["last_run"] is None
    uploads = source_create(tenant=tenant_a, kind="upload", name="manuals")
    refused = client.patch(f"/api/v1/tenants/acme/sources/{uploads.public_id}/", {"sync_every_minutes": 5},
                           format="json")  # fmt: skip
    assert refused.status_code == 400
    assert "Only folder, vault, git and website sources" in refused.json()["sync_every_minutes"][0]
    cleared = client.patch(url, {"sync_every_minutes": None}, format="json").json()
    assert cleared["sync_every_minutes"] is None and cleared["schedule"] is None
    assert not Schedule.objects.filter(name=folder.schedule_name).exists()


def test_the_source_page_sets_a_schedule_and_shows_the_next_run(tenant_a, folder, client_a):
    page = client_a.post(f"/t/acme/sources/{folder.public_id}/schedule/", {"sync_every_minutes": "15"}, follow=True)
    html = page.content.decode()
    assert "syncs every 15 minute(s)" in html and "next-sync" in html
    assert 'value="15"' in html
    bad = client_a.post(f"/t/acme/sources/{folder.public_id}/schedule/", {"sync_every_minutes": "0"}, follow=True)
    assert "from 1 to" in bad.content.decode()
    assert Schedule.objects.get(name=folder.schedule_name).minutes == 15


def test_a_deleted_source_takes_its_schedule_and_ingest_sets_one(tenant_a, folder, tmp_path, capsys):
    source_set_sync_every(tenant=tenant_a, source=folder, minutes=10)
    source_delete(tenant=tenant_a, source=folder)
    # beside the platform's own schedules (the cleanup of agent sessions, the recall scan, webhooks, digests, retention)
    sources = Schedule.objects.exclude(name__startswith="ragsite: ")
    assert Schedule.objects.filter(name=SESSIONS_CLEANUP).exists()
    assert not sources.exists()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAlpha.\n")
    call_command("ingest", "acme", str(docs), "--sync-every", "60")
    assert "syncs every 60 minute(s)" in capsys.readouterr().out
    assert sources.get().minutes == 60
