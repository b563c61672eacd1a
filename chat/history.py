"""What an excerpt says about time, for a question about the past (knowledge/search/when.py decides which questions
those are): when its version was in force and which version it is, and what that version changed, in the document's
own words (removed and added lines; for a git file, the commit's date, author and message). Human-written evidence
only: nothing here is generated."""

from __future__ import annotations

import datetime as dt
import re

from knowledge.search.retrieval import RetrievedChunk


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


WORD_RE = re.compile(r"[^\W_]{3,}")
MAX_CHANGED_LINES = 4  # lines removed and added, each, in a change note


def change_note(hit: RetrievedChunk, question: str) -> str:
    """What the version an excerpt comes from changed, in the document's own words: the lines removed and added
    since the version before it, and for a git file the commit's date, author and message (human-written evidence
    of why and when; the message only when what changed shares a word with the question, so the reason of one
    change is never offered for another). "" for a first version that is no commit."""
    version, document = hit.chunk.document_version, hit.chunk.document
    commit = version.commit or {}
    previous = document.versions.filter(version=version.version - 1).first() if version.version > 1 else None
    removed: list[str] = []
    added: list[str] = []
    if previous is not None:
        old = "\n".join(previous.chunks.order_by("index").values_list("text", flat=True)).splitlines()
        new = "\n".join(version.chunks.order_by("index").values_list("text", flat=True)).splitlines()
        gone, came = [line for line in old if line.strip() and line not in new], [
            line for line in new if line.strip() and line not in old]  # fmt: skip
        removed, added = [line.strip()[:200] for line in gone[:MAX_CHANGED_LINES]], [
            line.strip()[:200] for line in came[:MAX_CHANGED_LINES]]  # fmt: skip
    changed = ""
    if removed or added:
        changed = f" It changed {' / '.join(removed) or 'nothing'} to {' / '.join(added) or 'nothing'}."
    if commit.get("sha"):
        message = " ".join(str(commit.get("message") or "").split())
        words = {w.lower() for w in WORD_RE.findall(question.replace("_", " "))}
        touched = {w.lower() for w in WORD_RE.findall(" ".join(removed + added).replace("_", " "))}
        why = f" Message: {message}" if message and (words & touched or not (removed or added)) else ""
        return f"Commit of {_day(commit.get('date'))} by {commit.get('author') or 'unknown'}.{changed}{why}"
    if changed and version.served_from:
        return f"Version {version.version} of {_day(version.served_from.date().isoformat())}.{changed}"
    return ""


def _day(value: object) -> str:
    """An ISO date as "2026-04-01 (1 April 2026)": an answer may write it either way."""
    text = str(value or "")[:10]
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        return text
    return f"{text} ({day.day} {day:%B %Y})"
