"""Membership from the provider (issue 63): what any provider says of a person (OpenID Connect, SAML, a directory)
goes through one rule, identity.people.admit — found by the provider's stable subject, never by e-mail or name;
role from groups; managed groups brought up to date at every sign-in; refused plainly with nothing created."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from identity import people
from identity.models import Provider, ProviderLink, ScimUser
from tenants.models import Group, Membership, MembershipEvent
from tenants.services import api_key_issue, group_create, group_member_add
from tests.factories import make_member

User = get_user_model()


@pytest.fixture
def provider(tenant_a) -> Provider:  # type: ignore[no-untyped-def]
    return Provider.objects.create(
        tenant=tenant_a,
        name="Okta",
        slug="okta",
        issuer="https://idp.example",
        client_id="c",
        role_map={"ragsite-admins": "admin"},
        group_map={"Engineering": "eng"},
        allowed_domains="acme.example",
    )


def _person(subject: str = "00u1", username: str = "alice", groups: list[str] | None = None, **extra) -> people.Person:  # type: ignore[no-untyped-def]
    fields = {"email": f"{username}@acme.example", "email_verified": True, **extra}
    return people.Person(subject=subject, username=username, groups=groups or [], **fields)


def test_groups_and_role_follow_the_provider_at_every_sign_in_and_hand_made_groups_stay(provider, tenant_a):
    hr = group_create(tenant=tenant_a, name="hr")  # made by hand, joined by hand: the provider never touches it
    group_create(tenant=tenant_a, name="legal")  # a provider group of the same name joins it
    alice = people.admit(provider, _person(groups=["Engineering", "ragsite-admins", "legal"]))
    group_member_add(tenant=tenant_a, actor=None, group=hr, user=alice)
    assert Membership.objects.get(tenant=tenant_a, user=alice).role == "admin"
    assert set(Group.objects.filter(members=alice).values_list("name", flat=True)) == {"eng", "legal", "hr"}

    again = people.admit(provider, _person(groups=["legal"]))  # moved out of engineering and of the admins
    assert again.pk == alice.pk
    assert Membership.objects.get(tenant=tenant_a, user=alice).role == "staff"
    assert set(Group.objects.filter(members=alice).values_list("name", flat=True)) == {"legal", "hr"}
    assert MembershipEvent.objects.filter(username="alice", action="group_left", group="eng").exists()


def test_a_person_is_found_by_subject_never_by_email_or_name(provider, tenant_a):
    alice = people.admit(provider, _person())
    renamed = people.admit(provider, _person(username="alice.liddell"))  # the provider renamed her: same person
    assert renamed.pk == alice.pk
    # Another subject naming the same username is someone else: refused, nothing created or linked.
    with pytest.raises(people.Refused, match="already exists"):
        people.admit(provider, _person(subject="00u-impostor"))
    assert ProviderLink.objects.filter(provider=provider).count() == 1
    # An account made by hand under a name the provider sends is never taken over.
    make_member(tenant_a, username="bob")
    with pytest.raises(people.Refused, match="already exists"):
        people.admit(provider, _person(subject="00u-bob", username="bob"))


def test_a_username_used_again_after_the_account_was_deleted_inherits_nothing(provider, tenant_a):
    alice = people.admit(provider, _person(groups=["Engineering"]))
    key, _raw = api_key_issue(tenant=tenant_a, name="alice's bot", acts_for=["user:alice"])
    alice.delete()
    key.refresh_from_db()
    assert "user:alice" not in (key.acts_for or [])
    newcomer = people.admit(provider, _person(subject="00u-new-alice"))
    assert newcomer.pk != alice.pk and not Group.objects.filter(members=newcomer).exists()


@pytest.mark.parametrize(
    "person, said",
    [
        (_person(username="eve", email="eve@evil.example"), "domain"),
        (_person(email_verified=False), "not verified"),
        (_person(subject=""), "no subject"),
        (_person(username="bad name!"), "no usable username"),
    ],
)
def test_a_person_the_tenant_does_not_admit_is_refused_and_nothing_is_created(provider, tenant_a, person, said):
    users = User.objects.count()
    with pytest.raises(people.Refused, match=said):
        people.admit(provider, person)
    assert User.objects.count() == users and not Membership.objects.filter(tenant=tenant_a).exists()
    assert MembershipEvent.objects.filter(tenant=tenant_a, action="sign_in_refused").count() == 1


def test_no_role_without_a_mapped_group_when_the_provider_has_no_default(provider, tenant_a):
    provider.default_role = ""
    provider.save()
    with pytest.raises(people.Refused, match="role"):
        people.admit(provider, _person(groups=["Engineering"]))
    assert people.admit(provider, _person(groups=["ragsite-admins"])).get_username() == "alice"


def test_someone_the_directory_deactivated_cannot_sign_in_through_another_door(provider, tenant_a):
    alice = people.admit(provider, _person())
    ScimUser.objects.create(tenant=tenant_a, user=alice, user_name="alice", active=False)
    with pytest.raises(people.Refused, match="deactivated"):
        people.admit(provider, _person())
