"""Content gaps: the questions a tenant's knowledge could not answer (refused: not found, no evidence, not verified)
or answered wrong (a 👎), grouped by meaning, each group sent to someone who can close it.

How groups are made. Each question is embedded once with the embedder already loaded — its multilingual leg when
the tenant has one, so "¿cuántos días de permiso…?" and "how many days of leave…" meet. A new question joins the
open (or written, or closed: it reopens) gap whose centre is nearest, when the cosine similarity is at least
RAG_GAP_JOIN (0.55). The questions that join none are grouped among themselves by average-linkage clustering
(scipy.cluster.hierarchy, cosine distance): the tree is cut where the average similarity between two groups falls
below RAG_GAP_LINK (0.40), so the number of groups is not chosen in advance — it is the number of groups that hold
together at that similarity. A group becomes a gap once RAG_GAP_MIN_ASKED (2) questions are in it; a question alone
waits for a second. Both thresholds were chosen on one half of a planted set and checked on the other half
(bench/insights.py).

Who closes it. The owner of the nearest document — the one whose sentence bears most on the question (its own owner,
else its source's); when no sentence bears on it (NEAR), or it has no owner, the tenant's admins. The gap's draft is
built only from sentences that exist, verbatim, in the passages the retriever returned, those that bear most on the
representative question, each cited; when none does, the draft says that no source says this."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Count, F, Q
from django.utils import timezone

from chat.focus import relevance, split_units
from chat.models import AnswerRecord
from inference.embedders import get_embedder
from insights.models import Gap, GapQuestion
from knowledge import selectors
from knowledge.models import Document
from tenants.models import Membership, Tenant
from tenants.principals import Viewer

REFUSED = ("not_found", "no_evidence", "not_verified")
# A sentence bears on a question when its relevance (lexical overlap plus the multilingual embedding's similarity, as
# the answer's focus step ranks sentences) is at least this: "the office has a bicycle room" is 0.48 from "where can I
# park at the office?", "employees park in garage B" 0.67 (and 1.47 from "is there parking for employees?").
NEAR = 0.5
DRAFT_SENTENCES = 3
BATCH = 64
MAX_WAITING = 3000  # the questions alone that are clustered again at each refresh (the most recent)


@dataclass
class Refreshed:
    questions: int = 0  # new questions read
    joined: int = 0  # joined an existing gap
    gaps_made: int = 0
    reopened: int = 0


def _embed(texts: list[str]) -> np.ndarray:
    embedder = get_embedder()
    embed = getattr(embedder, "embed_multilingual", None) or embedder.embed
    out = [np.asarray(embed(texts[i : i + BATCH]), dtype=np.float32) for i in range(0, len(texts), BATCH)]
    vectors = np.vstack(out) if out else np.zeros((0, 1), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def candidates(tenant: Tenant) -> Any:
    """The answers not yet read that were refused, or that someone marked wrong."""
    wrong = Q(status__in=REFUSED) | Q(verdicts__helpful=False)
    seen = GapQuestion.objects.filter(tenant=tenant).values("answer_id")
    return AnswerRecord.objects.for_tenant(tenant).filter(wrong).exclude(pk__in=seen).distinct().order_by("pk")


def refresh(tenant: Tenant, *, only: list[int] | None = None) -> Refreshed:
    """Read the new refused and 👎 questions into gaps (the worker runs it every few minutes); `only`: of these answers
    (a benchmark replaying a month)."""
    done = Refreshed()
    found = candidates(tenant) if only is None else candidates(tenant).filter(pk__in=only)
    new = list(found.values_list("pk", "question", "created_at", "channel", "groups")[:5000])
    if new:
        vectors = _embed([question for _pk, question, *_rest in new])
        rows = [
            GapQuestion(
                tenant=tenant,
                answer_id=pk,
                question=question,
                asked_at=at,
                door=door,
                groups=groups,
                embedding=[round(float(x), 5) for x in vector],
            )
            for (pk, question, at, door, groups), vector in zip(new, vectors, strict=True)
        ]
        GapQuestion.objects.bulk_create(rows, ignore_conflicts=True)
        done.questions = len(rows)
    touched: set[int] = set()
    gaps = list(Gap.objects.filter(tenant=tenant))
    waiting = list(GapQuestion.objects.filter(tenant=tenant, gap__isnull=True).order_by("-asked_at")[:MAX_WAITING])
    if gaps and waiting:
        centres = np.array([gap.centroid for gap in gaps], dtype=np.float32)
        sims = np.array([q.embedding for q in waiting], dtype=np.float32) @ centres.T
        for question, row in zip(waiting, sims, strict=True):
            best = int(np.argmax(row))
            if row[best] >= settings.RAG_GAP_JOIN:
                question.gap = gaps[best]
                question.save(update_fields=["gap"])
                touched.add(gaps[best].pk)
                done.joined += 1
        waiting = [q for q in waiting if q.gap_id is None]
    for members in _clusters(waiting):
        gap = Gap.objects.create(
            tenant=tenant,
            representative=members[0].question,
            first_asked_at=members[0].asked_at,
            last_asked_at=members[0].asked_at,
        )
        GapQuestion.objects.filter(pk__in=[q.pk for q in members]).update(gap=gap)
        touched.add(gap.pk)
        done.gaps_made += 1
    # Answers the tenant's retention deleted took their questions with them: a gap left with none goes (unless its
    # owner wrote its text), the others are counted again.
    Gap.objects.filter(tenant=tenant, questions__isnull=True).exclude(state=Gap.State.WRITTEN).delete()
    touched |= set(
        Gap.objects.filter(tenant=tenant)
        .annotate(n=Count("questions"))
        .exclude(asked=F("n"))
        .values_list("pk", flat=True)
    )
    for gap in Gap.objects.filter(pk__in=touched):
        if gap.state == Gap.State.CLOSED:
            gap.state, gap.closed_at = Gap.State.OPEN, None  # asked again, and refused again: it is not closed
            done.reopened += 1
        summarise(gap)
    return done


def _clusters(waiting: list[GapQuestion]) -> list[list[GapQuestion]]:
    """Average-linkage groups of the waiting questions, cut at RAG_GAP_LINK; only those of RAG_GAP_MIN_ASKED or more."""
    if len(waiting) < max(2, settings.RAG_GAP_MIN_ASKED):
        return []
    from scipy.cluster.hierarchy import fcluster, linkage

    vectors = np.array([q.embedding for q in waiting], dtype=np.float64)
    tree = linkage(vectors, method="average", metric="cosine")
    labels = fcluster(tree, t=1.0 - settings.RAG_GAP_LINK, criterion="distance")
    groups: dict[int, list[GapQuestion]] = {}
    for question, label in zip(waiting, labels, strict=True):
        groups.setdefault(int(label), []).append(question)
    return [members for members in groups.values() if len(members) >= settings.RAG_GAP_MIN_ASKED]


def summarise(gap: Gap) -> None:
    """The gap's figures from its questions: centre, representative, counts, groups and doors, what was nearest, its
    owner (unless an admin chose one) and its draft."""
    questions = list(gap.questions.select_related("answer"))
    if not questions:
        return
    vectors = np.array([q.embedding for q in questions], dtype=np.float32)
    centre = vectors.mean(axis=0)
    centre /= np.linalg.norm(centre) or 1.0
    representative = questions[int(np.argmax(vectors @ centre))]
    gap.centroid = [round(float(x), 5) for x in centre]
    gap.asked = len(questions)
    gap.first_asked_at = min(q.asked_at for q in questions)
    gap.last_asked_at = max(q.asked_at for q in questions)
    gap.doors = dict(Counter(q.door for q in questions))
    gap.groups = dict(Counter(g for q in questions for g in q.groups.split()))
    changed = gap.representative != representative.question or not gap.draft
    gap.representative = representative.question
    if changed:
        hits = _open_hits(gap.tenant, representative.answer)
        gap.nearest = _nearest(hits)
        gap.draft = _draft(representative.question, hits)
        if not gap.owner_id:
            gap.owner = _owner(gap.tenant_id, gap.draft)
    gap.save()


def _open_hits(tenant: Tenant, answer: AnswerRecord) -> list[dict[str, Any]]:
    """The answer's hits from documents the whole tenant may read, decided by the one resolver for a viewer holding
    only `tenant`: a gap's page (its owner need not read what the asker could) and its draft (which becomes a document
    of the tenant's upload source, open to all) never carry a restricted document's text."""
    hits = [h for h in answer.hits if isinstance(h, dict)]
    ids = {str(h.get("document_id")) for h in hits}
    everyone = Viewer(tenant=tenant, principals=frozenset({"tenant"}))
    open_ids = set(
        selectors.visible_documents(everyone).filter(document_id__in=ids).values_list("document_id", flat=True)
    )
    return [h for h in hits if str(h.get("document_id")) in open_ids]


def _nearest(hits: list[dict[str, Any]]) -> dict[str, Any]:
    if not hits:
        return {}
    top = hits[0]
    keys = ("document_id", "document_key", "title", "source_id", "score")
    return {**{k: top.get(k) for k in keys}, "text": str(top.get("text", ""))[:400]}


def _owner(tenant_id: int, draft: dict[str, Any]) -> Any:
    """The owner of the document whose sentence bears most on the question (its own owner, else its source's); None
    when no sentence bears on it (the admins)."""
    sentences = draft.get("sentences") or []
    if not sentences:
        return None
    found = Document.objects.filter(tenant_id=tenant_id, document_id=sentences[0].get("document_id"))
    document = found.select_related("source__owner", "owner").first()
    if document is None:
        return None
    owner = document.owner or document.source.owner
    if owner is None or not Membership.objects.filter(tenant_id=tenant_id, user=owner).exists():
        return None  # one who left the tenant closes nothing: the admins
    return owner


def _draft(question: str, open_hits: list[dict[str, Any]]) -> dict[str, Any]:
    """The sentences that exist, verbatim, in the passages the retriever returned (from documents all may read) and
    bear most on the question (lexical overlap plus embedding similarity, as the answer's focus step ranks them),
    each cited; or none."""
    hits = open_hits[:5]
    sentences: list[tuple[str, dict[str, Any]]] = []
    for hit in hits:
        for unit in split_units(str(hit.get("text", "")).rstrip("…"), code=False):
            if len(unit.text.split()) >= 4:
                sentences.append((unit.text.strip(), hit))
    if not sentences:
        return {"sentences": [], "none": True}
    scores = relevance(question, [s for s, _ in sentences], _embed)
    best = [i for i in np.argsort(-scores)[:DRAFT_SENTENCES] if scores[i] >= NEAR]
    if not best:
        return {"sentences": [], "none": True}
    cited = []
    for i in best:
        text, hit = sentences[int(i)]
        cited.append(
            {
                "text": text,
                "document_id": hit.get("document_id"),
                "document_key": hit.get("document_key"),
                "version": hit.get("version"),
                "chunk_id": hit.get("chunk_id"),
            }
        )
    return {"sentences": cited, "none": False}


def open_gaps(tenant: Tenant, *, user: Any = None, admin: bool = True) -> Any:
    """The gaps an admin sees (all), or an owner (theirs)."""
    gaps = Gap.objects.for_tenant(tenant).select_related("owner")
    return gaps if admin else gaps.filter(owner=user)


def opened_and_closed(tenant: Tenant, days: list[dt.date]) -> dict[dt.date, tuple[int, int]]:
    """Per day: gaps opened (made) and closed."""
    opened = Counter(
        timezone.localdate(at) for at in Gap.objects.for_tenant(tenant).values_list("created_at", flat=True)
    )
    closed = Counter(
        timezone.localdate(at)
        for at in Gap.objects.for_tenant(tenant).filter(closed_at__isnull=False).values_list("closed_at", flat=True)
    )
    return {day: (opened.get(day, 0), closed.get(day, 0)) for day in days}
