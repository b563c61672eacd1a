"""An agent's session (docs/sessions.md): the session, every chunk it was given (its ledger), what it was last told of
each document it holds, and each change found in those documents. Every row carries its tenant."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tenants.models import TenantOwned


class AgentSession(TenantOwned):
    """An agent's session: what it was given (its ledger), so that later reads bring only what is new, and word of
    what has changed in what it holds. It belongs to the API key or the user that made it; every call in it is
    decided with that caller's principals at that call."""

    api_key = models.ForeignKey("tenants.ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=500, blank=True)
    scope = models.JSONField(default=dict, blank=True, help_text="source_ids and tags every call in it is held to.")
    ttl_seconds = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True, help_text="last_used_at + ttl: a session in use lives on.")
    ended_at = models.DateTimeField(null=True, blank=True)
    calls = models.PositiveIntegerField(default=0)
    tokens_delivered = models.PositiveBigIntegerField(default=0)
    base_pack = models.JSONField(default=dict, blank=True, help_text="What its bootstrap delivered and left out.")
    changes_read = models.PositiveBigIntegerField(default=0, help_text="The last change (SessionChange pk) read.")
    latest_change = models.PositiveBigIntegerField(default=0, help_text="The last change (SessionChange pk) found.")

    class Meta:
        db_table = "knowledge_agentsession"  # made by knowledge's migrations before the app had its own

    def __str__(self) -> str:
        return f"session {self.public_id}"


class SessionDelivery(models.Model):
    """One chunk a session was given: by which call, when, in which version, whole or as an excerpt."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="deliveries")
    document = models.ForeignKey("knowledge.Document", null=True, on_delete=models.SET_NULL, related_name="+")
    chunk_id = models.CharField(max_length=2000)
    content_hash = models.CharField(max_length=64)
    point_id = models.CharField(max_length=36, blank=True)  # the chunk's point in this version (knowledge/index)
    document_id_text = models.CharField(max_length=1900)  # the document_id the agent was given (kept if it goes)
    version = models.PositiveIntegerField()
    call = models.PositiveIntegerField(help_text="The session's call that delivered it (1 = first).")
    via = models.CharField(max_length=20)  # bootstrap, retrieve, answer
    whole = models.BooleanField(default=True, help_text="False: only an excerpt (bootstrap).")
    tokens = models.PositiveIntegerField(default=0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "knowledge_sessiondelivery"
        constraints = [
            models.UniqueConstraint(fields=["session", "chunk_id", "content_hash"], name="session_delivery_once")
        ]
        indexes = [models.Index(fields=["session", "point_id"], name="session_delivery_point")]


class SessionDocument(models.Model):
    """A document a session holds chunks of, as the session was last told it was: the baseline its changes are
    found against (agent_sessions/changes.py: detect)."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="documents")
    document = models.ForeignKey("knowledge.Document", null=True, on_delete=models.SET_NULL, related_name="+")
    document_id_text = models.CharField(max_length=1900)
    version = models.PositiveIntegerField()
    retired = models.BooleanField(default=False)
    expired = models.BooleanField(default=False)
    superseded_by = models.BigIntegerField(null=True, blank=True)  # the successor's pk, once told
    available = models.BooleanField(default=True)
    # The session holds chunks of an older version than the current one (an edit since, or an as_of read): only then
    # is a candidate's text compared with what it holds (an unchanged chunk of the new version is still held).
    older = models.BooleanField(default=False)

    class Meta:
        db_table = "knowledge_sessiondocument"
        constraints = [models.UniqueConstraint(fields=["session", "document_id_text"], name="session_document_once")]


class SessionChange(models.Model):
    """One change to what a session holds, found from the documents' history (never from a model); its pk is the
    cursor of `sessions/<id>/changes/`."""

    class Kind(models.TextChoices):
        CHANGED = "changed", _("Changed")
        SUPERSEDED = "superseded", _("Superseded")
        EXPIRED = "expired", _("Expired")
        RETIRED = "retired", _("Retired")
        NO_LONGER_AVAILABLE = "no_longer_available", _("No longer available")
        ANSWER = "answer", _("An answer's ground changed")

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="changes")
    kind = models.CharField(max_length=30, choices=Kind.choices)
    document_id_text = models.CharField(max_length=1900)
    at = models.DateTimeField(default=timezone.now)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "knowledge_sessionchange"
        ordering = ["pk"]
