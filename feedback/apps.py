from django.apps import AppConfig


class FeedbackConfig(AppConfig):
    name = "feedback"
    default_auto_field = "django.db.models.BigAutoField"
