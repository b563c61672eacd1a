from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_in, user_login_failed
        from django.db.models.signals import post_save, pre_delete

        from tenants import (
            audit,
            schema,  # noqa: F401  (registers the OpenAPI auth extension)
        )
        from tenants.models import MembershipEvent

        pre_delete.connect(_user_deleted, sender=get_user_model(), dispatch_uid="tenants-user-deleted")
        post_save.connect(audit.membership_event, sender=MembershipEvent, dispatch_uid="tenants-audit-membership")
        user_logged_in.connect(audit.signed_in, dispatch_uid="tenants-audit-signed-in")
        user_login_failed.connect(audit.sign_in_failed, dispatch_uid="tenants-audit-sign-in-failed")


def _user_deleted(sender: object, *, instance: object, **kwargs: object) -> None:
    """However an account is deleted (the Django admin, a command, a shell): its name leaves every list and key."""
    from tenants.services import user_forget

    user_forget(instance)  # type: ignore[arg-type]
