"""Assistants (named bundles of persona, model, sampling and scope) and saved chat sessions."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from tenants.models import TenantOwned


def validate_string_list(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ValidationError('A list of names, e.g. ["manuals", "faq"].')


def validate_model_path(value: str) -> None:
    from inference.llm import model_path_allowed

    if value and not model_path_allowed(value):
        raise ValidationError("Only a .gguf under the models folder, or a model the operator configured.")


class Assistant(TenantOwned):
    """ "Chat with the support bot" needs no further settings: everything is bundled here."""

    name = models.CharField(
        max_length=60, validators=[RegexValidator(r"^[a-z0-9][a-z0-9-]*$", "Lowercase letters, digits and hyphens.")]
    )
    description = models.CharField(max_length=200, blank=True)
    persona = models.TextField(blank=True, help_text="Added to the system rules, e.g. tone and audience.")
    model = models.ForeignKey(
        "inference.ModelEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        limit_choices_to={"kind": "chat"}, help_text="A chat model from the catalog; blank uses the default chain.",
    )  # fmt: skip
    model_path = models.CharField(
        max_length=1000, blank=True, validators=[validate_model_path],
        help_text="Or a chat GGUF path under the models folder (used when no catalog model is chosen).",
    )  # fmt: skip
    temperature = models.FloatField(default=0.2, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    top_p = models.FloatField(default=0.9, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    max_tokens = models.PositiveIntegerField(default=384, validators=[MinValueValidator(16), MaxValueValidator(4096)])
    top_k = models.PositiveIntegerField(default=6, validators=[MinValueValidator(1), MaxValueValidator(50)])
    source_ids = models.JSONField(default=list, blank=True, validators=[validate_string_list],
                                  help_text="Limit retrieval to these source ids.")  # fmt: skip
    tags = models.JSONField(default=list, blank=True, validators=[validate_string_list],
                            help_text="Limit retrieval to documents with these tags.")  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="assistant_unique_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ChatSession(TenantOwned):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions")
    assistant = models.ForeignKey(Assistant, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"Chat {self.public_id}"


class ChatMessage(TenantOwned):
    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    text = models.TextField(help_text="The user's original words, or the answer — never the enriched prompt.")
    model = models.CharField(max_length=300, blank=True)
    generated = models.BooleanField(default=True)
    status = models.CharField(max_length=20, blank=True)
    citations = models.JSONField(default=list, blank=True)
    claims = models.JSONField(default=list, blank=True, help_text="The answer's sentences, each verified.")
    ttft_ms = models.FloatField(null=True, blank=True)
    total_ms = models.FloatField(null=True, blank=True)
    # When the first verified sentence was shown (what the live page says), and a refusal's passages that may hold
    # the answer: a reopened conversation shows the answer as it was shown live.
    first_verified_ms = models.FloatField(null=True, blank=True)
    evidence = models.JSONField(default=list, blank=True)
    record = models.OneToOneField(
        "AnswerRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="message",
        help_text="The answer as given (hits, index state).",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]


class Attributed(TenantOwned):
    """A row someone made: a signed-in person, or an agent's API key (the other is empty), and when."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")  # fmt: skip
    api_key = models.ForeignKey("tenants.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-pk"]

    @property
    def by_name(self) -> str:
        if self.user is not None:
            return self.user.get_username()
        return f"API key {self.api_key.prefix}" if self.api_key is not None else "(removed)"


class AnswerRecord(Attributed):
    """An answer as it was given, by any door (chat, REST, MCP): what a verdict is about. Kept with the hits that
    were ranked, the claims as verified, the model, and the versions of the documents it read at that moment."""

    class Channel(models.TextChoices):
        CHAT = "chat", _("Chat")
        API = "api", _("REST API")
        MCP = "mcp", _("MCP")
        OPENAI = "openai", _("OpenAI-compatible API")

    channel = models.CharField(max_length=10, choices=Channel.choices)
    question = models.TextField()
    answer = models.TextField()
    status = models.CharField(max_length=20)
    generated = models.BooleanField(default=True)
    model = models.CharField(max_length=300, blank=True)
    citations = models.JSONField(default=list, blank=True)
    claims = models.JSONField(default=list, blank=True)
    hits = models.JSONField(default=list, blank=True, help_text="The ranked hits: location, score, signals, version.")
    index_state = models.JSONField(default=dict, blank=True, help_text="Document versions read; the index's size.")
    # What the receipt shows of how it was asked: the assistant, its settings and scope, the time asked about, the
    # asker's principals then and the prompt rules' version; and a computed answer's table, query and rows.
    asked = models.JSONField(default=dict, blank=True)
    computed = models.JSONField(null=True, blank=True)
    agent_session = models.ForeignKey(
        "agent_sessions.AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Recall (chat/recall.py): the worst state its claims were last flagged with, when, each claim's state then, and
    # when the asker saw it (staff: the inbox, or the badge's receipt).
    recall_state = models.CharField(max_length=30, blank=True, db_index=True)
    recalled_at = models.DateTimeField(null=True, blank=True, db_index=True)
    recall = models.JSONField(default=dict, blank=True)
    recall_seen_at = models.DateTimeField(null=True, blank=True)
    # What the insights read without opening the JSON (insights/usage.py): the time the answer took, the asker's
    # groups then (" hr sales ", every group a space either side) and the source of the first hit.
    total_ms = models.FloatField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    groups = models.CharField(max_length=1000, blank=True, default="")
    top_source = models.CharField(max_length=700, blank=True, default="", db_index=True)

    def __str__(self) -> str:
        return f"{self.question[:60]} ({self.status})"


class Verdict(Attributed):
    """A person's or an agent's judgement of one answer (or of some of its claims). A thumbs-down is an item of
    the tenant admins' curation queue until a fix closes it (feedback app)."""

    class Reason(models.TextChoices):
        WRONG_FACT = "wrong_fact", _("Wrong fact")
        WRONG_CITATION = "wrong_citation", _("Wrong or missing citation")
        SHOULD_REFUSE = "should_refuse", _("Should have refused")
        SHOULD_ANSWER = "should_answer", _("Should have answered")
        OUTDATED = "outdated", _("Outdated document")

    answer = models.ForeignKey(AnswerRecord, on_delete=models.CASCADE, related_name="verdicts")
    helpful = models.BooleanField()
    reason = models.CharField(max_length=20, choices=Reason.choices, blank=True)
    claims = models.JSONField(default=list, blank=True, help_text="Indexes of the claims judged; empty: the answer.")
    correct_answer = models.TextField(blank=True)
    document = models.ForeignKey("knowledge.Document", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+", help_text="The document that holds the right answer.")  # fmt: skip
    channel = models.CharField(max_length=10, choices=AnswerRecord.Channel.choices)

    def __str__(self) -> str:
        return f"{'👍' if self.helpful else '👎'} {self.get_reason_display() or ''} on {self.answer}"


class AnswerGround(models.Model):
    """A document an answer cited, as it stood when last checked (chat/recall.py): the scan looks only at rows whose
    document's version, retirement, expiry, successor or readers differ from these."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    answer = models.ForeignKey(AnswerRecord, on_delete=models.CASCADE, related_name="grounds")
    document = models.ForeignKey("knowledge.Document", on_delete=models.CASCADE, related_name="+")
    version = models.PositiveIntegerField()
    readers = models.TextField(default=" tenant ")
    retired = models.BooleanField(default=False)
    expired = models.BooleanField(default=False)
    superseded_by = models.BigIntegerField(null=True, blank=True)
    # Already so when the answer was given (an answer about last year cites last year's policy): not a change, so it
    # recalls nothing; only a change since does.
    settled = models.BooleanField(default=False, help_text="Superseded or expired when the answer was given.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["answer", "document"], name="answer_ground_once")]
        indexes = [models.Index(fields=["document", "version"], name="answer_ground_document")]


class AnswerWebhook(TenantOwned):
    """Where an API key's recalled answers are posted (signed, retried with back-off); one per key."""

    api_key = models.OneToOneField("tenants.ApiKey", on_delete=models.CASCADE, related_name="answer_webhook")
    url = models.CharField(max_length=2000, help_text="Checked as a website source's start URL is.")
    secret = models.TextField(help_text="Sealed (core/sealed.py); shown once, when the webhook is made.")
    created_at = models.DateTimeField(auto_now_add=True)


class WebhookDelivery(models.Model):
    """One recall posted (or to be posted) to a key's webhook: its attempts and its last failure, as the keys page
    shows them."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    webhook = models.ForeignKey(AnswerWebhook, on_delete=models.CASCADE, related_name="deliveries")
    answer = models.ForeignKey(AnswerRecord, on_delete=models.CASCADE, related_name="+")
    payload = models.JSONField(default=dict)
    attempts = models.PositiveIntegerField(default=0)
    next_at = models.DateTimeField(null=True, blank=True, db_index=True, help_text="None: delivered or given up.")
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]


class DigestChoice(TenantOwned):
    """How often a member is sent what changed in the documents they asked about or were cited to them."""

    class Every(models.TextChoices):
        NEVER = "never", _("Never")
        DAILY = "daily", _("Daily")
        WEEKLY = "weekly", _("Weekly")

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    every = models.CharField(max_length=10, choices=Every.choices, default=Every.NEVER)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="digest_choice_once")]
