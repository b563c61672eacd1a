"""One rule for whoever a provider sends (an OpenID Connect or SAML sign-in, an LDAP directory's entry): the person
is found by the link of the provider's stable subject, or made just in time; their role comes from their groups;
the groups the provider manages are brought up to date; and everything that refuses them says why plainly and
creates nothing. Membership itself changes through tenants/services.py, like every other path into a tenant."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.contrib.auth.models import User as Account
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from identity.models import ManagedGroup, Provider, ProviderLink, ScimUser
from identity.scim import group_name_of
from tenants import services as tenant_services
from tenants.models import Group, Membership, MembershipEvent

RANK: dict[str, int] = {Membership.Role.STAFF.value: 1, Membership.Role.ADMIN.value: 2}
USERNAME_RE = re.compile(r"[\w.@+-]{1,150}")


@dataclass
class Person:
    """What a provider says of someone: its stable subject, the username and e-mail its claims name, whether it
    verified the e-mail (None: it does not say), and its groups."""

    subject: str
    username: str
    email: str = ""
    email_verified: bool | None = None
    groups: list[str] = field(default_factory=list)
    display_name: str = ""


class Refused(Exception):
    """The provider's person may not join (or sign in to) this tenant; the message says why, for them to read."""


def refused(provider: Provider, username: str, message: str) -> None:
    """A refusal in the tenant's audit log (and so the audit stream), after whatever it refused was rolled back."""
    MembershipEvent.objects.create(
        tenant=provider.tenant,
        actor=None,
        username=username[:150],
        action=MembershipEvent.Action.SIGN_IN_REFUSED,
        detail=f"{provider.kind} {provider.slug}: {message}"[:300],
    )


def role_for(provider: Provider, groups: list[str]) -> str:
    """The highest role the person's groups map to, else the provider's default ("" when none: refused)."""
    wanted = {str(k).strip().lower(): str(v) for k, v in (provider.role_map or {}).items()}
    roles = [wanted[g.lower()] for g in groups if g.lower() in wanted and wanted[g.lower()] in RANK]
    return max(roles, key=lambda r: RANK[r]) if roles else provider.default_role


def domain_allowed(provider: Provider, email: str) -> bool:
    domains = {d.strip().lower().lstrip("@") for d in re.split(r"[,\s]+", provider.allowed_domains or "") if d.strip()}
    return not domains or email.rpartition("@")[2].lower() in domains


def group_names_for(provider: Provider, groups: list[str]) -> set[str]:
    """The tenant groups the person's provider groups name: the explicit map first, else by name (when allowed)."""
    explicit = {str(k).strip().lower(): str(v).strip().lower() for k, v in (provider.group_map or {}).items()}
    names: set[str] = set()
    for group in groups:
        if group.lower() in explicit:
            names.add(explicit[group.lower()])
        elif provider.groups_by_name:
            try:
                names.add(group_name_of(group))
            except Exception:  # a provider group with no usable name (only punctuation) names no group
                continue
    return names


def _managed_groups(provider: Provider, names: set[str]) -> list[Group]:
    """The tenant groups these names make managed by the provider: an explicit map's target is made when missing;
    a group matched by name joins only when it exists (a provider with hundreds of groups makes none by itself)."""
    tenant = provider.tenant
    mapped = {str(v).strip().lower() for v in (provider.group_map or {}).values()}
    groups = []
    for name in sorted(names):
        group = tenant_services.group_get(tenant=tenant, name=name)
        if group is None and name in mapped:
            group = tenant_services.group_create(tenant=tenant, name=name)
        if group is not None:
            ManagedGroup.objects.get_or_create(tenant=tenant, provider=provider, group=group)
            groups.append(group)
    return groups


def groups_sync(provider: Provider, user: Account, groups: list[str]) -> tuple[int, int]:
    """Bring the person's membership of the provider's managed groups up to date. (joined, left)"""
    tenant = provider.tenant
    wanted = {g.pk for g in _managed_groups(provider, group_names_for(provider, groups))}
    managed = Group.objects.for_tenant(tenant).filter(
        pk__in=ManagedGroup.objects.filter(provider=provider).values("group_id")
    )
    joined = left = 0
    for group in managed:
        inside = group.members.filter(pk=user.pk).exists()
        if group.pk in wanted and not inside:
            tenant_services.group_member_add(tenant=tenant, actor=None, group=group, user=user)
            joined += 1
        elif group.pk not in wanted and inside:
            tenant_services.group_member_remove(tenant=tenant, actor=None, group=group, user=user)
            left += 1
    return joined, left


def _account_for(provider: Provider, person: Person) -> tuple[Account, bool]:
    """The account this subject is linked to, or the one to link: a new account under the provider's username, or
    an account the same tenant's SCIM provisioning made under that username (the same directory, another door).
    Any other account of that name is refused: a username is not proof of who someone is."""
    link = ProviderLink.objects.filter(provider=provider, subject=person.subject).select_related("user").first()
    if link is not None:
        return link.user, False
    if not USERNAME_RE.fullmatch(person.username or ""):
        raise Refused(
            _("The provider gave no usable username (claim “%(claim)s”).") % {"claim": provider.username_claim}
        )
    existing = Account.objects.filter(username__iexact=person.username).first()
    if existing is None:
        user = Account.objects.create_user(username=person.username, email=person.email or "")
        user.set_unusable_password()
        user.save(update_fields=["password"])
        return user, True
    provisioned = ScimUser.objects.for_tenant(provider.tenant).filter(user=existing).exists()
    linked_here = ProviderLink.objects.filter(provider=provider, user=existing).exists()
    if not provisioned or linked_here:
        raise Refused(
            _(
                "An account named %(name)s already exists and is not linked to %(provider)s: an admin of this "
                "workspace must remove or rename it first."
            )
            % {"name": person.username, "provider": provider.name}
        )
    return existing, True


def admit(provider: Provider, person: Person, *, record_refusal: bool = True) -> Account:
    """The account `person` signs in as, a member of the provider's tenant with the role and groups the provider
    gives them; or Refused (nothing created, the refusal in the tenant's audit log unless the caller reports it
    itself, as a directory sync does once per run)."""
    try:
        return _admit(provider, person)
    except Refused as refusal:
        if record_refusal:
            refused(provider, person.username, str(refusal))
        raise


def _admit(provider: Provider, person: Person) -> Account:
    tenant = provider.tenant
    if not provider.enabled:
        raise Refused(_("This sign-in is switched off."))
    if not person.subject:
        raise Refused(_("The provider did not say who you are (no subject)."))
    if person.email and person.email_verified is False:
        raise Refused(_("The provider has not verified your e-mail address."))
    if not domain_allowed(provider, person.email):
        raise Refused(_("Your e-mail domain may not join this workspace."))
    role = role_for(provider, person.groups)
    if role not in RANK:
        raise Refused(_("None of your groups gives you a role in this workspace."))
    with transaction.atomic():
        user, new_link = _account_for(provider, person)
        if ScimUser.objects.for_tenant(tenant).filter(user=user, active=False).exists():
            raise Refused(_("Your company's directory has deactivated you in this workspace."))
        if new_link:
            ProviderLink.objects.create(tenant=tenant, provider=provider, subject=person.subject, user=user)
        by = f"{provider.kind} {provider.slug}"
        membership = tenant_services.member_provision(tenant=tenant, user=user, by=by, role=role)
        if membership.role != role:
            Membership.objects.filter(pk=membership.pk).update(role=role)
            MembershipEvent.objects.create(
                tenant=tenant,
                actor=None,
                username=person.username,
                role=role,
                action=MembershipEvent.Action.ROLE_CHANGED,
                detail=f"by {by}",
            )
        groups_sync(provider, user, person.groups)
        if person.email and getattr(user, "email", "") != person.email:
            Account.objects.filter(pk=user.pk).update(email=person.email)
        ProviderLink.objects.filter(provider=provider, subject=person.subject).update(last_seen_at=timezone.now())
    return user


def signed_in(provider: Provider, user: Account) -> None:
    MembershipEvent.objects.create(
        tenant=provider.tenant,
        actor=None,
        username=user.get_username(),
        action=MembershipEvent.Action.SIGNED_IN,
        detail=f"{provider.kind} {provider.slug}",
    )
