"""Content gaps (insights/gaps.py): refused and 👎 questions grouped by meaning, each sent to one who can close it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from tenants.models import TenantOwned


class Gap(TenantOwned):
    """Questions the knowledge base could not answer (or answered wrong), about one thing."""

    class State(models.TextChoices):
        OPEN = "open", _("Open")
        WRITTEN = "written", _("Written: waiting for its questions to be answered")
        CLOSED = "closed", _("Closed")

    representative = models.TextField(help_text="The question nearest the group's centre.")
    centroid = models.JSONField(default=list, help_text="The mean of its questions' embeddings, normalised.")
    asked = models.PositiveIntegerField(default=0)
    first_asked_at = models.DateTimeField()
    last_asked_at = models.DateTimeField()
    groups = models.JSONField(default=dict, blank=True, help_text="Group → how many of its questions it asked.")
    doors = models.JSONField(default=dict, blank=True, help_text="Door → how many of its questions came by it.")
    nearest = models.JSONField(default=dict, blank=True, help_text="What the retriever saw nearest.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who closes it; none: the tenant's admins.",
    )
    draft = models.JSONField(default=dict, blank=True, help_text="Verified sentences of what exists, cited.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN, db_index=True)
    written = models.TextField(blank=True, help_text="The missing text, as its owner wrote or approved it.")
    expected = models.CharField(max_length=300, blank=True, help_text="A phrase every right answer contains.")
    written_by = models.CharField(max_length=150, blank=True)
    written_at = models.DateTimeField(null=True, blank=True)
    document = models.ForeignKey(
        "knowledge.Document",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The document its text went into.",
    )
    checked = models.JSONField(
        default=dict,
        blank=True,
        help_text="Where its text went (a new document's source and key) and the last check of its questions: the "
        "version asked against, when, how many answered with the phrase.",
    )
    told = models.JSONField(
        default=list, blank=True, help_text="The users told by e-mail that this gap is theirs to close (their pks)."
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-asked", "-last_asked_at"]


class GapQuestion(models.Model):
    """One question of a gap: the answer it came from, when, by which door, from which groups."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    gap = models.ForeignKey(Gap, null=True, on_delete=models.CASCADE, related_name="questions")
    answer = models.OneToOneField("chat.AnswerRecord", on_delete=models.CASCADE, related_name="+")
    question = models.TextField()
    asked_at = models.DateTimeField()
    door = models.CharField(max_length=10)
    groups = models.CharField(max_length=500, blank=True)
    embedding = models.JSONField(default=list)
    eval_question = models.ForeignKey(
        "feedback.EvalQuestion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["asked_at", "pk"]
