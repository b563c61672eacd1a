"""What a read returns: a located, ranked excerpt (`RetrievedChunk`), the filters a read takes, and where an
excerpt is (its label and page)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from knowledge.index.lexical import query_vector
from knowledge.index.vectorstore import Scope
from knowledge.models import Chunk, Status
from knowledge.validity import Freshness
from tenants.models import Tenant


def location_label(*, document_key: str, line_start: int | None, line_end: int | None, page: int | None,
                   heading: str = "") -> str:  # fmt: skip
    """Where an excerpt comes from, for citations: "docs/install.md, lines 12-40, Install › Linux"."""
    where = [document_key]
    if page:
        where.append(f"page {page}")
    elif line_start:
        where.append(f"lines {line_start}-{line_end or line_start}")
    if heading:
        where.append(heading)
    return ", ".join(where)


def page_of(chunk: Chunk, text: str) -> int | None:
    """The page of a chunk on which `text` (a query, a claim) sits: for a chunk that spans pages, the page
    whose part of the chunk shares the most terms with it (ties: the earlier page); else the chunk's page."""
    spans = chunk.page_spans or []
    if len(spans) < 2:
        return chunk.page
    wanted = set(query_vector(text)[0])
    bounds = [*(int(s[0]) for s in spans[1:]), len(chunk.text)]
    best, best_shared = spans[0][1], 0
    for (start, number, _), end in zip(spans, bounds, strict=True):
        shared = len(wanted & set(query_vector(chunk.text[int(start) : end])[0]))
        if shared > best_shared:
            best, best_shared = number, shared
    return best


@dataclass(kw_only=True)
class RetrievedChunk:
    chunk: Chunk
    score: float
    dense_rank: int | None = None
    lexical_rank: int | None = None
    multilingual_rank: int | None = None
    boost: float = 0.0
    tags: list[str] = field(default_factory=list)
    similarity: float | None = None  # cosine similarity of the dense leg, when it found the chunk
    page: int | None = None  # the page the matching text is on (a chunk may span pages); None: the chunk's
    rerank: float | None = None  # the cross-encoder's logit, when the hit was reranked
    defines: list[str] = field(default_factory=list)  # names of the question this chunk defines (code)
    freshness: Freshness | None = None  # is what it says still true (knowledge/validity.py)
    table: dict[str, Any] | None = None  # the table the chunk shows, which an answer can compute over

    @property
    def location_page(self) -> int | None:
        return self.page if self.page is not None else self.chunk.page

    @property
    def text(self) -> str:
        return self.chunk.text

    @property
    def label(self) -> str:
        return self.label_at(self.location_page)

    def label_at(self, page: int | None) -> str:
        """Where the chunk sits, naming `page` (a chunk spanning pages is cited at the page of its cited text)."""
        chunk = self.chunk
        return location_label(
            document_key=chunk.document.display_key, line_start=chunk.line_start, line_end=chunk.line_end,
            page=page, heading=chunk.heading,
        )  # fmt: skip

    @property
    def signals(self) -> dict[str, float | int | None]:
        signals: dict[str, float | int | None] = {
            "dense_rank": self.dense_rank, "lexical_rank": self.lexical_rank, "boost": round(self.boost, 6),
        }  # fmt: skip
        if self.multilingual_rank is not None:
            signals["multilingual_rank"] = self.multilingual_rank
        if self.rerank is not None:
            signals["rerank"] = round(self.rerank, 4)
        if self.defines:
            signals["defines"] = ", ".join(self.defines)  # type: ignore[assignment]
        return signals


@dataclass
class RetrieveFilters:
    source_ids: list[str] | None = None
    tags: list[str] | None = None
    mode: str = "auto"
    statuses: list[str] = field(default_factory=lambda: [Status.ACTIVE])
    critical_only: bool = False
    document_ids: list[str] | None = None  # within these documents only (a curation item's named document)
    as_of: dt.datetime | None = None  # what was in force then (knowledge/validity.py); None: now
    include_expired: bool = False  # also documents not in force (expired, superseded, not yet valid), marked
    # Documents whose stated window covers this past instant and that no document in force then supersedes, in
    # their current versions (a question about 2025 reads the 2025 policy, though it was loaded this year).
    in_force_at: dt.datetime | None = None

    def scope(self, tenant: Tenant) -> Scope:
        return Scope(
            tenant=str(tenant.public_id),  # from the caller, never from the request body
            statuses=list(self.statuses),
            source_ids=self.source_ids,
            document_ids=self.document_ids,
            tags=self.tags or None,
            mode=self.mode if self.mode in ("documental", "code") else None,
            critical_only=self.critical_only,
        )
