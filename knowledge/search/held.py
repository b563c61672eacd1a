"""What an agent's session already holds (agent_sessions/): a held chunk is not counted among a read's top_k;
the read goes deeper instead and lists the held chunks it matched."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from knowledge.index.vectorstore import Hit
from knowledge.models import Chunk
from knowledge.search.hits import RetrievedChunk


@dataclass(frozen=True)
class HeldMatch:
    """A chunk the session holds that a read matched: its rank among everything the read matched (1 = first)."""

    rank: int
    chunk_id: str
    document_id: str


@dataclass
class Held:
    """What an agent's session already holds (agent_sessions/), by chunk id and text: an unchanged chunk of a
    newer version is still held, an edited one is new. retrieve() does not count a held chunk among its top_k: it
    reads deeper instead, and lists in `matched` each held chunk the query matched before its last new hit.

    The session's ledger is asked with indexed queries, however long it is: `points` — which candidate points it was
    given (the same chunk and version), set aside before any SQL row is read — and, for the documents `renewed`
    since it was given chunks of them (asked once), `texts` — for the rows read, which (chunk id, text) pairs it
    holds (a newer version's unchanged chunk)."""

    points: Any = None  # Callable[[list[str]], dict[str, tuple[str, str]]]: point ids → (chunk id, document id)
    texts: Any = None  # Callable[[list[str]], set[tuple[str, str]]]: chunk ids → the (chunk id, text hash) held
    renewed: Any = None  # Callable[[], set[str]]: the document_ids it holds chunks of an older version of
    _renewed: set[str] | None = None
    keys: set[tuple[str, str]] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)  # chunk ids whose texts were asked about
    pointed: set[str] = field(default_factory=set)  # point ids asked about
    skipped: list[tuple[float, str, str]] = field(default_factory=list)  # (score, chunk id, document id)
    matched: list[HeldMatch] = field(default_factory=list)

    def skip(self, scored: list[tuple[Hit, float, list[str]]]) -> list[tuple[Hit, float, list[str]]]:
        """The candidates whose points the session was not given; the others are kept aside with their score."""
        ids = [hit.id for hit, _, _ in scored if hit.id not in self.pointed]
        given = self.points(ids) if ids and self.points is not None else {}
        self.pointed |= set(ids)
        self.skipped = [(hit.score + boost, *given[hit.id]) for hit, boost, _ in scored if hit.id in given]
        return [item for item in scored if item[0].id not in given]

    def learn(self, chunks: Any) -> None:
        """Rows read: ask about the points no `skip` asked about (an answer's hits, a summary's source chunks), and
        about the texts (once each chunk id) of documents it holds chunks of an older version of."""
        chunks = list(chunks)
        if not chunks:
            return
        unasked = [c for c in chunks if c.point_id not in self.pointed]
        if unasked and self.points is not None:
            given = self.points([c.point_id for c in unasked])
            self.keys |= {(c.chunk_id, c.content_hash) for c in unasked if c.point_id in given}
            self.pointed |= {c.point_id for c in unasked}
        if self._renewed is None:
            self._renewed = self.renewed() if self.renewed is not None else set()
        new = {c.chunk_id for c in chunks if c.document.document_id in self._renewed} - self.asked
        if new and self.texts is not None:
            self.keys |= self.texts(sorted(new))
        self.asked |= new

    def holds(self, chunk: Chunk) -> bool:
        return (chunk.chunk_id, chunk.content_hash) in self.keys


MAX_HELD_DEPTH = 400  # candidates read past the first round for a session's held chunks, at most


def first_new(results: list[RetrievedChunk], count: int, held: Held | None) -> list[RetrievedChunk]:
    """The shortest head of `results` with `count` chunks not held (all of it when it has fewer)."""
    if held is None:
        return results[:count]
    taken = 0
    for position, result in enumerate(results):
        if not held.holds(result.chunk):
            taken += 1
            if taken == count:
                return results[: position + 1]
    return results


def new_count(results: list[RetrievedChunk], held: Held | None) -> int:
    return len(results) if held is None else sum(1 for r in results if not held.holds(r.chunk))


def without_held(results: list[RetrievedChunk], top_k: int, held: Held | None) -> list[RetrievedChunk]:
    """The first top_k chunks not held; the held ones ranked among them, whether skipped by their point or read and
    found held by their text, go to `held.matched` with their rank among all of them."""
    if held is None:
        return results[:top_k]
    kept: list[RetrievedChunk] = []
    merged: list[tuple[float, str, str] | RetrievedChunk] = []
    for result in results:
        if len(kept) == top_k:
            break
        if held.holds(result.chunk):
            merged.append((result.score, result.chunk.chunk_id, result.chunk.document.document_id))
        else:
            kept.append(result)
            merged.append(result)
    floor = kept[-1].score if len(kept) == top_k else float("-inf")  # held ones ranked above the last new hit
    merged += [item for item in held.skipped if item[0] >= floor]
    merged.sort(key=lambda item: item[0] if isinstance(item, tuple) else item.score, reverse=True)  # stable
    held.matched = [HeldMatch(rank, item[1], item[2]) for rank, item in enumerate(merged, 1)
                    if isinstance(item, tuple)]  # fmt: skip
    return kept
