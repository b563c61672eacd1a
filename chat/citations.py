"""Citations: where a cited sentence sits (page, version, freshness, the note a vault embed came from), the note
that cited evidence is not current, what a document said before its last change, and the excerpts shown when no
model is available."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat import history, wording
from chat.excerpts import Sources
from knowledge.claims import (
    Claim,
)
from knowledge.links import embedded_source
from knowledge.search.hits import RetrievedChunk, page_of
from knowledge.selectors import embedded_origin
from tenants.principals import Viewer

EXTRACTIVE_EXCERPT_CHARS = 400


def citation_of(n: int, hit: RetrievedChunk, cited_text: str = "") -> dict[str, Any]:
    """A citation; its page is the one the cited sentences' support sits on (a chunk may span pages). Text a vault
    note embeds from another note is cited to that note, with the note it was read in as `embedded_in`."""
    chunk = hit.chunk
    page = page_of(chunk, cited_text) if cited_text else hit.location_page
    citation = {"n": n, **chunk.location(page=page), "label": hit.label_at(page), "freshness": hit.freshness,
                **history.version_of(hit)}  # fmt: skip
    embedded = embedded_source(chunk.text, cited_text) if cited_text and "[Embedded from " in chunk.text else ""
    if embedded:
        document = chunk.document
        origin = embedded_origin(document=document, key=embedded)
        if origin is not None:
            citation["embedded_in"] = {"document_id": document.document_id, "document_key": document.display_key}
            citation.update(document_id=origin.document_id, document_key=origin.display_key, title=origin.title,
                            label=f"{origin.display_key} (embedded in {hit.label_at(page)})")  # fmt: skip
    return citation


def stale_note(citations: list[dict[str, Any]], claims: list[dict[str, Any]], language: str) -> str:
    """When cited evidence is not current (due a review; or expired, superseded, not yet valid, when the read asked
    for those too): each claim standing on it says which status, and the answer gets a sentence saying so."""
    status_of = {c["n"]: (c.get("freshness") or {}).get("status", "current") for c in citations}
    for claim in claims:
        stale = sorted({status_of[n] for n in claim.get("citations", []) if status_of.get(n, "current") != "current"})
        if stale:
            claim["evidence_status"] = stale
    stale_citations = [c for c in citations if status_of[c["n"]] != "current"]
    if not stale_citations:
        return ""
    docs = ", ".join(dict.fromkeys(c["document_key"] for c in stale_citations))
    statuses = {status_of[c["n"]] for c in stale_citations}
    if statuses == {"review_due"}:
        dates = sorted(str((c.get("freshness") or {}).get("review_by") or "") for c in stale_citations)
        return wording.stale_review_due(language, docs=docs, date=dates[0])
    return wording.stale_other(language, docs=docs, status=", ".join(sorted(s.replace("_", " ") for s in statuses)))


def extractive_answer(excerpts: list[RetrievedChunk], language: str) -> tuple[str, list[dict[str, Any]]]:
    lines = [wording.no_model(language)]
    for n, hit in enumerate(excerpts[:3], 1):
        text = " ".join(hit.chunk.text.split())
        if len(text) > EXTRACTIVE_EXCERPT_CHARS:
            text = text[: EXTRACTIVE_EXCERPT_CHARS - 1].rsplit(" ", 1)[0] + "…"
        lines.append(f"[{n}] {text}")
    return "\n\n".join(lines), [citation_of(n, hit) for n, hit in enumerate(excerpts[:3], 1)]


MAX_EARLIER_NOTES = 2


def earlier_notes(viewer: Viewer, claims: Sequence[Claim], sources: Sources, cited: int,
                  language: str) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
    """For the supported claims of an answer about now: what their document said before the change that brought
    the value they state (chat/history.py), each a sentence with its own citation, numbered after the excerpts
    (`cited`: how many the model read), with the earlier text (no excerpt card holds it)."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for claim in claims:
        for n in claim.citations if claim.supported else []:
            hit = sources.excerpts[n - 1]
            if hit.chunk.document.document_id in seen or len(out) == MAX_EARLIER_NOTES:
                continue
            state = history.earlier_state(viewer, hit, claim.text)
            if state is None:
                continue
            seen.add(hit.chunk.document.document_id)
            citation = citation_of(cited + len(out) + 1, state.hit, state.text)
            out.append((history.earlier_note(state, language), {**citation, "text": state.hit.chunk.text}))
    return out


# --- a refusal that shows where to look -------------------------------------------------------
