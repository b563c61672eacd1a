"""The provider form a tenant admin fills in the browser: one form for the three kinds, the secret write-only
(left empty, the sealed one stays), the maps as `provider group = value` lines."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.sealed import seal
from identity.models import SECRET_PURPOSE, Provider
from tenants.models import GROUP_NAME_VALIDATOR, Membership

LINE_RE = re.compile(r"^\s*(?P<key>[^=]+?)\s*=\s*(?P<value>\S.*?)\s*$")


def map_text(mapping: dict[str, str]) -> str:
    return "\n".join(f"{k} = {v}" for k, v in sorted((mapping or {}).items()))


def _parse_map(text: str, *, what: str) -> dict[str, str]:
    parsed = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip() or line.strip().startswith("#"):
            continue
        match = LINE_RE.match(line)
        if match is None:
            raise forms.ValidationError(
                _("Line %(n)d of the %(what)s: write “provider group = value”.") % {"n": number, "what": what}
            )
        parsed[match.group("key")] = match.group("value")
    return parsed


class ProviderForm(forms.ModelForm):
    secret = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        label=gettext_lazy("Client secret (OIDC) or bind password (LDAP)"),
        help_text=gettext_lazy("Sealed at rest and never shown again; leave empty to keep it."),
    )
    role_map_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label=gettext_lazy("Roles from groups"),
        help_text=gettext_lazy("One per line: provider group = admin or staff."),
    )
    group_map_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label=gettext_lazy("Groups from groups"),
        help_text=gettext_lazy("One per line: provider group = this workspace's group."),
    )

    class Meta:
        model = Provider
        fields = [
            "name",
            "slug",
            "kind",
            "enabled",
            "issuer",
            "client_id",
            "scopes",
            "idp_metadata",
            "ldap_url",
            "bind_dn",
            "user_base",
            "user_filter",
            "group_base",
            "group_filter",
            "sync_minutes",
            "subject_claim",
            "username_claim",
            "email_claim",
            "groups_claim",
            "allowed_domains",
            "groups_by_name",
            "default_role",
        ]
        widgets = {"idp_metadata": forms.Textarea(attrs={"rows": 4})}

    def __init__(self, *args: Any, tenant: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        self.fields["role_map_text"].initial = map_text(self.instance.role_map)
        self.fields["group_map_text"].initial = map_text(self.instance.group_map)

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        taken = Provider.objects.for_tenant(self.tenant).filter(slug=slug).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(_("Another provider of this workspace has this slug."))
        return slug

    def clean_default_role(self) -> str:
        role = self.cleaned_data.get("default_role", "").strip()
        if role and role not in Membership.Role.values:
            raise forms.ValidationError(_("Use admin, staff, or leave empty to refuse people in no mapped group."))
        return role

    def clean_role_map_text(self) -> dict[str, str]:
        mapping = _parse_map(self.cleaned_data.get("role_map_text", ""), what=_("roles"))
        wrong = [v for v in mapping.values() if v not in Membership.Role.values]
        if wrong:
            raise forms.ValidationError(_("A role is admin or staff, not %(role)s.") % {"role": wrong[0]})
        return mapping

    def clean_group_map_text(self) -> dict[str, str]:
        mapping = {
            k: v.lower() for k, v in _parse_map(self.cleaned_data.get("group_map_text", ""), what=_("groups")).items()
        }
        for name in mapping.values():
            try:
                GROUP_NAME_VALIDATOR(name)
            except forms.ValidationError:
                raise forms.ValidationError(
                    _("%(name)s cannot name a group: use lower-case letters, digits, - or _.") % {"name": name}
                ) from None
        return mapping

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        required = {"oidc": ["issuer", "client_id"], "saml": ["idp_metadata"], "ldap": ["ldap_url", "user_base"]}
        needs = required.get(str(kind), [])
        for name in needs:
            if not data.get(name):
                self.add_error(name, _("Needed for this kind of provider."))
        if kind == Provider.Kind.OIDC and not data.get("secret") and not self.instance.secret_sealed:
            self.add_error("secret", _("Needed for this kind of provider."))
        if kind == Provider.Kind.LDAP and data.get("ldap_url") and not re.match(r"^ldaps?://", data["ldap_url"]):
            self.add_error("ldap_url", _("Use ldap://host:port or ldaps://host:port."))
        return data

    def save(self, commit: bool = True) -> Provider:
        provider = super().save(commit=False)
        provider.tenant = self.tenant
        provider.role_map = self.cleaned_data["role_map_text"]
        provider.group_map = self.cleaned_data["group_map_text"]
        if self.cleaned_data.get("secret"):
            provider.secret_sealed = seal(self.cleaned_data["secret"], purpose=SECRET_PURPOSE)
        if commit:
            provider.save()
        return provider
