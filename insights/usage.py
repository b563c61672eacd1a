"""What a tenant asks and how its knowledge answers, over a date range (and one group of askers): the figures of the
insights page, each one SQL aggregate over the answers' records (chat.AnswerRecord) and what they cited
(chat.AnswerGround), so a tenant with 100,000 answers renders as fast as an empty one (bench/insights.py). No
question text is read here: the operator's view across tenants is made of these figures alone."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import CharField, Count, Exists, OuterRef, Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Substr, TruncDate
from django.utils import timezone

from chat.models import AnswerGround, AnswerRecord
from knowledge.models import Document, Status
from tenants.models import Group, Tenant

REFUSED = ("not_found", "no_evidence", "not_verified")
ANSWERED = ("answered", "partial", "extractive")
MAX_DAYS = 3 * 366
TOP = 10


class BadRange(ValueError):
    """A date range the page cannot show: said to the admin, never a 500."""


@dataclass(frozen=True)
class Range:
    start: dt.date
    end: dt.date  # inclusive

    @property
    def days(self) -> list[dt.date]:
        return [self.start + dt.timedelta(days=n) for n in range((self.end - self.start).days + 1)]


def date_range(start: str = "", end: str = "", *, default_days: int = 30) -> Range:
    """The range asked for (ISO dates; default: the last 30 days); BadRange says what is wrong with it."""
    today = timezone.localdate()
    try:
        last = dt.date.fromisoformat(end) if end else today
        first = dt.date.fromisoformat(start) if start else last - dt.timedelta(days=default_days - 1)
    except ValueError as exc:
        raise BadRange("Give the dates as YYYY-MM-DD.") from exc
    if first > last:
        raise BadRange("The range ends before it starts.")
    if (last - first).days >= MAX_DAYS:
        raise BadRange("Show at most three years at once.")
    return Range(first, last)


def answers(tenant: Tenant | None, span: Range, group: str = "") -> QuerySet[AnswerRecord]:
    """The answers given in the range (one tenant's, or every tenant's for the operator), by members of `group`."""
    start = dt.datetime.combine(span.start, dt.time.min, tzinfo=timezone.get_current_timezone())
    end = dt.datetime.combine(span.end + dt.timedelta(days=1), dt.time.min, tzinfo=timezone.get_current_timezone())
    found = AnswerRecord.objects.filter(created_at__gte=start, created_at__lt=end)
    if tenant is not None:
        found = found.filter(tenant=tenant)
    if group:
        found = found.filter(groups__contains=f" {group} ")
    return found


@dataclass
class Figures:
    total: int = 0
    by_day: dict[dt.date, dict[str, int]] = field(default_factory=dict)  # day → door → answers
    outcomes: dict[str, int] = field(default_factory=dict)  # answered, partial, refused, computed
    p50_ms: float | None = None
    p95_ms: float | None = None
    timed: int = 0
    by_group: list[tuple[str, int]] = field(default_factory=list)
    by_assistant: list[tuple[str, int]] = field(default_factory=list)  # "" : no assistant named (the default)
    day_group: dict[dt.date, dict[str, int]] = field(default_factory=dict)  # day → group → answers
    day_assistant: dict[dt.date, dict[str, int]] = field(default_factory=dict)  # day → assistant → answers
    cited: list[dict[str, Any]] = field(default_factory=list)
    never_cited: int = 0
    never_cited_some: list[Document] = field(default_factory=list)
    stale_cited: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)


def figures(tenant: Tenant, span: Range, group: str = "") -> Figures:
    found = answers(tenant, span, group)
    shown = Figures()
    _counts(found, shown)
    _groups(tenant, found, shown)
    _assistants(found, shown)
    _documents(tenant, found, shown)
    shown.sources = _sources(found)
    return shown


def _day() -> Any:
    """An answer's day, as SQL: SQLite keeps datetimes as UTC text, so with the UTC time zone the day is its first ten
    characters (TruncDate there calls a Python function per row: 0.4 s of 100,000 answers against 0.05 s)."""
    if connection.vendor == "sqlite" and settings.TIME_ZONE == "UTC":
        return Substr(Cast("created_at", CharField()), 1, 10)
    return TruncDate("created_at")


def _counts(found: QuerySet[AnswerRecord], shown: Figures) -> None:
    for day, door, n in found.annotate(day=_day()).values_list("day", "channel").annotate(n=Count("pk")).order_by():
        day = dt.date.fromisoformat(day) if isinstance(day, str) else day
        shown.by_day.setdefault(day, {})[door] = n
        shown.total += n
    statuses = dict(found.values_list("status").annotate(n=Count("pk")).order_by())
    computed = found.filter(computed__isnull=False, status__in=ANSWERED).exclude(computed__status="fell_back").count()
    shown.outcomes = {
        "answered": sum(statuses.get(s, 0) for s in ANSWERED) - computed,
        "computed": computed,
        "partial": 0,
        "refused": sum(statuses.get(s, 0) for s in REFUSED),
    }
    shown.outcomes["partial"] = statuses.get("partial", 0)
    shown.outcomes["answered"] -= shown.outcomes["partial"]
    # One sorted read, through the cursor (the ORM's per-row work is twice SQLite's sort at 100,000 answers).
    sql, params = (
        found.filter(total_ms__isnull=False).order_by("total_ms").values_list("total_ms").query.sql_with_params()
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        times = [row[0] for row in cursor.fetchall()]
    shown.timed = len(times)
    if times:
        shown.p50_ms = times[int(0.5 * (len(times) - 1))]
        shown.p95_ms = times[int(0.95 * (len(times) - 1))]


SPLITS = ("door", "assistant", "group")
SERIES = 7  # an assistant's or a group's own colour in the chart; the rest stacked as "other"
OTHER = "\u2026other"  # a key no assistant or group can have (names are slugs)


def per_day_by(shown: Figures, by: str) -> dict[dt.date, dict[str, int]]:
    """Questions per day split by assistant or by group (the door's split is `shown.by_day`): the SERIES most asked
    keep their own series, the rest are one (OTHER). "" is the default assistant."""
    split, ranked = (
        (shown.day_assistant, shown.by_assistant) if by == "assistant" else (shown.day_group, shown.by_group)
    )
    top = {name for name, _n in ranked[:SERIES]}
    counts: dict[dt.date, dict[str, int]] = {}
    for day, named in split.items():
        for name, n in named.items():
            key = name if name in top else OTHER
            counts.setdefault(day, {})[key] = counts.get(day, {}).get(key, 0) + n
    return counts


def _per_day(rows: Any) -> Any:
    """(day, key, n) rows of a grouped read, the day as a date (SQLite gives its text)."""
    for day, key, n in rows:
        yield (dt.date.fromisoformat(day) if isinstance(day, str) else day), key, n


def _assistants(found: QuerySet[AnswerRecord], shown: Figures) -> None:
    """One grouped read: answers per day and assistant; the totals by assistant from it."""
    rows = found.annotate(day=_day(), assistant=KT("asked__assistant")).values_list("day", "assistant")
    named: dict[str, int] = {}
    for day, name, n in _per_day(rows.annotate(n=Count("pk")).order_by()):
        key = "" if name in (None, "", "null") else str(name)  # none named: absent, or JSON null ("null" on SQLite)
        named[key] = named.get(key, 0) + n
        shown.day_assistant.setdefault(day, {})[key] = shown.day_assistant.get(day, {}).get(key, 0) + n
    shown.by_assistant = sorted(named.items(), key=lambda row: -row[1])


def _groups(tenant: Tenant, found: QuerySet[AnswerRecord], shown: Figures) -> None:
    """One grouped read: answers per day and the asker's groups then (a few distinct sets), counted for each of the
    tenant's groups; the totals by group from it."""
    names = set(Group.objects.filter(tenant=tenant).values_list("name", flat=True))
    totals: dict[str, int] = {}
    rows = found.annotate(day=_day()).values_list("day", "groups").annotate(n=Count("pk")).order_by()
    for day, groups, n in _per_day(rows):
        for name in set(str(groups).split()) & names:
            totals[name] = totals.get(name, 0) + n
            shown.day_group.setdefault(day, {})[name] = shown.day_group.get(day, {}).get(name, 0) + n
    shown.by_group = sorted(totals.items(), key=lambda row: (-row[1], row[0]))


def _documents(tenant: Tenant, found: QuerySet[AnswerRecord], shown: Figures) -> None:
    """One grouped read of what the answers cited (a document → how many answers), then the documents alone."""
    cited = dict(
        AnswerGround.objects.filter(answer__in=found).values_list("document").annotate(n=Count("answer")).order_by()
    )
    top = sorted(cited.items(), key=lambda row: -row[1])[:TOP]
    documents = Document.objects.in_bulk([pk for pk, _n in top])
    shown.cited = [{"document": documents[pk], "answers": n} for pk, n in top if pk in documents]
    live = Document.objects.filter(tenant=tenant, status=Status.ACTIVE)
    unused = live.exclude(pk__in=list(cited)).order_by("document_key")
    shown.never_cited = unused.count()
    shown.never_cited_some = list(unused.select_related("source")[:TOP])
    today = timezone.localdate()
    successor = Exists(Document.objects.filter(supersedes=OuterRef("pk"), status=Status.ACTIVE))
    stale = (
        Document.objects.filter(pk__in=list(cited))
        .annotate(successor=successor)
        .filter(Q(valid_until__lt=today) | Q(review_by__lt=today) | Q(status=Status.RETIRED) | Q(successor=True))
    )
    rows = []
    for document in stale:
        why = [
            word
            for word, true in (
                ("retired", document.status == Status.RETIRED),
                ("expired", bool(document.valid_until and document.valid_until < today)),
                ("superseded", document.successor),
                ("review_overdue", bool(document.review_by and document.review_by < today)),
            )
            if true
        ]
        rows.append({"document": document, "answers": cited[document.pk], "why": why})
    shown.stale_cited = sorted(rows, key=lambda row: -row["answers"])[:TOP]


def _sources(found: QuerySet[AnswerRecord]) -> list[dict[str, Any]]:
    """Each source that the retriever put first: how often the answer was then given (the lowest rate first)."""
    rows = (
        found.exclude(top_source="")
        .values("top_source")
        .annotate(n=Count("pk"), answered=Count("pk", filter=Q(status__in=(*ANSWERED, "partial"))))
        .order_by()
    )
    table = [
        {
            "source_id": row["top_source"],
            "asked": row["n"],
            "answered": row["answered"],
            "rate": row["answered"] / row["n"],
        }
        for row in rows
    ]
    return sorted(table, key=lambda row: (row["rate"], -row["asked"]))[:TOP]


def across_tenants(span: Range) -> list[dict[str, Any]]:
    """The operator's view: per tenant, how many answers, their outcomes and latency — no question, no name."""
    rows = []
    for tenant in Tenant.objects.order_by("slug"):
        found = answers(tenant, span)
        shown = Figures()
        _counts(found, shown)
        rows.append({"tenant": tenant, "figures": shown})
    return rows
