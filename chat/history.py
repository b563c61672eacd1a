"""What an excerpt says about time, for a question about the past (knowledge/search/when.py decides which questions
those are): when its version was in force and which version it is, and what that version changed, in the document's
own words (removed and added lines; for a git file, the commit's date, author and message). Human-written evidence
only: nothing here is generated."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.utils import timezone

from chat import wording
from knowledge.claims import SENTENCE_RE, SPECIFIC_OR_NUMBER_RE, fold, specifics
from knowledge.models import Document, Status
from knowledge.search.retrieval import RetrievedChunk, RetrieveFilters, retrieve
from knowledge.selectors import version_get
from knowledge.terms import question_terms
from tenants.principals import Viewer


def when_label(hit: RetrievedChunk) -> str:
    """When an excerpt was in force, for a question about the past: its stated window, else the time its version
    was served, and for a git file the commit that made it; "superseded" or "expired" when it is not in force now."""
    version, document = hit.chunk.document_version, hit.chunk.document
    start = version.valid_from or document.valid_from
    end = version.valid_until or document.valid_until
    parts = []
    if start or end:
        parts.append(f"in force {start or 'always'} to {end or 'now'}")
    elif version.served_from:
        until = f"to {version.served_until:%Y-%m-%d}" if version.served_until else "to now"
        parts.append(f"in force {version.served_from:%Y-%m-%d} {until}")
    if document.version > 1 or version.version > 1:  # a document with history: which of its versions this is
        names = [name for name, holds in (("the first version", version.version == 1),
                                          ("the current version", version.version == document.version),
                                          ("the version before the current one",
                                           version.version == document.version - 1)) if holds]  # fmt: skip
        order = ", ".join(names) or "an earlier version"
        parts.append(f"version {version.version} of {max(document.version, version.version)}, {order}")
    commit = version.commit or {}
    if commit.get("sha"):
        parts.append(f"commit {str(commit['sha'])[:8]} of {_day(commit.get('date'))}")
    status = hit.freshness["status"] if hit.freshness else "current"
    if status in ("superseded", "expired", "not_yet_valid"):
        parts.append(status.replace("_", " "))
    return "; ".join(parts)


def window_of(hit: RetrievedChunk) -> tuple[dt.date | None, dt.date | None]:
    """When the excerpt's version was in force, as (first day, last day), None where open: its stated window;
    else, for a document with several versions, the days its version was served (the first version's start is
    open: the knowledge base does not know since when it held). A lone version with no stated window: always."""
    version, document = hit.chunk.document_version, hit.chunk.document
    start, end = version.valid_from or document.valid_from, version.valid_until or document.valid_until
    if start or end:
        return start, end
    if document.version > 1 or version.version > 1:
        served = version.served_from.date() if version.served_from and version.version > 1 else None
        return served, version.served_until.date() if version.served_until else None
    return None, None


def version_of(hit: RetrievedChunk) -> dict[str, object]:
    """Which version of its document a cited excerpt is, for the citation: its number (of how many), the window in
    which it was in force, and the commit that made it (a git file)."""
    version, document = hit.chunk.document_version, hit.chunk.document
    start, end = window_of(hit)
    commit = version.commit or {}
    return {
        "version": version.version, "versions": max(document.version, version.version),
        "in_force": {"from": start.isoformat() if start else None, "until": end.isoformat() if end else None},
        **({"commit": {"sha": str(commit["sha"]), "date": _day(commit.get("date"))[:10],
                       "author": str(commit.get("author") or "")}} if commit.get("sha") else {}),
    }  # fmt: skip


def is_current(hit: RetrievedChunk, today: dt.date | None = None) -> bool:
    """Whether the excerpt is what its document says now: its latest version, of a document nothing supersedes,
    whose stated window covers today (the read's freshness speaks of the instant asked about, not of today)."""
    version, document = hit.chunk.document_version, hit.chunk.document
    today = today or timezone.localdate()
    start, end = version.valid_from or document.valid_from, version.valid_until or document.valid_until
    return (
        version.version >= document.version and version.served_until is None and document.status != Status.SUPERSEDED
        and (start is None or start <= today) and (end is None or end >= today)
    )  # fmt: skip


def has_history(hit: RetrievedChunk) -> bool:
    """Whether the excerpt's document has another state to tell apart: earlier versions, or a document it
    supersedes or that supersedes it."""
    document = hit.chunk.document
    return document.version > 1 or hit.chunk.document_version.version > 1 or document.supersedes_id is not None or (
        hit.freshness is not None and hit.freshness["status"] == "superseded")  # fmt: skip


WORD_RE = re.compile(r"[^\W_]{3,}")
MAX_CHANGED_LINES = 4  # lines removed and added, each, in a change note


def changed_lines(hit: RetrievedChunk, viewer: Viewer | None) -> tuple[list[str], list[str]]:
    """The lines the excerpt's version removed and added since the version before it (a few of each), when the viewer
    may read that version (an earlier version may carry text its reader may not see: models.VersionCarry)."""
    version, document = hit.chunk.document_version, hit.chunk.document
    previous = None
    if version.version > 1 and viewer is not None:
        previous = version_get(viewer=viewer, document=document, version=version.version - 1)
    if previous is None:
        return [], []
    old = "\n".join(previous.chunks.order_by("index").values_list("text", flat=True)).splitlines()
    new = "\n".join(version.chunks.order_by("index").values_list("text", flat=True)).splitlines()
    gone = [line.strip()[:200] for line in old if line.strip() and line not in new]
    came = [line.strip()[:200] for line in new if line.strip() and line not in old]
    return gone[:MAX_CHANGED_LINES], came[:MAX_CHANGED_LINES]


def change_note(hit: RetrievedChunk, question: str, changed: tuple[list[str], list[str]] | None = None) -> str:
    """What the version an excerpt comes from changed, in the document's own words: the lines it had before and has
    after, and for a git file the commit's date, author and message (human-written evidence of why and when; the
    message only when what changed shares a word with the question, so the reason of one change is never offered
    for another). "" for a first version that is no commit."""
    version = hit.chunk.document_version
    commit = version.commit or {}
    removed, added = changed if changed is not None else ([], [])
    text = ""
    if removed or added:
        before, after = (" / ".join(lines).rstrip(".") or "nothing" for lines in (removed, added))
        text = f" Before this change: {before}. After it: {after}."
    if commit.get("sha"):
        message = " ".join(str(commit.get("message") or "").split())
        words = {w.lower() for w in WORD_RE.findall(question.replace("_", " "))}
        touched = {w.lower() for w in WORD_RE.findall(" ".join(removed + added).replace("_", " "))}
        why = f" Message: {message.rstrip('.')}." if message and (words & touched or not (removed or added)) else ""
        return f"Commit of {_day(commit.get('date'))} by {commit.get('author') or 'unknown'}.{why}{text}"
    if text and version.served_from:
        return f"Version {version.version} of {_day(version.served_from.date().isoformat())}.{text}"
    return ""


def _day(value: object) -> str:
    """An ISO date as "2026-04-01 (1 April 2026)": an answer may write it either way."""
    text = str(value or "")[:10]
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        return text
    return f"{text} ({day.day} {day:%B %Y})"


# --- a question about now, answered from a value that changed: what it was before -----------------------------------


@dataclass(frozen=True)
class EarlierState:
    """What a document said before the change that brought the value an answer states: the text, verbatim (the
    lines the change replaced, or the superseded document's sentence), the day of the change, and the hit to cite."""

    text: str
    day: dt.date
    hit: RetrievedChunk


def earlier_state(viewer: Viewer, hit: RetrievedChunk, claim: str) -> EarlierState | None:
    """For a claim about now resting on `hit`: what was there before, when the value the claim states came with the
    document's latest change (an edit in place, a commit) or with the document that superseded another. None when
    the excerpt is not current, its document has no earlier state, or the value was the same before."""
    if not is_current(hit):
        return None
    version, document = hit.chunk.document_version, hit.chunk.document
    values = [fold(token) for token in specifics(claim)]
    if not values:
        return None
    if version.version > 1:
        removed, added = changed_lines(hit, viewer)
        if not removed or not all(value in fold(" ".join(added)) for value in values):
            return None  # the claim's value did not come with the latest change
        changed_at = version.served_from or timezone.now()
        filters = RetrieveFilters(document_ids=[document.document_id], as_of=changed_at - dt.timedelta(seconds=1))
        before = retrieve(viewer=viewer, query=claim, top_k=1, filters=filters)
        if not before:
            return None
        return EarlierState(text=" / ".join(removed), day=changed_at.date(), hit=before[0])
    if document.supersedes_id is None:
        return None
    predecessor = Document.objects.filter(pk=document.supersedes_id).first()
    if predecessor is None or not viewer.sees(predecessor.reader_list):
        return None
    filters = RetrieveFilters(document_ids=[predecessor.document_id], include_expired=True,
                              statuses=[Status.ACTIVE, Status.SUPERSEDED])  # fmt: skip
    before = retrieve(viewer=viewer, query=claim, top_k=1, filters=filters)
    if not before:
        return None
    sentences = [s for s in SENTENCE_RE.split(before[0].chunk.text) if s.strip() and not s.lstrip().startswith("#")]
    terms = question_terms(SPECIFIC_OR_NUMBER_RE.sub(" ", claim))
    scored = [(len(terms & question_terms(s)), s) for s in sentences]
    shared, sentence = max(scored, default=(0, ""), key=lambda pair: pair[0])
    if shared < max(2, len(terms) // 2) or all(value in fold(sentence) for value in values):
        return None  # no sentence of the same thing, or it said the same
    day = version.valid_from or document.valid_from or (version.served_from or timezone.now()).date()
    return EarlierState(text=" ".join(sentence.split()), day=day, hit=before[0])


def earlier_note(state: EarlierState, language: str) -> str:
    document = state.hit.chunk.document.display_key
    return wording.earlier_note(language, day=_day(state.day.isoformat()), document=document, text=state.text)
