"""The loop from a verdict to a lasting test: a fix closes a curation item, the closed item becomes a question
of the tenant's own evaluation set, and every evaluation run of that set is kept to plot over time."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from chat.models import Verdict
from tenants.models import TenantOwned


class Fix(TenantOwned):
    """What a tenant admin did about a thumbs-down; its existence closes the item. Who and when are kept."""

    class Action(models.TextChoices):
        CRITICAL = "critical", _("Marked the right chunk critical")
        RETIRE = "retire", _("Retired a document")
        TAG = "tag", _("Tagged a document")
        UPLOAD = "upload", _("Uploaded the missing document")
        MISREAD = "misread", _("The answer misread a correct excerpt")
        WRONG_VERSION = "wrong_version", _("The answer should have used the version in force at a date")
        WRONG_FILTER = "wrong_filter", _("A computed answer kept the wrong rows (a filter missing or too many)")
        WRONG_TABLE = "wrong_table", _("A computed answer read the wrong table")
        WRONG_DIRECTION = "wrong_direction", _("A computed answer read the direction backwards (most / least)")
        NOT_IN_KNOWLEDGE = "not_in_knowledge", _("Not in our knowledge: the right answer is a refusal")
        DISMISS = "dismiss", _("Dismissed: the answer was right")

    verdict = models.OneToOneField(Verdict, on_delete=models.CASCADE, related_name="fix")
    action = models.CharField(max_length=20, choices=Action.choices)
    detail = models.CharField(max_length=1000, blank=True, help_text="The chunk, document, tag or file acted on.")
    chunk = models.ForeignKey("knowledge.Chunk", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    document = models.ForeignKey("knowledge.Document", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")  # fmt: skip
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    by_name = models.CharField(max_length=150, help_text="Who did it, kept if the account is removed.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.get_action_display()} by {self.by_name}"


class EvalQuestion(TenantOwned):
    """One question of the tenant's evaluation set, in the public eval set's terms (shared/eval/questions.jsonl):
    the documents that hold the answer, the phrase a right answer contains, or that it is not answerable."""

    question = models.TextField()
    relevant_docs = models.JSONField(default=list, blank=True, help_text="document_key of each relevant document.")
    answer = models.CharField(max_length=1000, blank=True, help_text="A phrase every right answer contains.")
    evidence = models.TextField(blank=True, help_text="The passage that holds the answer, when known.")
    answerable = models.BooleanField(default=True)
    as_of = models.DateField(null=True, blank=True,
                             help_text="The day whose version a right answer uses (a wrong-version fix).")  # fmt: skip
    lang = models.CharField(max_length=10, default="en")
    fix = models.OneToOneField(Fix, null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_question")
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.question[:80]

    @property
    def kind(self) -> str:
        return "curated" if self.answerable else "unanswerable"


class VerifierCase(TenantOwned):
    """A sentence an answer claimed from an excerpt that does not say it (a curator's "the answer misread a correct
    excerpt"): every evaluation run checks that the claim verifier now refuses it against that excerpt."""

    question = models.TextField()
    claim = models.TextField(help_text="The sentence the answer stated.")
    excerpt = models.TextField(help_text="The source text it cited, which does not say it.")
    document_key = models.CharField(max_length=1000, blank=True)
    chunk_id = models.CharField(max_length=300, blank=True)
    fix = models.ForeignKey(Fix, null=True, blank=True, on_delete=models.SET_NULL, related_name="verifier_cases")
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.claim[:80]


class EvalRun(TenantOwned):
    """One run of the tenant's evaluation set: its figures, and what the system was at that moment (model, index,
    curations), so the plot can say what changed between two points."""

    class State(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    answers = models.BooleanField(default=True, help_text="Also ask the chat model (else retrieval only).")
    trigger = models.CharField(max_length=20, default="page", help_text="page or command")
    started_by = models.CharField(max_length=150, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True, help_text="Model, index state, curations so far.")
    results = models.JSONField(default=list, blank=True, help_text="Per question: hits, answer, scores.")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last question done, while running.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Evaluation {self.created_at:%Y-%m-%d %H:%M} ({self.state})"


class Conflict(TenantOwned):
    """Two current documents stating different values for one named thing (feedback/conflicts.py): a curation item
    until an admin resolves it (who and when are kept)."""

    class State(models.TextChoices):
        OPEN = "open", _("Open")
        RESOLVED = "resolved", _("Resolved")
        DISMISSED = "dismissed", _("Not a contradiction")

    document = models.ForeignKey("knowledge.Document", on_delete=models.CASCADE, related_name="+",
                                 help_text="The document whose new version stated it.")  # fmt: skip
    other = models.ForeignKey("knowledge.Document", on_delete=models.CASCADE, related_name="+")
    subject = models.CharField(max_length=500, help_text="The words that name the thing.")
    value = models.CharField(max_length=100)
    other_value = models.CharField(max_length=100)
    sentence = models.TextField()
    other_sentence = models.TextField()
    chunk = models.ForeignKey("knowledge.Chunk", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    other_chunk = models.ForeignKey("knowledge.Chunk", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")  # fmt: skip
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN, db_index=True)
    resolution = models.CharField(max_length=300, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["document", "other", "subject", "value", "other_value"],
                                    name="conflict_unique_pair"),
        ]  # fmt: skip
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.value} vs {self.other_value} ({self.subject})"


class ConflictScan(TenantOwned):
    """How far the contradiction scan has read the tenant's document history (DocumentEvent pk)."""

    last_event_id = models.BigIntegerField(default=0)
