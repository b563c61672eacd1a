"""Every per-tenant API route × {staff session, admin session, read key, write key, other tenant's key,
none}: staff and read keys read, only admins and write keys write, nobody else gets in.

The routes are enumerated from the URL configuration, so a new route is covered the day it is added;
a write is any unsafe method on a view that does not declare `reads_with_post`. An agent session's routes are the
caller's own: each caller is given a session of its own for them (another's is a 404: tests/knowledge/test_sessions)."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.permissions import SAFE_METHODS
from rest_framework.test import APIClient

from agent_sessions import services as sessions
from knowledge.models import Document, IngestJob, Source, Status
from tenants.access import TenantApiView
from tenants.models import ApiKey, Membership, Tenant
from tenants.services import api_key_issue, group_create
from tests.factories import CommittingClientMixin, make_answer, make_folder_source, make_member


class CommittingAPIClient(CommittingClientMixin, APIClient):
    pass


def _api_routes() -> list[tuple[str, type[TenantApiView]]]:
    routes = []

    def walk(patterns, prefix: str) -> None:  # type: ignore[no-untyped-def]
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                view = getattr(entry.callback, "view_class", None)
                if view is not None and issubclass(view, TenantApiView):
                    routes.append((prefix + str(entry.pattern), view))

    walk(get_resolver().url_patterns, "/")
    return routes


@pytest.fixture
def world(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"faq.md": "# FAQ\n\nOpen the page.\n"})
    document = Document.objects.get(source=source)
    job = IngestJob.objects.filter(source=source).first()
    group_create(tenant=tenant_a, name="hr")
    agent = api_key_issue(tenant=tenant_a, name="agent")[0]
    session = sessions.session_create(tenant=tenant_a, api_key=agent)
    return {"tenant_slug": "acme", "session_id": session.public_id, "source_id": source.public_id,
            "job_id": job.public_id, "document_id": document.public_id, "answer_id": make_answer(tenant_a).public_id,
            "group_name": "hr", "username": "sam", "key_id": agent.public_id}  # fmt: skip


def _url(route: str, values: dict, **owner: object) -> str:  # type: ignore[type-arg]
    """The route with the world's ids; a session route with a session of `owner` (a user or an API key), an answer's
    route with an answer `owner` asked (a receipt is its asker's)."""
    import re

    if owner and "<uuid:session_id>" in route:
        tenant = Tenant.objects.get(slug=values["tenant_slug"])
        values = {**values, "session_id": sessions.session_create(tenant=tenant, **owner).public_id}
    if owner and "<str:answer_id>" in route:
        tenant = Tenant.objects.get(slug=values["tenant_slug"])
        values = {**values, "answer_id": make_answer(tenant, **owner).public_id}
    return re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values[m.group(1)]), route)


def _calls(view: type[TenantApiView]) -> list[str]:
    return [m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)]


def test_the_routes_are_found():
    names = {view.__name__ for _, view in _api_routes()}
    assert {"RetrieveApi", "AnswerApi", "SourceDetailApi", "JobRetryApi", "DocumentRetireApi", "VerdictApi",
            "ReceiptApi"} <= names  # fmt: skip


def test_staff_sessions_read_but_never_write_through_the_api(tenant_a, world):
    staff = make_member(tenant_a, role=Membership.Role.STAFF, username="sam")
    client = CommittingAPIClient()
    client.force_login(staff)
    for route, view in _api_routes():
        for method in _calls(view):
            url = _url(route, world, user=staff)
            response = getattr(client, method)(url, {}, format="json")
            writes = method.upper() not in SAFE_METHODS and not view.reads_with_post
            if writes or view.access_admin or view.admin_only:  # groups: who is in hr is itself restricted
                assert response.status_code == 404, (method, url, response.status_code)
            else:
                assert response.status_code != 404 and response.status_code < 500, (method, url, response.status_code)
    # Nothing changed: the source is there, the document active, no job was queued by staff.
    assert Source.objects.filter(public_id=world["source_id"]).exists()
    assert Document.objects.get(public_id=world["document_id"]).status == Status.ACTIVE
    assert IngestJob.objects.count() == 1


def test_admin_sessions_may_write(tenant_a, world, admin_a):
    client = CommittingAPIClient()
    client.force_login(admin_a)
    retire = client.post(f"/api/v1/tenants/acme/documents/{world['document_id']}/retire/", {}, format="json")
    assert retire.status_code in (200, 202, 204)
    delete = client.delete(f"/api/v1/tenants/acme/sources/{world['source_id']}/")
    assert delete.status_code == 204 and not Source.objects.filter(public_id=world["source_id"]).exists()


def _key_client(tenant, scope: str, acts_for: list[str] | None = None) -> APIClient:  # type: ignore[no-untyped-def]
    client = CommittingAPIClient()
    key, raw = api_key_issue(tenant=tenant, scope=scope, acts_for=acts_for)
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    client.key = key  # type: ignore[attr-defined]
    return client


def test_read_keys_read_other_keys_and_no_key_get_nothing_write_keys_write(tenant_a, tenant_b, world):
    read, other, anonymous = _key_client(tenant_a, "read"), _key_client(tenant_b, "write"), CommittingAPIClient()
    for route, view in _api_routes():
        url = _url(route, world)
        for method in _calls(view):
            writes = method.upper() not in SAFE_METHODS and not view.reads_with_post
            status = getattr(read, method)(_url(route, world, api_key=read.key), {}, format="json").status_code
            assert (
                (status == 403)
                if writes or view.access_admin or view.admin_only
                else (status not in (401, 403, 404) and status < 500)
            ), (method, url)
            assert getattr(other, method)(url, {}, format="json").status_code == 404, (method, url)
            assert getattr(anonymous, method)(url, {}, format="json").status_code in (401, 403), (method, url)
    assert Source.objects.filter(public_id=world["source_id"]).exists()  # nothing was written
    write, everything = _key_client(tenant_a, "write"), _key_client(tenant_a, "write", acts_for=["all"])
    for route, view in _api_routes():  # last: these writes change the data
        for method in _calls(view):
            if view.access_admin:  # groups and access lists: a write key must act for all
                assert getattr(write, method)(_url(route, world), {}, format="json").status_code == 403
            caller = everything if view.access_admin else write
            status = getattr(caller, method)(_url(route, world, api_key=caller.key), {}, format="json").status_code
            assert status not in (401, 403) and status < 500, (method, route, status)


def test_keys_default_to_write_and_the_cli_issues_read_keys(tenant_a, capsys):
    from django.core.management import call_command

    assert api_key_issue(tenant=tenant_a)[0].scope == ApiKey.Scope.WRITE  # existing keys were migrated to write
    call_command("create_api_key", "acme", "--scope", "read", "--name", "bot")
    assert ApiKey.objects.get(name="bot").scope == ApiKey.Scope.READ
    assert "(read)" in capsys.readouterr().out
