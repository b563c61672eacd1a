"""Bootstrap: a start-up context pack for an agent — a map of the domain, every piece traceable.

Built from several internal retrieve rounds (overview, architecture, pending work, history, and
the caller's intent) plus the admin-marked critical pieces, which always come first. Without an
LLM the summary is extractive (the opening of the README / index / best overview excerpt).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePosixPath
from typing import Any

from django.db.models import Count, F, Q

from knowledge.models import RANKING_ONLY_MODES, ChunkLocation, DocumentLink, Status
from knowledge.search.retrieval import RetrievedChunk, RetrieveFilters, retrieve
from knowledge.selectors import live_chunks, live_documents, readers_match
from knowledge.validity import Clock
from tenants.principals import Viewer

PROBES = {
    "overview": "overview introduction what is this about purpose getting started README",
    "architecture": "architecture structure components modules design how it is organised",
    "pending": "TODO pending backlog roadmap next steps open issues known limitations",
    "history": "changelog history release notes changes versions",
}
EXCERPT_CHARS = 320
OVERVIEW_NAMES = ("readme", "index", "overview", "introduction", "intro", "about")


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1].rsplit(" ", 1)[0] + "…"


def _scoped_chunks(viewer: Viewer, filters: RetrieveFilters):
    """The live chunks in scope, of documents in force (unless the caller asked for the others too)."""
    chunks = live_chunks(viewer=viewer, source_ids=filters.source_ids, tags=filters.tags)
    chunks = chunks.exclude(mode__in=RANKING_ONLY_MODES)
    if filters.include_expired:
        return chunks
    return chunks.filter(Clock.for_read(viewer.tenant, filters.as_of).in_force(path="document__"))


def _summary(
    viewer: Viewer, filters: RetrieveFilters, overview: list[RetrievedChunk]
) -> tuple[str, list[ChunkLocation]]:
    chunks = _scoped_chunks(viewer, filters).select_related("document")
    candidates = [
        c for c in chunks.filter(index=0).order_by("document__document_key")[:500]
        if PurePosixPath(c.document.display_key).stem.lower() in OVERVIEW_NAMES
    ]  # fmt: skip
    candidates.sort(key=lambda c: (c.document.display_key.count("/"), len(c.document.display_key)))
    picked = candidates[:1] or [hit.chunk for hit in overview[:1]]
    if not picked:
        return "", []
    text = picked[0].text
    paragraphs = [
        p.strip() for p in re.split(r"\n\s*\n", text) if p.strip() and not p.strip().startswith(("#", "=", "-"))
    ]
    summary = " ".join(paragraphs)[:800] if paragraphs else _excerpt(text)
    return " ".join(summary.split()), [picked[0].location()]


def _topics(viewer: Viewer, filters: RetrieveFilters) -> list[dict[str, Any]]:
    counts: Counter[str] = Counter()
    for heading in _scoped_chunks(viewer, filters).exclude(heading="").values_list("heading", flat=True)[:20000]:
        first = heading.split(" › ")[0].strip()
        if first and not first.startswith(("def ", "class ", "function ", "func ", "fn ")):
            counts[first] += 1
    return [{"topic": topic, "chunks": count} for topic, count in counts.most_common(12)]


def _hubs(viewer: Viewer, filters: RetrieveFilters, limit: int = 5) -> list[dict[str, Any]]:
    """A vault's hub notes: the ones most linked to by other notes the viewer sees (two at least), each with its
    opening chunk. The first thing an agent should read of a vault."""
    counts = (
        DocumentLink.objects.for_tenant(viewer.tenant).filter(resolved__isnull=False, embed=False)
        .filter(readers_match(viewer, path="document__")).exclude(document__status=Status.RETIRED)
        .exclude(resolved_id=F("document_id")).values("resolved_id")
        .annotate(n=Count("document_id", distinct=True)).filter(n__gte=2).order_by("-n", "resolved_id")[: limit * 4]
    )  # fmt: skip
    backlinks = {row["resolved_id"]: row["n"] for row in counts}
    if not backlinks:
        return []
    openings = (
        _scoped_chunks(viewer, filters).filter(document_id__in=list(backlinks), index=0).select_related("document")
    )
    ranked = sorted(openings, key=lambda c: (-backlinks[c.document_id], c.document.document_key))[:limit]
    return [{"chunk": c, "backlinks": backlinks[c.document_id]} for c in ranked]


def bootstrap(*, viewer: Viewer, intent: str = "", filters: RetrieveFilters | None = None, per_probe: int = 3) -> dict:
    filters = filters or RetrieveFilters()
    critical = list(
        _scoped_chunks(viewer, filters)
        .filter(Q(critical=True) | Q(document__critical=True))
        .select_related("document")
        .order_by("document__document_key", "index")[:20]
    )
    critical_points = [{**c.location(), "also": [], "excerpt": _excerpt(c.text)} for c in critical]
    seen = {c.pk for c in critical}
    probes = dict(PROBES)
    if intent.strip():
        probes = {"intent": intent.strip(), **probes}
    items: list[dict[str, Any]] = []
    by_chunk: dict[int, dict[str, Any]] = {c.pk: point for c, point in zip(critical, critical_points, strict=True)}
    follow_up: list[str] = []
    overview: list[RetrievedChunk] = []
    for hub in _hubs(viewer, filters):  # hub notes first: what most of a vault links to
        chunk = hub["chunk"]
        if chunk.pk in seen:
            continue
        seen.add(chunk.pk)
        item = {"kind": "hub", "also": [], **chunk.location(), "excerpt": _excerpt(chunk.text),
                "backlinks": hub["backlinks"]}  # fmt: skip
        items.append(item)
        by_chunk[chunk.pk] = item
    for kind, query in probes.items():
        hits = retrieve(viewer=viewer, query=query, top_k=per_probe + 3, filters=filters)
        if kind == "overview":
            overview = hits
        taken = 0
        for position, hit in enumerate(hits):
            if hit.chunk.pk in seen:
                if position == 0 and hit.chunk.pk in by_chunk:
                    # This probe's best answer is already on the map: say it answers this probe too.
                    by_chunk[hit.chunk.pk]["also"].append(kind)
                continue
            if taken >= per_probe:
                if hit.chunk.document.document_id not in follow_up:
                    follow_up.append(hit.chunk.document.document_id)
                continue
            seen.add(hit.chunk.pk)
            taken += 1
            item = {
                "kind": kind,
                "also": [],
                **hit.chunk.location(),
                "excerpt": _excerpt(hit.chunk.text),
                "score": hit.score,
                "freshness": hit.freshness,
            }
            items.append(item)
            by_chunk[hit.chunk.pk] = item
    summary, summary_refs = _summary(viewer, filters, overview)
    modes = Counter(
        dict(
            _scoped_chunks(viewer, filters)
            .order_by()
            .values_list("mode")
            .annotate(n=Count("pk", distinct=True))
            .values_list("mode", "n")
        )
    )
    total = sum(modes.values())
    if not total:
        mode = "empty"
    elif modes.get("code", 0) >= 0.7 * total:
        mode = "code"
    elif modes.get("documental", 0) >= 0.7 * total:
        mode = "documental"
    else:
        mode = "mixed"
    documents = live_documents(viewer=viewer, source_ids=filters.source_ids, tags=filters.tags)
    return {
        "mode": mode,
        "intent": intent,
        "summary": summary,
        "summary_refs": summary_refs,
        "topics": _topics(viewer, filters),
        "critical_points": critical_points,
        "items": items,
        "follow_up_refs": follow_up[:20],
        "scope": {
            "source_ids": filters.source_ids,
            "tags": filters.tags or [],
            "documents": documents.count(),
            "chunks": total,
        },
    }
