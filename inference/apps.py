from django.apps import AppConfig


class InferenceConfig(AppConfig):
    """Models in one place: the catalog, the chat-model gateway and the packaged weights.

    `knowledge` (enrichment, the packaged embedder's files) and `chat` (answers) both use it; it uses neither."""

    name = "inference"
    default_auto_field = "django.db.models.BigAutoField"
