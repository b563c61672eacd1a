"""Flows that create or change tenants, memberships and API keys."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone

from tenants.models import ApiKey, Membership, Tenant

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


def _hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def api_key_issue(*, tenant: Tenant, name: str = "", created_by: User | None = None,
                  scope: str = ApiKey.Scope.WRITE) -> tuple[ApiKey, str]:  # fmt: skip
    """Create a key and return it with its clear text, which is never stored or shown again."""
    if scope not in ApiKey.Scope.values:
        raise ValueError(f"Unknown key scope {scope!r}: {', '.join(ApiKey.Scope.values)}.")
    raw_key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=raw_key[: len(API_KEY_PREFIX) + 8],
        key_hash=_hash_key(raw_key),
        created_by=created_by,
        scope=scope,
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
