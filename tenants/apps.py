from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_delete

        from tenants import schema  # noqa: F401  (registers the OpenAPI auth extension)

        pre_delete.connect(_user_deleted, sender=get_user_model(), dispatch_uid="tenants-user-deleted")


def _user_deleted(sender: object, *, instance: object, **kwargs: object) -> None:
    """However an account is deleted (the Django admin, a command, a shell): its name leaves every list and key."""
    from tenants.services import user_forget

    user_forget(instance)  # type: ignore[arg-type]
