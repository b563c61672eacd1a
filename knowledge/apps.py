import sys

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        if sys.argv[1:2] == ["qcluster"]:  # a django-q worker: ingestion jobs embed in bulk here
            from inference.embedders import become_batch_process

            become_batch_process()
