"""The company's directory in ragsite: who a provider provisioned into a tenant (SCIM), by which stable id, and the
bearer tokens it provisions with. A member is linked to the provider by the link's `external_id` and `public_id`
(the SCIM id), never by e-mail; the person's account is Django's User, their membership and groups the tenant's
(tenants/models.py): provisioning changes those, through tenants/services.py, and nothing else decides access."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from tenants.models import Group, TenantOwned

SECRET_PURPOSE = "identity-provider-secret"  # core.sealed: a provider's client secret or bind password


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


class Provider(TenantOwned):
    """Where a tenant's people come from besides SCIM: an OpenID Connect or SAML 2.0 provider they sign in through,
    or an LDAP / Active Directory directory synced on a schedule. Each maps the provider's groups to a role (the
    highest wins; `default_role` for someone in none of them, or refused when it is empty) and to the tenant's
    groups (an explicit map, and by name when `groups_by_name`). Secrets (the client secret, the bind password) are
    sealed at rest (core/sealed.py) and never shown again."""

    class Kind(models.TextChoices):
        OIDC = "oidc", "OpenID Connect"
        SAML = "saml", "SAML 2.0"
        LDAP = "ldap", "LDAP / Active Directory"

    name = models.CharField(_("name"), max_length=100, help_text=_("What the sign-in button says: “Sign in with …”."))
    slug = models.SlugField(
        _("short name"), max_length=50, help_text=_("Part of the provider's addresses (redirect URI, SAML metadata).")
    )
    kind = models.CharField(_("kind"), max_length=4, choices=Kind.choices, default=Kind.OIDC)
    enabled = models.BooleanField(_("enabled"), default=True)
    # OpenID Connect
    issuer = models.URLField(
        _("issuer (OpenID Connect)"), max_length=500, blank=True, help_text=_("Its discovery document is read from it.")
    )
    client_id = models.CharField(_("client id (OpenID Connect)"), max_length=255, blank=True)
    scopes = models.CharField(_("scopes (OpenID Connect)"), max_length=255, blank=True, default="openid email profile")
    # SAML 2.0: the IdP's metadata, as its administrator exports it
    idp_metadata = models.TextField(_("IdP metadata (SAML)"), blank=True)
    # LDAP / Active Directory
    ldap_url = models.CharField(
        _("directory address (LDAP)"), max_length=500, blank=True, help_text="ldap://host:389 · ldaps://host:636"
    )
    bind_dn = models.CharField(_("bind DN (LDAP)"), max_length=500, blank=True)
    user_base = models.CharField(_("people base DN (LDAP)"), max_length=500, blank=True)
    user_filter = models.CharField(
        _("people filter (LDAP)"), max_length=500, blank=True, default="(objectClass=inetOrgPerson)"
    )
    group_base = models.CharField(_("groups base DN (LDAP)"), max_length=500, blank=True)
    group_filter = models.CharField(
        _("groups filter (LDAP)"), max_length=500, blank=True, default="(objectClass=groupOfNames)"
    )
    sync_minutes = models.PositiveIntegerField(_("minutes between syncs (LDAP)"), default=60)
    last_sync_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_sync_report = models.CharField(max_length=500, blank=True, editable=False)
    # Sealed: the OIDC client secret, or the LDAP bind password
    secret_sealed = models.TextField(blank=True, editable=False)
    # Claims (OIDC), attributes (SAML, LDAP)
    subject_claim = models.CharField(
        _("subject attribute"),
        max_length=100,
        blank=True,
        default="sub",
        help_text=_("The stable id a member is linked by (SAML: NameID; LDAP: entryUUID)."),
    )
    username_claim = models.CharField(_("username claim"), max_length=100, default="preferred_username")
    email_claim = models.CharField(_("e-mail claim"), max_length=100, default="email")
    groups_claim = models.CharField(_("groups claim"), max_length=100, default="groups")
    allowed_domains = models.CharField(
        _("allowed e-mail domains"), max_length=500, blank=True, help_text=_("Comma-separated; empty: any domain.")
    )
    role_map = models.JSONField(default=dict, blank=True)  # provider group → role (admin or staff)
    group_map = models.JSONField(default=dict, blank=True)  # provider group → the tenant's group
    groups_by_name = models.BooleanField(
        _("join groups by name"),
        default=True,
        help_text=_("A provider group joins this workspace's group of the same name."),
    )
    default_role = models.CharField(
        _("default role"),
        max_length=10,
        blank=True,
        default="staff",
        help_text=_("The role of someone in no mapped group; empty: they are refused."),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "slug"], name="identity_provider_unique_slug")]
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"


class ProviderLink(TenantOwned):
    """A member as the provider knows them: its stable subject (OIDC `sub`, the SAML NameID, LDAP `entryUUID`).
    Sign-in finds the member by this link alone, never by e-mail; an account deleted takes its links with it, so
    the next person the provider sends under the same username starts with nothing."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="links")
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identity_links")
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "subject"], name="identity_link_unique_subject")]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.provider.slug}:{self.subject}"


class ManagedGroup(TenantOwned):
    """A tenant group whose members a provider keeps: at every sign-in (or directory sync) a person joins the
    managed groups their provider groups name and leaves the others; groups made by hand are left alone."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="managed_groups")
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "group"], name="identity_managed_group_unique")]
