"""Tenants, who belongs to them, and the API keys that act for them."""

from __future__ import annotations

import uuid
from typing import Self, TypeVar

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

TENANT_SLUG_VALIDATOR = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    "Use 1-50 lowercase letters, digits or inner hyphens (it becomes part of every id).",
)


# What a browser session was signed in with, in the session under this key: `oidc:<tenant>/<provider>` or
# `saml:<tenant>/<provider>` (set by identity/signin.py before login); absent for a password.
SIGNED_IN_WITH = "ragsite:signed-in-with"


class Tenant(models.Model):
    """A data-separation space: nothing owned by one tenant is visible to another."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(max_length=50, unique=True, validators=[TENANT_SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    # Members sign in through the tenant's identity providers only (identity/): a local password then opens nothing
    # for anyone who belongs here, operators excepted (docs/identity.md).
    sso_required = models.BooleanField(default=False)
    # Chats, answers and their receipts older than this many days are deleted by the worker (None: kept).
    answers_keep_days = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


_M = TypeVar("_M", bound=models.Model)


class TenantQuerySet(models.QuerySet[_M]):
    def for_tenant(self, tenant: Tenant) -> Self:
        return self.filter(tenant=tenant)

    def for_tenants(self, tenants: models.QuerySet[Tenant] | list[Tenant]) -> Self:
        return self.filter(tenant__in=tenants)

    def public_or_404(self, public_id: object) -> _M:
        """The row with this public id, or 404 — for malformed ids too (a query parameter is not trusted)."""
        from django.http import Http404

        try:
            wanted = uuid.UUID(str(public_id))
        except (TypeError, ValueError, AttributeError) as exc:
            raise Http404("No such object.") from exc
        row = self.filter(public_id=wanted).first()
        if row is None:
            raise Http404("No such object.")
        return row


class TenantOwned(models.Model):
    """Base for every tenant-owned row: the tenant is a column, so scoping never needs a join."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    objects = TenantQuerySet.as_manager()

    class Meta:
        abstract = True


class Membership(TenantOwned):
    class Role(models.TextChoices):
        ADMIN = "admin", _("Admin")
        STAFF = "staff", _("Staff")

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.STAFF)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_user")]
        ordering = ["tenant__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"

    @property
    def is_admin(self) -> bool:
        return self.role == self.Role.ADMIN


GROUP_NAME_VALIDATOR = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9_-]{0,48}[a-z0-9])?$",
    "Use 1-50 lowercase letters, digits, inner hyphens or underscores (it becomes the principal group:<name>).",
)


class Group(TenantOwned):
    """A set of a tenant's members (`hr`, `legal`, `board`): the principal `group:<name>` in access lists."""

    name = models.CharField(max_length=50, validators=[GROUP_NAME_VALIDATOR])
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="tenant_groups")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="group_unique_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"group:{self.name}"


class MembershipEvent(TenantOwned):
    """The tenant's audit log: who changed its people or its keys, when (an invitation, a role change, a removal,
    an operator joining, a key created or revoked)."""

    class Action(models.TextChoices):
        INVITED = "invited", _("Invited")
        ADDED = "added", _("Added")
        ROLE_CHANGED = "role_changed", _("Role changed")
        REMOVED = "removed", _("Removed")
        GROUP_JOINED = "group_joined", _("Added to a group")
        GROUP_LEFT = "group_left", _("Removed from a group")
        GROUP_DELETED = "group_deleted", _("Group deleted")
        OPERATOR_JOINED = "operator_joined", _("An operator joined")
        INVITATION_SENT = "invitation_sent", _("Invitation sent")
        INVITATION_RESENT = "invitation_resent", _("Invitation sent again")
        INVITATION_REVOKED = "invitation_revoked", _("Invitation revoked")
        INVITATION_ACCEPTED = "invitation_accepted", _("Invitation accepted")
        KEY_CREATED = "key_created", _("API key created")
        KEY_REVOKED = "key_revoked", _("API key revoked")
        PROVISIONED = "provisioned", _("Provisioned by the directory")
        DEPROVISIONED = "deprovisioned", _("Deprovisioned by the directory")
        SIGNED_IN = "signed_in", _("Signed in through a provider")
        SIGN_IN_REFUSED = "sign_in_refused", _("Sign-in refused")
        SEE_AS = "see_as", _("Saw the workspace as someone else")

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150)  # the member's, kept after their account goes
    action = models.CharField(max_length=20, choices=Action.choices)
    role = models.CharField(max_length=10, blank=True)
    group = models.CharField(max_length=50, blank=True)  # for group_joined / group_left
    detail = models.CharField(max_length=300, blank=True)  # a key's prefix and scope, an invitation's expiry
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.username} ({self.role}) by {self.actor} at {self.at:%Y-%m-%d %H:%M}"


class Invitation(TenantOwned):
    """An invitation by e-mail to someone without an account: a link that creates the account and the membership.

    Only a SHA-256 hash of the link's token is kept; sending it again makes a new token (the old link stops working)."""

    email = models.EmailField()
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.STAFF)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(default=timezone.now)
    sent_count = models.PositiveIntegerField(default=1)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.email} → {self.tenant} ({self.state})"

    @property
    def state(self) -> str:
        """pending, accepted, revoked or expired."""
        if self.accepted_at:
            return "accepted"
        if self.revoked_at:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "pending"


def list_of_tenant() -> list[str]:
    """The default access list and the default `acts_for`: everyone in the tenant."""
    return ["tenant"]


class ApiKey(TenantOwned):
    """A key for one tenant. Only a SHA-256 hash is stored; the key is shown once, at creation.

    Keys are 256-bit random, so a fast hash is safe here (no dictionary to attack) and keeps
    authentication a single indexed lookup.
    """

    class Scope(models.TextChoices):
        READ = "read", _("Read (retrieve, bootstrap, answer, list and read)")
        WRITE = "write", _("Read and write (also upload, sync, change, delete)")

    name = models.CharField(max_length=100, blank=True)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.WRITE)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acts_for = models.JSONField(
        default=list_of_tenant,
        blank=True,
        help_text='Whose view the key reads with: ["tenant"] (documents open to the tenant), principals '
        '(["group:hr", "user:bob"], resolved at each request) or ["all"] (everything; issued by an admin).',
    )
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="After this moment the key no longer works.")
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def state(self) -> str:
        return "revoked" if self.revoked_at else "expired" if self.is_expired else "active"

    @property
    def acts_for_all(self) -> bool:
        return "all" in (self.acts_for or [])

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
