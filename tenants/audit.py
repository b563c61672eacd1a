"""What the tenants app writes to the audit stream (core/audit.py): every line of a tenant's audit log as it is
written (invitations, roles, groups, keys, provisioning, sign-ins through a provider), every sign-in with a password
(succeeded or failed; the username typed, never the password) and every use of an API key."""

from __future__ import annotations

from typing import Any

from core.audit import audit
from tenants.models import SIGNED_IN_WITH, ApiKey, MembershipEvent


def membership_event(sender: type, *, instance: MembershipEvent, created: bool, **kwargs: Any) -> None:
    if created:
        audit(
            f"member.{instance.action}",
            tenant=instance.tenant.slug,
            actor=instance.actor.get_username() if instance.actor else "",
            member=instance.username,
            role=instance.role,
            group=instance.group,
            detail=instance.detail,
            outcome="refused" if instance.action == MembershipEvent.Action.SIGN_IN_REFUSED else "ok",
        )


def _client(request: Any) -> str:
    from tenants.throttling import client_address

    return client_address(request) if request is not None else ""


def signed_in(sender: type, *, request: Any, user: Any, **kwargs: Any) -> None:
    method = (getattr(request, "session", None) or {}).get(SIGNED_IN_WITH, "password")
    audit("sign_in", actor=user.get_username(), method=method, client=_client(request))


def sign_in_failed(sender: type, *, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    audit(
        "sign_in",
        actor=str(credentials.get("username", ""))[:150],
        outcome="refused",
        method="password",
        client=_client(request),
    )


def key_used(api_key: ApiKey, request: Any) -> None:
    audit(
        "key.used",
        tenant=api_key.tenant.slug,
        actor=f"key:{api_key.prefix}",
        scope=api_key.scope,
        acts_for=",".join(api_key.acts_for or []),
        method=getattr(request, "method", ""),
        path=getattr(request, "path", ""),
        client=_client(request),
    )
