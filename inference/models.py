"""The model catalog's one table: models the platform can use for chat, enrichment or embedding."""

from __future__ import annotations

from django.db import models


class ModelEntry(models.Model):
    """A model the platform can use, registered by name and GGUF path (the packaged ones automatically)."""

    class Kind(models.TextChoices):
        CHAT = "chat", "Chat"
        EMBEDDING = "embedding", "Embedding"
        ENRICHMENT = "enrichment", "Enrichment"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    path = models.CharField(max_length=1000)
    size_bytes = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    context_length = models.PositiveIntegerField(null=True, blank=True, editable=False)
    loads = models.BooleanField(null=True, editable=False, help_text="Whether it loaded when last checked.")
    load_error = models.TextField(blank=True, editable=False)
    packaged = models.BooleanField(default=False, editable=False)
    checked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "knowledge_modelentry"  # where it was created, before models had an app of their own
        ordering = ["kind", "name"]
        verbose_name = "model"

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"
