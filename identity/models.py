"""The company's directory in ragsite: who a provider provisioned into a tenant (SCIM), by which stable id, and the
bearer tokens it provisions with. A member is linked to the provider by the link's `external_id` and `public_id`
(the SCIM id), never by e-mail; the person's account is Django's User, their membership and groups the tenant's
(tenants/models.py): provisioning changes those, through tenants/services.py, and nothing else decides access."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tenants.models import Group, TenantOwned


class ScimToken(TenantOwned):
    """A tenant's SCIM bearer token. Only a SHA-256 hash is kept (256 random bits: a fast hash is safe); shown once."""

    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "SCIM token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'SCIM'})"


class ScimUser(TenantOwned):
    """A person the provider provisioned into the tenant: the SCIM id is `public_id`. While `active`, the person is
    a member (tenants.Membership); deactivated, the link stays (the provider can read and reactivate it) and the
    membership, groups, keys and sessions are gone. The account is made for the tenant by the provider; a username
    taken on the server by anyone else is refused (409), never linked."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="scim")
    user_name = models.CharField(max_length=150)
    external_id = models.CharField(max_length=255, blank=True)
    active = models.BooleanField(default=True)
    given_name = models.CharField(max_length=150, blank=True)
    family_name = models.CharField(max_length=150, blank=True)
    display_name = models.CharField(max_length=300, blank=True)
    email = models.EmailField(blank=True)
    resource = models.JSONField(default=dict, blank=True, help_text="The provider's User as it sent it (SCIM JSON).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user_name"], name="scim_user_unique_name")]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.user_name} ({'active' if self.active else 'inactive'})"


class ScimGroup(TenantOwned):
    """A group the provider provisioned: the tenant's Group it is (its SCIM id is `public_id`), and the provider's
    own id and display name (a ragsite group's name is a principal's: lower case, no spaces; it is made from the
    display name once and kept, since access lists name it, when the provider renames the group)."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="scim")
    display_name = models.CharField(max_length=300)
    external_id = models.CharField(max_length=255, blank=True)
    resource = models.JSONField(default=dict, blank=True, help_text="The provider's Group as it sent it (SCIM JSON).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "display_name"], name="scim_group_unique_name")]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.display_name
