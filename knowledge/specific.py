"""Retrieve specific: intent sub-queries for operational questions, fused, then an intent re-rank.

Rule-based and cheap: no model call. For "where is X implemented" the code leg is searched on
its own; identifiers in the question (`X-Api-Key`, `snake_case`, `CamelCase`, `A::B`) get a
lexical-heavy sub-query of their own, and chunks that contain them verbatim are lifted; for
"how do I configure X" a configuration-flavoured sub-query is added; for pending work, the
backlog vocabulary. The rounds are fused by RRF (the original question weighs most).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from knowledge.models import Chunk
from knowledge.ranking import identifiers, rrf_merge
from knowledge.vectorstore import RRF_K, Scope
from tenants.models import Tenant

CODE_INTENT = re.compile(
    r"(\bwhere (is|are|does)\b.*\b(implemented|defined|computed|checked|handled|done)\b"
    r"|\b(which|what) (function|method|class|helper|module)\b|\bin the (code|source)\b"
    r"|\bd[oó]nde (est[aá]|se) (implementad|definid))",
    re.IGNORECASE,
)
CONFIG_INTENT = re.compile(
    r"\b(configur\w*|setting|option|enable|disable|default|set up|parameter|variable|ajust\w*|opci[oó]n|"
    r"activar|desactivar|por defecto)\b",
    re.IGNORECASE,
)
PENDING_INTENT = re.compile(
    r"\b(pending|todo|to-do|backlog|next steps?|open (issues|tasks|items)|roadmap|remaining|pendiente\w*|"
    r"tareas?)\b",
    re.IGNORECASE,
)
STOPWORDS = set(
    "a an and are as at be by can do does for from how i in is it its of on or the to what when where which who why "
    "with you your should would there this that these those into about el la los las de del en y o que como cómo "
    "para por un una se es con qué cuál dónde".split()
)  # fmt: skip


@dataclass
class SubQuery:
    text: str
    weight: float
    mode: str | None = None


def plan(query: str) -> tuple[list[SubQuery], dict[str, object]]:
    subs = [SubQuery(query, 1.0)]
    idents = identifiers(query)
    intent = {
        "code": bool(CODE_INTENT.search(query)),
        "config": bool(CONFIG_INTENT.search(query)),
        "pending": bool(PENDING_INTENT.search(query)),
        "identifiers": idents,
    }
    keywords = " ".join(w for w in re.findall(r"[\w\-.:]+", query) if w.lower() not in STOPWORDS)
    if idents:
        subs.append(SubQuery(" ".join(idents), 0.8))
    if intent["code"]:
        subs.append(SubQuery(keywords or query, 0.7, mode="code"))
    if intent["config"]:
        subs.append(SubQuery(f"{keywords} configuration setting default value", 0.5))
    if intent["pending"]:
        subs.append(SubQuery(f"{keywords} TODO FIXME pending backlog next steps", 0.6))
    return subs, intent


def specific_rounds(
    tenant: Tenant, query: str, scope: Scope, limit: int, one_round: Callable
) -> tuple[list[tuple[str, float, dict]], dict[str, int], dict[str, int], dict[str, float], Callable[[Chunk], float]]:
    subs, intent = plan(query)
    rankings: list[tuple[list[str], float]] = []
    payloads: dict[str, dict] = {}
    dense_rank: dict[str, int] = {}
    lexical_rank: dict[str, int] = {}
    similarity: dict[str, float] = {}
    for number, sub in enumerate(subs):
        sub_scope = scope if sub.mode is None or scope.mode else replace(scope, mode=sub.mode)
        ranked, dense, lexical, scores = one_round(tenant, sub.text, sub_scope, limit)
        if number == 0:
            similarity = dict(scores)  # similarity to the question itself, not to a sub-query
        rankings.append(([point for point, _, _ in ranked], sub.weight))
        for point, _, payload in ranked:
            payloads.setdefault(point, payload)
        if number == 0:
            dense_rank, lexical_rank = dense, lexical
    fused = rrf_merge(rankings)
    ordered = sorted(fused.items(), key=lambda item: item[1], reverse=True)[:limit]
    ranked = [(point, score, payloads[point]) for point, score in ordered]
    lowered = [i.lower() for i in intent["identifiers"]]  # type: ignore[union-attr]

    def rerank(chunk: Chunk) -> float:
        # Concrete lines beat general descriptions: reward the literal identifier, the code for
        # "where is it implemented", list items for pending work.
        bonus = 0.0
        text = chunk.text.lower()
        if lowered and any(identifier in text for identifier in lowered):
            bonus += 0.5 / (RRF_K + 1)
        if intent["code"] and chunk.mode == "code":
            bonus += 0.3 / (RRF_K + 1)
        if intent["pending"] and re.search(r"(?im)^\s*(?:[-*] \[ \]|[-*]|todo|fixme)\b", chunk.text):
            bonus += 0.3 / (RRF_K + 1)
        return bonus

    return ranked, dense_rank, lexical_rank, similarity, rerank
