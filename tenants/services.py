"""Flows that create or change tenants, memberships and API keys."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from tenants.models import ApiKey, Group, Invitation, Membership, MembershipEvent, Tenant
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
class Invited:
    """What an invitation did: added an existing account at once, or sent an invitation by e-mail."""

    membership: Membership | None = None
    invitation: Invitation | None = None


def _record(tenant: Tenant, actor: User | None, member: User | str, action: str, role: str = "",
            detail: str = "") -> None:  # fmt: skip
    username = member if isinstance(member, str) else member.get_username()
    MembershipEvent.objects.create(tenant=tenant, actor=actor, username=username, action=action, role=role,
                                   detail=detail[:300])  # fmt: skip


def member_invite(*, tenant: Tenant, actor: User | None, who: str, role: str = Membership.Role.STAFF,
                  base_url: str = "") -> Invited:  # fmt: skip
    """Add a person by username or e-mail with a role (the same rules as `manage.py add_member`).

    An existing account joins at once (and is told by e-mail when it has an address). An e-mail address with no
    account gets an invitation by e-mail: its link (valid RAG_INVITATION_DAYS) creates the account and the membership.
    `base_url` is the site's address the link starts with (the request's)."""
    who = who.strip()
    if not who:
        raise MembershipRefused("Give a username or an e-mail address.")
    if role not in Membership.Role.values:
        raise MembershipRefused(f"Unknown role {role!r}; use one of {', '.join(Membership.Role.values)}.")
    user = User.objects.filter(username__iexact=who).first() or (
        User.objects.filter(email__iexact=who).order_by("pk").first() if "@" in who else None
    )
    if user is None:
        if "@" not in who:
            raise MembershipRefused(f"No account is named {who!r}: invite them by e-mail address instead.")
        return Invited(invitation=invitation_send(tenant=tenant, actor=actor, email=who, role=role, base_url=base_url))
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        raise MembershipRefused(f"{user.get_username()} is already a member; change the role in the list.")
    if actor is not None and not actor.is_superuser and not _shares_a_workspace(actor, user):
        # As in the Django admin: a tenant admin enrols only people already in one of the tenants they administer;
        # other accounts are the operator's to enrol (no tenant's admin learns about another tenant's people).
        raise MembershipRefused(f"{who!r} cannot be invited from here: ask an operator to add the account "
                                f"(manage.py add_member {tenant.slug} <username>).")  # fmt: skip
    membership = membership_add(tenant=tenant, user=user, role=role)
    _record(tenant, actor, user, MembershipEvent.Action.ADDED, role)
    if user.email and base_url:
        _mail(user.email, "tenants/email/added", {"tenant": tenant, "role": membership.get_role_display(),
              "actor": actor, "link": base_url.rstrip("/") + reverse("home")})  # fmt: skip
    return Invited(membership=membership)


# --- invitations by e-mail --------------------------------------------------------------------------------------
def _mail(to: str, template: str, context: dict) -> None:
    """One message from DEFAULT_FROM_EMAIL, its subject and body from templates/<template>_subject.txt and .txt."""
    subject = " ".join(render_to_string(f"{template}_subject.txt", context).split())
    send_mail(subject, render_to_string(f"{template}.txt", context), None, [to])


def _new_token() -> tuple[str, str]:
    token = secrets.token_urlsafe(32)
    return token, _hash_key(token)


def invitation_send(*, tenant: Tenant, actor: User | None, email: str, role: str, base_url: str) -> Invitation:
    """Invite an address with no account yet; refused when a pending invitation to it exists (send that one again)."""
    email = email.strip()
    try:
        validate_email(email)
    except ValidationError as exc:
        raise MembershipRefused(f"{email!r} is not an e-mail address.") from exc
    pending = Invitation.objects.for_tenant(tenant).filter(
        email__iexact=email, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    )
    if pending.exists():
        raise MembershipRefused(f"{email} is invited already; send the invitation again from the list.")
    token, token_hash = _new_token()
    invitation = Invitation.objects.create(tenant=tenant, email=email, role=role, token_hash=token_hash,
                                           created_by=actor, expires_at=_invitation_expiry())  # fmt: skip
    _invitation_mail(invitation, token, actor, base_url)
    _record(tenant, actor, email, MembershipEvent.Action.INVITATION_SENT, role,
            f"expires {invitation.expires_at:%Y-%m-%d %H:%M} UTC")  # fmt: skip
    return invitation


def _invitation_expiry() -> datetime:
    return timezone.now() + timedelta(days=settings.RAG_INVITATION_DAYS)


def _invitation_mail(invitation: Invitation, token: str, actor: User | None, base_url: str) -> None:
    link = base_url.rstrip("/") + reverse("workspace:invitation-accept", kwargs={"token": token})
    _mail(invitation.email, "tenants/email/invitation", {"tenant": invitation.tenant, "invitation": invitation,
          "role": invitation.get_role_display(), "actor": actor, "link": link})  # fmt: skip


def invitation_resend(*, tenant: Tenant, actor: User | None, invitation: Invitation, base_url: str) -> Invitation:
    """A new link (the old one stops working) and a new expiry; not for an accepted or revoked invitation."""
    if invitation.tenant_id != tenant.pk:
        raise MembershipRefused("Not an invitation of this tenant.")
    if invitation.state in ("accepted", "revoked"):
        raise MembershipRefused(f"This invitation was {invitation.state}; invite {invitation.email} again instead.")
    token, invitation.token_hash = _new_token()
    invitation.expires_at, invitation.sent_at = _invitation_expiry(), timezone.now()
    invitation.sent_count += 1
    invitation.save(update_fields=["token_hash", "expires_at", "sent_at", "sent_count"])
    _invitation_mail(invitation, token, actor, base_url)
    _record(tenant, actor, invitation.email, MembershipEvent.Action.INVITATION_RESENT, invitation.role,
            f"expires {invitation.expires_at:%Y-%m-%d %H:%M} UTC")  # fmt: skip
    return invitation


def invitation_revoke(*, tenant: Tenant, actor: User | None, invitation: Invitation) -> None:
    if invitation.tenant_id != tenant.pk:
        raise MembershipRefused("Not an invitation of this tenant.")
    if invitation.state == "accepted":
        raise MembershipRefused(f"{invitation.email} accepted already; remove the member instead.")
    if invitation.revoked_at is None:
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        _record(tenant, actor, invitation.email, MembershipEvent.Action.INVITATION_REVOKED, invitation.role)


def invitation_for_token(token: str) -> Invitation | None:
    """The invitation a link names, whatever its state (the page says why a link no longer works)."""
    if not token or len(token) > 100:
        return None
    return Invitation.objects.select_related("tenant").filter(token_hash=_hash_key(token)).first()  # unscoped: the
    # token names its tenant, as an API key does


def invitation_accept(*, invitation: Invitation, username: str, password: str) -> User:
    """Create the invited account with this username and password, and its membership (ValidationError: why not)."""
    if invitation.state != "pending":
        raise ValidationError(f"This invitation was {invitation.state}.")
    username = username.strip()
    if not USERNAME_RE.match(username):
        raise ValidationError("Use up to 150 letters, digits and . + - _ for the username.")
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError(f"The username {username!r} is taken; choose another.")
    if User.objects.filter(email__iexact=invitation.email).exists():
        raise ValidationError(f"An account with {invitation.email} exists now: sign in, and ask to be added.")
    user = User(username=username, email=invitation.email)
    validate_password(password, user)
    with transaction.atomic():
        if not Invitation.objects.filter(pk=invitation.pk, accepted_at__isnull=True).update(accepted_at=timezone.now()):
            raise ValidationError("This invitation was accepted already.")
        user.set_password(password)
        user.save()
        Invitation.objects.filter(pk=invitation.pk).update(accepted_by=user)
        membership_add(tenant=invitation.tenant, user=user, role=invitation.role)
        _record(invitation.tenant, user, user, MembershipEvent.Action.INVITATION_ACCEPTED, invitation.role,
                invitation.email)  # fmt: skip
    return user


# --- operators ----------------------------------------------------------------------------------------------------
def operator_join(*, tenant: Tenant, operator: User) -> Membership:
    """An operator (superuser) joins a workspace as its admin: explicit and in its audit log, never implied."""
    if not operator.is_superuser:
        raise MembershipRefused("Only an operator joins a workspace this way.")
    existing = Membership.objects.for_tenant(tenant).filter(user=operator).first()
    if existing is not None and existing.is_admin:
        return existing
    membership = membership_add(tenant=tenant, user=operator, role=Membership.Role.ADMIN)
    _record(tenant, operator, operator, MembershipEvent.Action.OPERATOR_JOINED, Membership.Role.ADMIN)
    return membership


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
    acts_for: list[str] | None = None, expires_at: datetime | None = None, by_key: ApiKey | None = None,
) -> tuple[ApiKey, str]:  # fmt: skip
    """Create a key and return it with its clear text, which is never stored or shown again. `acts_for`:
    ["tenant"] (default), principals, or ["all"], which only a tenant admin (or an operator's command) issues.
    Recorded in the tenant's audit log (`by_key`: the API key that asked for it, through the REST API)."""
    if scope not in ApiKey.Scope.values:
        raise ValueError(f"Unknown key scope {scope!r}: {', '.join(ApiKey.Scope.values)}.")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("The expiry is in the past; give a later date or none.")
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
        expires_at=expires_at,
    )
    _record(tenant, created_by, _key_label(api_key), MembershipEvent.Action.KEY_CREATED, "",
            _key_detail(api_key, by_key))  # fmt: skip
    return api_key, raw_key


def _key_label(api_key: ApiKey) -> str:
    return f"{api_key.prefix}… {api_key.name}".strip()


def _key_detail(api_key: ApiKey, by_key: ApiKey | None) -> str:
    expiry = f", expires {api_key.expires_at:%Y-%m-%d}" if api_key.expires_at else ""
    by = f"; by API key {by_key.prefix}…" if by_key is not None else ""
    return f"scope {api_key.scope}, acts for {', '.join(api_key.acts_for or [TENANT])}{expiry}{by}"


def api_key_revoke(*, tenant: Tenant, api_key: ApiKey, actor: User | None, by_key: ApiKey | None = None) -> bool:
    """Revoke a key of this tenant (it fails from the next request on); False when it was revoked already."""
    if api_key.tenant_id != tenant.pk:
        raise PermissionError("Keys of another tenant cannot be revoked here.")
    if api_key.revoked_at is not None:
        return False
    api_key.revoke()
    _record(tenant, actor, _key_label(api_key), MembershipEvent.Action.KEY_REVOKED, "", _key_detail(api_key, by_key))
    return True


def api_key_authenticate(raw_key: str) -> ApiKey | None:
    """Return the active key matching raw_key (with its tenant), or None."""
    if not raw_key or not raw_key.startswith(API_KEY_PREFIX) or len(raw_key) > 200:
        return None
    api_key = (
        ApiKey.objects.select_related("tenant")  # unscoped: the key itself names its tenant
        .filter(key_hash=_hash_key(raw_key), revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
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


def group_delete(*, tenant: Tenant, actor: User | None, group: Group) -> int:
    """Delete a group (audited). Its principal leaves every key's acts-for list and, through principal_removed,
    every access list of the tenant's sources and documents: a group created later under the same name opens
    nothing the old one did (a list left empty admits admins only). Returns how many lists and keys changed."""
    if group.tenant_id != tenant.pk:
        raise MembershipRefused("Not a group of this tenant.")
    principal = f"group:{group.name}"
    with transaction.atomic():
        changed = principal_gone(tenant=tenant, principal=principal, sender=Group)
        MembershipEvent.objects.create(tenant=tenant, actor=actor, username="", group=group.name,
                                       action=MembershipEvent.Action.GROUP_DELETED,
                                       detail=f"removed from {changed} access lists and keys")  # fmt: skip
        group.delete()
    return changed


def principal_gone(*, tenant: Tenant, principal: str, sender: type) -> int:
    """A group or a person is gone: its principal leaves every key's acts-for list and, through principal_removed,
    every access list of the tenant's sources and documents. Returns how many lists and keys changed."""
    from tenants.signals import principal_removed

    changed = 0
    for key in ApiKey.objects.for_tenant(tenant).select_for_update():
        if principal in (key.acts_for or []):
            key.acts_for = [p for p in key.acts_for if p != principal]
            key.save(update_fields=["acts_for"])  # left empty, it holds `tenant` alone, as every key does
            changed += 1
    for _receiver, count in principal_removed.send(sender=sender, tenant=tenant, principal=principal):
        changed += int(count or 0)
    return changed


def user_forget(user: User) -> int:
    """A person's account is being deleted: `user:<name>` leaves every list and key of every tenant it can stand in,
    so a person created later under the same username inherits nothing (and no key acting for the old one reads as
    them). A list or key names a user only while the user is a member (principals_check), so the tenants to visit are
    those the user belongs to or ever left (the audit log keeps the name), not every tenant of the server."""
    name = user.get_username()
    principal = f"user:{name}"
    member_of = Membership.objects.filter(user=user).values_list("tenant_id", flat=True)
    left = MembershipEvent.objects.filter(username=name).values_list("tenant_id", flat=True)
    changed = 0
    with transaction.atomic():
        for tenant in Tenant.objects.filter(Q(pk__in=member_of) | Q(pk__in=left)):
            count = principal_gone(tenant=tenant, principal=principal, sender=type(user))
            if count:
                MembershipEvent.objects.create(
                    tenant=tenant,
                    actor=None,
                    username=user.get_username(),
                    action=MembershipEvent.Action.REMOVED,
                    detail=f"account deleted: removed from {count} access lists and keys",
                )
            changed += count
    return changed


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


@dataclass
class Deprovisioned:
    """What a deprovisioning ended: the membership (its role), the groups left, the keys revoked, what the apps
    ended (agent sessions), and whether the account was switched off (no membership left anywhere)."""

    role: str
    groups: int
    keys: int
    ended: int
    account_off: bool


def member_deprovision(*, tenant: Tenant, user: User, by: str) -> Deprovisioned:
    """The company's directory says this person is gone (SCIM `active: false` or DELETE): at once, their membership
    and groups go; their own keys and every key acting for `user:<them>` are revoked (a key acting for a leaver reads
    nothing, not even what the whole tenant may); their agent sessions end (tenants.signals.member_deprovisioned); and,
    when they belong to no other tenant, their account is switched off, which ends every browser session at its next
    request (Django reads the user again each request) and refuses any sign-in. Audited, with `by` (the provider).
    The last admin is not protected: the directory decides who works here."""
    from tenants.signals import member_deprovisioned

    name = user.get_username()
    with transaction.atomic():
        membership = Membership.objects.for_tenant(tenant).filter(user=user).first()
        role = membership.role if membership is not None else ""
        if membership is not None:
            membership.delete()
        groups = list(Group.objects.for_tenant(tenant).filter(members=user))
        for group in groups:
            group.members.remove(user)
        keys = [k for k in ApiKey.objects.for_tenant(tenant).select_for_update().filter(revoked_at__isnull=True)
                if k.created_by_id == user.pk or f"user:{name}" in (k.acts_for or [])]  # fmt: skip
        for key in keys:
            key.revoke()
        ended = sum(int(count or 0) for _receiver, count in member_deprovisioned.send(
            sender=Membership, tenant=tenant, user=user, keys=keys))  # fmt: skip
        account_off = user.is_active and not Membership.objects.filter(user=user).exists() and not user.is_superuser
        if account_off:
            user.is_active = False
            user.save(update_fields=["is_active"])
        MembershipEvent.objects.create(
            tenant=tenant, actor=None, username=name, action=MembershipEvent.Action.DEPROVISIONED, role=role,
            detail=(f"by {by}: left {len(groups)} groups, {len(keys)} keys revoked, {ended} agent sessions ended"
                    + (", account switched off" if account_off else ""))[:300],
        )  # fmt: skip
    return Deprovisioned(role, len(groups), len(keys), ended, account_off)


def member_provision(*, tenant: Tenant, user: User, by: str, role: str = Membership.Role.STAFF) -> Membership:
    """The directory says this person works here (again): their account is switched on and they are a member with
    `role`; groups come from the directory too (group_member_add). Audited, with `by`."""
    with transaction.atomic():
        if not user.is_active:
            user.is_active = True
            user.save(update_fields=["is_active"])
        membership, made = Membership.objects.get_or_create(tenant=tenant, user=user, defaults={"role": role})
        if made:
            MembershipEvent.objects.create(tenant=tenant, actor=None, username=user.get_username(), role=role,
                                           action=MembershipEvent.Action.PROVISIONED, detail=f"by {by}")  # fmt: skip
    return membership
