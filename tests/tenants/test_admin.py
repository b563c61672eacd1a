"""The Django admin keeps a tenant admin inside their own tenant; bulk curation actions work."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from knowledge.models import Chunk, Document, DocumentVersion, Source, Status, Tag
from tenants.models import ApiKey, Membership
from tenants.services import api_key_authenticate, api_key_issue
from tests.factories import make_document, make_member


@pytest.fixture
def documents(tenant_a, tenant_b):
    return {
        "a": make_document(tenant=tenant_a, key="handbook/alpha.md", chunks=2),
        "b": make_document(tenant=tenant_b, key="payroll/secret-globex.md", chunks=2),
    }


@pytest.mark.parametrize(
    "model, builder",
    [
        ("document", lambda d: d),
        ("chunk", lambda d: d.chunks.first()),
        ("source", lambda d: d.source),
        ("tag", None),
    ],
)
def test_a_tenant_admin_sees_only_their_tenants_rows(client_a, documents, tenant_a, tenant_b, model, builder):
    if model == "tag":
        own, foreign = (
            Tag.objects.create(tenant=tenant_a, name="mine"),
            Tag.objects.create(tenant=tenant_b, name="theirs"),
        )
    else:
        own, foreign = builder(documents["a"]), builder(documents["b"])
    listing = client_a.get(reverse(f"admin:knowledge_{model}_changelist"))
    assert listing.status_code == 200
    page = listing.content.decode()
    assert str(own) in page or own.pk in listing.context["cl"].result_list.values_list("pk", flat=True)
    assert foreign.pk not in listing.context["cl"].result_list.values_list("pk", flat=True)
    assert "globex" not in page.lower()

    own_page = client_a.get(reverse(f"admin:knowledge_{model}_change", args=[own.pk]))
    assert own_page.status_code == 200
    # A direct URL to another tenant's row answers exactly like a row that does not exist.
    foreign_page = client_a.get(reverse(f"admin:knowledge_{model}_change", args=[foreign.pk]), follow=True)
    missing_page = client_a.get(reverse(f"admin:knowledge_{model}_change", args=[999999]), follow=True)
    assert foreign_page.redirect_chain == [(reverse("admin:index"), 302)]
    assert [str(m) for m in foreign_page.context["messages"]] == [
        str(m).replace("999999", str(foreign.pk)) for m in missing_page.context["messages"]
    ]
    assert "secret-globex" not in foreign_page.content.decode()


def test_a_tenant_admin_cannot_open_another_tenants_tenant_membership_or_key(client_a, tenant_a, tenant_b):
    foreign_member = Membership.objects.get(user=make_member(tenant_b))
    foreign_key, _ = api_key_issue(tenant=tenant_b)
    for name, pk in [("tenant", tenant_b.pk), ("membership", foreign_member.pk), ("apikey", foreign_key.pk)]:
        response = client_a.get(reverse(f"admin:tenants_{name}_change", args=[pk]))
        assert response.status_code == 302, name
    tenants_page = client_a.get(reverse("admin:tenants_tenant_changelist")).content.decode()
    assert "globex" not in tenants_page.lower() and "acme" in tenants_page


def test_a_tenant_admin_cannot_delete_another_tenants_document(client_a, documents):
    foreign = documents["b"]
    client_a.post(reverse("admin:knowledge_document_delete", args=[foreign.pk]), {"post": "yes"})
    assert Document.objects.filter(pk=foreign.pk).exists()


def test_a_tenant_admin_cannot_move_a_row_into_another_tenant(client_a, tenant_a, tenant_b):
    response = client_a.post(reverse("admin:tenants_apikey_add"), {"tenant": tenant_b.pk, "name": "sneaky"})
    assert response.status_code == 200  # the form rejects a tenant outside the choices
    assert "Select a valid choice" in response.content.decode()
    assert not ApiKey.objects.filter(tenant=tenant_b).exists()


def test_staff_members_and_strangers_cannot_use_the_admin(tenant_a, documents):
    client = Client()
    client.force_login(make_member(tenant_a, role=Membership.Role.STAFF))
    response = client.get(reverse("admin:knowledge_document_changelist"))
    assert response.status_code == 302 and "login" in response["Location"]


def test_bulk_actions_on_the_selection_only_touch_the_admins_tenant(client_a, documents, tenant_a):
    own, foreign = documents["a"], documents["b"]
    url = reverse("admin:knowledge_document_changelist")
    selection = {"_selected_action": [own.pk, foreign.pk]}

    client_a.post(url, {**selection, "action": "mark_critical"})
    own.refresh_from_db()
    foreign.refresh_from_db()
    assert own.critical and not foreign.critical

    client_a.post(url, {**selection, "action": "add_tag", "tag": "  Onboarding "})
    assert list(own.tags.values_list("name", flat=True)) == ["onboarding"]
    assert not foreign.tags.exists()
    assert Tag.objects.get(name="onboarding").tenant == tenant_a

    client_a.post(url, {**selection, "action": "remove_tag", "tag": "onboarding"})
    assert not own.tags.exists()

    client_a.post(url, {**selection, "action": "unmark_critical"})
    own.refresh_from_db()
    assert not own.critical

    client_a.post(url, {**selection, "action": "retire"})
    own.refresh_from_db()
    foreign.refresh_from_db()
    assert own.status == Status.RETIRED and foreign.status == Status.ACTIVE
    assert DocumentVersion.objects.get(document=own).status == Status.RETIRED
    assert set(Chunk.objects.filter(document=own).values_list("status", flat=True)) == {Status.RETIRED}
    assert set(Chunk.objects.filter(document=foreign).values_list("status", flat=True)) == {Status.ACTIVE}


def test_add_tag_without_a_name_explains_itself(client_a, documents):
    url = reverse("admin:knowledge_document_changelist")
    response = client_a.post(url, {"_selected_action": [documents["a"].pk], "action": "add_tag"}, follow=True)
    assert "Type a tag name" in response.content.decode()


def test_bulk_actions_on_chunks(client_a, documents):
    chunk = documents["a"].chunks.first()
    url = reverse("admin:knowledge_chunk_changelist")
    client_a.post(url, {"_selected_action": [chunk.pk], "action": "mark_critical"})
    client_a.post(url, {"_selected_action": [chunk.pk], "action": "add_tag", "tag": "faq"})
    chunk.refresh_from_db()
    assert chunk.critical and list(chunk.tags.values_list("name", flat=True)) == ["faq"]
    assert not documents["a"].chunks.exclude(pk=chunk.pk).filter(critical=True).exists()


def test_filters_by_tag_and_critical_narrow_the_list(client_a, tenant_a, documents):
    tagged = make_document(tenant=tenant_a, key="tagged.md")
    tagged.tags.add(Tag.objects.create(tenant=tenant_a, name="pricing"))
    tagged.critical = True
    tagged.save()
    url = reverse("admin:knowledge_document_changelist")
    by_tag = client_a.get(url, {"tag": "pricing"}).context["cl"].result_list
    by_critical = client_a.get(url, {"critical__exact": "1"}).context["cl"].result_list
    assert list(by_tag) == [tagged] and list(by_critical) == [tagged]


def test_the_document_page_shows_its_version_history(client_a, documents):
    response = client_a.get(reverse("admin:knowledge_document_change", args=[documents["a"].pk]))
    page = response.content.decode()
    assert "Document versions" in page
    assert documents["a"].versions.get().content_hash in page


def test_a_key_created_in_the_admin_is_shown_once_and_works(client_a, tenant_a):
    response = client_a.post(
        reverse("admin:tenants_apikey_add"), {"tenant": tenant_a.pk, "name": "dify", "scope": "read"}, follow=True
    )
    shown = [str(m) for m in response.context["messages"] if "shown only now" in str(m)]
    assert len(shown) == 1
    raw_key = shown[0].rsplit(" ", 1)[-1]
    assert api_key_authenticate(raw_key).tenant == tenant_a and api_key_authenticate(raw_key).scope == "read"
    again = client_a.get(reverse("admin:tenants_apikey_change", args=[ApiKey.objects.get(name="dify").pk]))
    assert raw_key not in again.content.decode()


def test_a_tenant_admin_adds_a_source_with_a_normalised_id(client_a, tenant_a):
    data = {
        "tenant": tenant_a.pk,
        "kind": "external",
        "label": "Wiki Pages",
        "default_mode": "auto",
        "ocr_languages": "spa+eng",
    }
    client_a.post(reverse("admin:knowledge_source_add"), data)
    assert Source.objects.for_tenant(tenant_a).get(kind="external").source_id == "src:acme:external:wiki-pages"


def test_a_source_name_the_id_scheme_refuses_is_a_form_error_not_a_crash(client_a, tenant_a):
    data = {"tenant": tenant_a.pk, "kind": "folder", "label": "   ", "default_mode": "auto", "ocr_languages": "spa+eng"}
    response = client_a.post(reverse("admin:knowledge_source_add"), data)
    assert response.status_code == 200
    assert not Source.objects.for_tenant(tenant_a).filter(kind="folder").exists()


def test_a_duplicate_source_name_is_a_form_error(client_a, tenant_a):
    data = {
        "tenant": tenant_a.pk,
        "kind": "external",
        "label": "Wiki",
        "default_mode": "auto",
        "ocr_languages": "spa+eng",
    }
    client_a.post(reverse("admin:knowledge_source_add"), data)
    response = client_a.post(reverse("admin:knowledge_source_add"), {**data, "label": " wiki "})
    assert response.status_code == 200 and "already exists" in response.content.decode()
    assert Source.objects.for_tenant(tenant_a).filter(kind="external").count() == 1


def test_ingestion_jobs_are_visible_read_only_and_tenant_scoped(client_a, tenant_a, tenant_b):
    from knowledge.models import IngestJob

    own = IngestJob.objects.create(tenant=tenant_a, kind="upload", state="succeeded")
    foreign = IngestJob.objects.create(tenant=tenant_b, kind="upload", state="failed")
    listing = client_a.get(reverse("admin:knowledge_ingestjob_changelist"))
    assert list(listing.context["cl"].result_list) == [own]
    assert client_a.get(reverse("admin:knowledge_ingestjob_change", args=[own.pk])).status_code == 200
    assert client_a.get(reverse("admin:knowledge_ingestjob_change", args=[foreign.pk])).status_code == 302


def test_a_tenant_admin_can_enrol_only_people_already_in_their_tenants(client_a, tenant_a, tenant_b, admin_a):
    """Issue 10 #8: a raw user id let a tenant admin see any account's username and pull anyone in."""
    from tests.factories import make_user

    colleague = make_member(tenant_a, username="colleague")
    stranger = make_user(username="stranger-globex-cfo")
    add_page = client_a.get(reverse("admin:tenants_membership_add")).content.decode()
    assert "colleague" in add_page and "stranger-globex-cfo" not in add_page
    response = client_a.post(reverse("admin:tenants_membership_add"),
                             {"tenant": tenant_a.pk, "user": stranger.pk, "role": "admin"})  # fmt: skip
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not Membership.objects.filter(user=stranger).exists()

    membership = Membership.objects.get(user=colleague)
    response = client_a.post(reverse("admin:tenants_membership_change", args=[membership.pk]),
                             {"tenant": tenant_a.pk, "user": colleague.pk, "role": "admin"})  # fmt: skip
    assert response.status_code == 302
    colleague.refresh_from_db()
    assert Membership.objects.get(user=colleague).role == "admin" and colleague.is_staff  # can now reach /admin/


def test_operators_enrol_new_people_with_add_member(tenant_a):
    from django.core.management import CommandError, call_command

    from tests.factories import make_user

    user = make_user(username="newhire")
    call_command("add_member", tenant_a.slug, "newhire", "--role", "staff")
    assert Membership.objects.get(user=user, tenant=tenant_a).role == "staff"
    with pytest.raises(CommandError, match="No user"):
        call_command("add_member", tenant_a.slug, "nobody")
    with pytest.raises(CommandError, match="No tenant"):
        call_command("add_member", "no-such-tenant", "newhire")


def test_a_key_made_in_the_admin_acts_for_checked_principals(client_a, tenant_a):
    from tenants.services import group_create

    url = reverse("admin:tenants_apikey_add")
    refused = client_a.post(url, {"tenant": tenant_a.pk, "name": "bad", "scope": "read", "acts_for": '["group:ghost"]'})
    assert refused.status_code == 200 and "&#x27;ghost&#x27;" in refused.content.decode()  # a form error, named
    assert not ApiKey.objects.filter(name="bad").exists()
    group_create(tenant=tenant_a, name="hr")
    client_a.post(url, {"tenant": tenant_a.pk, "name": "hr-bot", "scope": "read", "acts_for": '["group:hr"]'})
    assert ApiKey.objects.get(name="hr-bot").acts_for == ["group:hr"]
    listing = client_a.get(reverse("admin:tenants_apikey_changelist")).content.decode()
    assert "group:hr" in listing
