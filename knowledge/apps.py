import sys

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tenants.signals import principal_removed

        principal_removed.connect(_principal_removed, dispatch_uid="knowledge-principal-removed")
        if sys.argv[1:2] == ["qcluster"]:  # a django-q worker: ingestion jobs embed in bulk here
            from inference.embedders import become_batch_process

            become_batch_process()


def _principal_removed(sender: object, *, tenant: object, principal: str, **kwargs: object) -> int:
    from knowledge.services import principal_forget

    return principal_forget(tenant=tenant, principal=principal)  # type: ignore[arg-type]
