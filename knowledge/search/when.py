"""When a question asks about: read by rules, never by a model, so a test can say what each question gets.

- A past year, month or date named ("in 2025", "in March 2025", "on 2025-05-01", "before November 2025", "en
  2024") asks what was in force then: `at` is the end of that period (the day before, for "before …").
- Words that ask about an earlier state ("before", "previous", "used to", "originally", "formerly", "antes",
  "anterior", "originalmente", "solía"…), a version ("version 2", "v1"), or why/when something changed ("why was
  the timeout raised", "cuándo cambió") ask about history: `history` reads every version, superseded and expired
  documents included, each labelled with when it was in force.
- Anything else is a question about now (None): it is answered from what is in force today, as before.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

MONTHS = {
    name: number
    for number, names in enumerate(
        [("january", "enero"), ("february", "febrero"), ("march", "marzo"), ("april", "abril"), ("may", "mayo"),
         ("june", "junio"), ("july", "julio"), ("august", "agosto"), ("september", "septiembre", "setiembre"),
         ("october", "octubre"), ("november", "noviembre"), ("december", "diciembre")], start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
MONTH_YEAR_RE = re.compile(rf"\b({_MONTH})(?:\s+(?:of|de))?\s+(\d{{4}})\b", re.IGNORECASE)
YEAR_RE = re.compile(r"(?<![\d.,-])(19[5-9]\d|20\d\d)(?![\d.,-]\d)")
BEFORE_RE = re.compile(r"\b(?:before|prior to|until|antes de|hasta)\s*$", re.IGNORECASE)
EARLIER_RE = re.compile(
    r"\b(?:before|previous(?:ly)?|used to|originally|original|formerly|earlier|prior|last change|old value|"
    r"antes|anterior(?:es|mente)?|originalmente|solía|solian|solían|previamente)\b"
    r"|\b(?:version|versión|v)\s?\d+\b",
    re.IGNORECASE,
)
CHANGE_RE = re.compile(
    r"\b(?:chang|rais|lower|increas|decreas|reduc|set back|moved|switch|updat|replac|cambi|subi|baj|aument|reduj|"
    r"modific)\w*",
    re.IGNORECASE,
)
ORIGINAL_RE = re.compile(
    r"\b(?:original(?:ly)?|initial(?:ly)?|at first|first version|in the beginning|originalmente|inicialmente|"
    r"al principio|primera versión)\b",
    re.IGNORECASE,
)
WHY_WHEN_RE = re.compile(r"\b(?:why|when|what year|por qué|porqué|cuándo|cuando)\b", re.IGNORECASE)
PRESENT_RE = re.compile(r"\b(?:now|today|currently|current|at present|ahora|hoy|actualmente|actual)\b", re.IGNORECASE)

# The words of a sentence that only say when (for the claim check: they are not terms a value must stand near).
TIME_WORDS_RE = re.compile(
    "|".join([EARLIER_RE.pattern, PRESENT_RE.pattern, ORIGINAL_RE.pattern,
              r"\b(?:the |its |this )?(?:last |latest |previous |first )?(?:change|cambio)\b",
              r"\b(?:in|en|since|desde|until|hasta|as of)\s+(?:\w+\s+)?(?:19|20)\d\d\b"]),
    re.IGNORECASE,
)  # fmt: skip


@dataclass(frozen=True)
class TimeRead:
    """What the question asks about: the state at `at` (a past instant), or the history (every version), or both
    ("what was it in 2025 and what is it now")."""

    at: dt.datetime | None = None
    history: bool = False
    reason: str = ""  # the words that decided it, for the answer's record
    since: dt.date | None = None  # the first day of the period named ("in 2025": 2025-01-01; "before 2025": open)
    earlier: bool = False  # it asks for an earlier state ("before", "previous", "originally"), not only why or when
    original: bool = False  # it asks for the first state ("originally", "at first", "initially")

    def covers(self, start: dt.date | None, end: dt.date | None) -> bool:
        """Whether a window in force from `start` to `end` (None: open) meets the period asked about."""
        if self.at is None:
            return True
        return (start is None or start <= self.at.date()) and (end is None or self.since is None or end >= self.since)


def _end_of_day(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(12, 0), tzinfo=dt.UTC)


def read_time(question: str, *, now: dt.datetime) -> TimeRead | None:
    """When the question asks about (see the module's rules); None for a question about now."""
    text = " ".join(question.split())
    today = now.date()
    moments: list[tuple[dt.date, str, dt.date | None]] = []  # (last day, words, first day)
    taken: list[tuple[int, int]] = []
    for match in ISO_DATE_RE.finditer(text):
        try:
            day = dt.date(int(match[1]), int(match[2]), int(match[3]))
            moments.append((day, match[0], None if BEFORE_RE.search(text[: match.start()]) else day))
            taken.append(match.span())
        except ValueError:
            continue
    for match in MONTH_YEAR_RE.finditer(text):
        year, month = int(match[2]), MONTHS[match[1].lower()]
        before = BEFORE_RE.search(text[: match.start()])
        day = dt.date(year, month, 1) - dt.timedelta(days=1) if before else dt.date(
            year, month, calendar.monthrange(year, month)[1])  # fmt: skip
        moments.append((day, match[0], None if before else dt.date(year, month, 1)))
        taken.append(match.span())
    for match in YEAR_RE.finditer(text):
        if any(start <= match.start() < end for start, end in taken):
            continue
        year = int(match[1])
        before = BEFORE_RE.search(text[: match.start()])
        moments.append((dt.date(year - 1, 12, 31) if before else dt.date(year, 12, 31), match[0],
                        None if before else dt.date(year, 1, 1)))  # fmt: skip
    past = [(day, words, first) for day, words, first in moments
            if day < today and not (day.year == today.year and words.isdigit())]  # fmt: skip
    earlier = EARLIER_RE.search(text)
    changed = WHY_WHEN_RE.search(text) and CHANGE_RE.search(text)
    if past:
        day, words, first = min(past, key=lambda moment: moment[0])
        both = len({moment[0] for moment in moments}) > 1 or bool(PRESENT_RE.search(text))
        return TimeRead(at=_end_of_day(day), history=both or bool(earlier), reason=words, since=first)
    if earlier or changed:
        return TimeRead(history=True, reason=(earlier or changed)[0], earlier=bool(earlier),  # type: ignore[index]
                        original=bool(ORIGINAL_RE.search(text)))  # fmt: skip
    return None
