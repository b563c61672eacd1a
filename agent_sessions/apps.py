from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    """Agent sessions: above knowledge (they read it), below chat and the doors that use them."""

    name = "agent_sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tenants.signals import member_deprovisioned

        member_deprovisioned.connect(_member_deprovisioned, dispatch_uid="agent-sessions-member-deprovisioned")


def _member_deprovisioned(sender: object, *, tenant: object, user: object, keys: list, **kwargs: object) -> int:
    from agent_sessions.services import sessions_end_for

    return sessions_end_for(tenant=tenant, user=user, api_keys=keys)  # type: ignore[arg-type]
