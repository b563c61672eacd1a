"""Flows that create or change tenants, memberships and API keys."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from tenants.models import ApiKey, Group, Membership, MembershipEvent, Tenant
from tenants.principals import ALL, TENANT, UnknownPrincipal, principals_check, viewer_for

USERNAME_RE = re.compile(r"^[\w.+-]{1,150}$")

API_KEY_PREFIX = "rag_"
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def tenant_create(*, slug: str, name: str = "") -> Tenant:
    tenant = Tenant(slug=slug.strip(), name=(name or slug).strip())
    tenant.full_clean()
    tenant.save()
    return tenant


def membership_add(*, tenant: Tenant, user: User, role: str = Membership.Role.STAFF) -> Membership:
    if role not in Membership.Role.values:
        raise ValidationError(f"Unknown role {role!r}; use one of {', '.join(Membership.Role.values)}.")
    membership, _ = Membership.objects.update_or_create(tenant=tenant, user=user, defaults={"role": role})
    if role == Membership.Role.ADMIN and not user.is_staff:
        # Tenant admins curate through the Django admin, which only lets staff users in.
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    return membership


class MembershipRefused(ValueError):
    """A membership change that the rules refuse (the message says which rule)."""


@dataclass(kw_only=True)
class Invitation:
    membership: Membership
    set_password_path: str = ""  # for an account created by the invitation: the one-time link to set a password


def _record(tenant: Tenant, actor: User | None, member: User, action: str, role: str = "") -> None:
    MembershipEvent.objects.create(tenant=tenant, actor=actor, username=member.get_username(), action=action,
                                   role=role)  # fmt: skip


def member_invite(*, tenant: Tenant, actor: User | None, who: str, role: str = Membership.Role.STAFF) -> Invitation:
    """Add a person by username or e-mail with a role (the same rules as `manage.py add_member`). Someone with no
    account yet gets one without a password and a one-time link that sets it (the inviter passes it on)."""
    who = who.strip()
    if not who:
        raise MembershipRefused("Give a username or an e-mail address.")
    if role not in Membership.Role.values:
        raise MembershipRefused(f"Unknown role {role!r}; use one of {', '.join(Membership.Role.values)}.")
    user = User.objects.filter(username__iexact=who).first() or (
        User.objects.filter(email__iexact=who).order_by("pk").first() if "@" in who else None
    )
    path = ""
    if user is None:
        username = who.split("@")[0] if "@" in who else who
        if not USERNAME_RE.match(username) or User.objects.filter(username__iexact=username).exists():
            raise MembershipRefused(f"No account is named {who!r}, and {username!r} cannot be a new username.")
        user = User(username=username, email=who if "@" in who else "")
        user.set_unusable_password()
        user.save()
        uidb64, token = urlsafe_base64_encode(force_bytes(user.pk)), default_token_generator.make_token(user)
        path = reverse("password_reset_confirm", kwargs={"uidb64": uidb64, "token": token})
    elif Membership.objects.filter(tenant=tenant, user=user).exists():
        raise MembershipRefused(f"{user.get_username()} is already a member; change the role in the list.")
    elif actor is not None and not actor.is_superuser and not _shares_a_workspace(actor, user):
        # As in the Django admin: a tenant admin enrols only people already in one of the tenants they administer;
        # other accounts are the operator's to enrol (no tenant's admin learns about another tenant's people).
        raise MembershipRefused(f"{who!r} cannot be invited from here: ask an operator to add the account "
                                f"(manage.py add_member {tenant.slug} <username>).")  # fmt: skip
    membership = membership_add(tenant=tenant, user=user, role=role)
    _record(tenant, actor, user, MembershipEvent.Action.INVITED if path else MembershipEvent.Action.ADDED, role)
    return Invitation(membership=membership, set_password_path=path)


def _shares_a_workspace(actor: User, user: User) -> bool:
    administered = Membership.objects.filter(user=actor, role=Membership.Role.ADMIN).values("tenant_id")
    return Membership.objects.filter(user=user, tenant_id__in=administered).exists()


def member_set_role(*, tenant: Tenant, actor: User | None, membership: Membership, role: str) -> Membership:
    if membership.tenant_id != tenant.pk:
        raise MembershipRefused("Not a member of this tenant.")
    if role not in Membership.Role.values:
        raise MembershipRefused(f"Unknown role {role!r}; use one of {', '.join(Membership.Role.values)}.")
    if membership.role == role:
        return membership
    if membership.is_admin and _last_admin(tenant, membership):
        raise MembershipRefused("This is the tenant's last admin: make someone else admin first.")
    membership = membership_add(tenant=tenant, user=membership.user, role=role)
    _record(tenant, actor, membership.user, MembershipEvent.Action.ROLE_CHANGED, role)
    return membership


def member_remove(*, tenant: Tenant, actor: User | None, membership: Membership) -> None:
    if membership.tenant_id != tenant.pk:
        raise MembershipRefused("Not a member of this tenant.")
    if membership.is_admin and _last_admin(tenant, membership):
        raise MembershipRefused("This is the tenant's last admin: make someone else admin first.")
    membership.delete()
    for group in Group.objects.for_tenant(tenant).filter(members=membership.user):
        group.members.remove(membership.user)  # a later invitation starts with no groups
    _record(tenant, actor, membership.user, MembershipEvent.Action.REMOVED, membership.role)


def _last_admin(tenant: Tenant, membership: Membership) -> bool:
    admins = Membership.objects.for_tenant(tenant).filter(role=Membership.Role.ADMIN)
    return not admins.exclude(pk=membership.pk).exists()


def _hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def api_key_issue(
    *, tenant: Tenant, name: str = "", created_by: User | None = None, scope: str = ApiKey.Scope.WRITE,
    acts_for: list[str] | None = None,
) -> tuple[ApiKey, str]:  # fmt: skip
    """Create a key and return it with its clear text, which is never stored or shown again. `acts_for`:
    ["tenant"] (default), principals, or ["all"], which only a tenant admin (or an operator's command) issues."""
    if scope not in ApiKey.Scope.values:
        raise ValueError(f"Unknown key scope {scope!r}: {', '.join(ApiKey.Scope.values)}.")
    acts_for = principals_check(tenant=tenant, principals=acts_for or [TENANT], allow_all=True)
    issuer = Membership.objects.for_tenant(tenant).filter(user=created_by).first() if created_by else None
    if created_by is not None and not created_by.is_superuser and not (issuer and issuer.is_admin):
        if ALL in acts_for:
            raise UnknownPrincipal("Only a tenant admin can issue a key that acts for all.")
        # Anyone else issues a key that sees no more than they do.
        theirs = viewer_for(tenant=tenant, membership=issuer).principals if issuer else frozenset({TENANT})
        beyond = [p for p in acts_for if p != TENANT and p not in (theirs or ())]
        if beyond:
            raise UnknownPrincipal(f"A key you issue sees no more than you do: not {', '.join(beyond)}.")
    raw_key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=raw_key[: len(API_KEY_PREFIX) + 8],
        key_hash=_hash_key(raw_key),
        created_by=created_by,
        scope=scope,
        acts_for=acts_for,
    )
    return api_key, raw_key


def api_key_authenticate(raw_key: str) -> ApiKey | None:
    """Return the active key matching raw_key (with its tenant), or None."""
    if not raw_key or not raw_key.startswith(API_KEY_PREFIX) or len(raw_key) > 200:
        return None
    api_key = (
        ApiKey.objects.select_related("tenant")  # unscoped: the key itself names its tenant
        .filter(key_hash=_hash_key(raw_key), revoked_at__isnull=True)
        .first()
    )
    if api_key is None:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > _LAST_USED_RESOLUTION:
        # Written at most once a minute per key so busy agents do not turn reads into writes.
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


# --- groups ---------------------------------------------------------------------------------------------------
def group_create(*, tenant: Tenant, name: str) -> Group:
    """A new group of the tenant (its name lowercased); ValidationError for a bad or taken name."""
    group = Group(tenant=tenant, name=name.strip().lower())
    group.full_clean(exclude=["tenant"])
    if Group.objects.for_tenant(tenant).filter(name=group.name).exists():
        raise ValidationError(f"Tenant {tenant.slug} already has a group {group.name!r}.")
    group.save()
    return group


def group_get(*, tenant: Tenant, name: str) -> Group | None:
    return Group.objects.for_tenant(tenant).filter(name=name.strip().lower()).first()


def group_member_add(*, tenant: Tenant, actor: User | None, group: Group, user: User) -> None:
    """Add a member of the tenant to one of its groups (audited); anyone else is refused."""
    if group.tenant_id != tenant.pk:
        raise MembershipRefused("Not a group of this tenant.")
    if not Membership.objects.for_tenant(tenant).filter(user=user).exists():
        raise MembershipRefused(f"{user.get_username()} is not a member of {tenant.slug}: invite them first.")
    if not group.members.filter(pk=user.pk).exists():
        group.members.add(user)
        MembershipEvent.objects.create(tenant=tenant, actor=actor, username=user.get_username(),
                                       action=MembershipEvent.Action.GROUP_JOINED, group=group.name)  # fmt: skip


def group_member_remove(*, tenant: Tenant, actor: User | None, group: Group, user: User) -> None:
    if group.tenant_id != tenant.pk:
        raise MembershipRefused("Not a group of this tenant.")
    if group.members.filter(pk=user.pk).exists():
        group.members.remove(user)
        MembershipEvent.objects.create(tenant=tenant, actor=actor, username=user.get_username(),
                                       action=MembershipEvent.Action.GROUP_LEFT, group=group.name)  # fmt: skip
