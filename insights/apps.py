from django.apps import AppConfig


class InsightsConfig(AppConfig):
    name = "insights"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """A finished evaluation run closes the written gaps whose questions it answered (insights/owners.py)."""
        from django.db.models.signals import post_save

        from feedback.models import EvalRun

        def closed(sender: type, instance: EvalRun, **_: object) -> None:
            from insights.owners import close_answered

            close_answered(instance)

        post_save.connect(closed, sender=EvalRun, dispatch_uid="insights-gaps-closed", weak=False)
