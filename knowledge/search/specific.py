"""Retrieve specific: intent sub-queries for operational questions, fused, then an intent re-rank.

Rule-based and cheap: no model call. For "where is X implemented" the code leg is searched on
its own; identifiers in the question (`X-Api-Key`, `snake_case`, `CamelCase`, `A::B`) get a
lexical-heavy sub-query of their own, and chunks that contain them verbatim are lifted; for
"how do I configure X" a configuration-flavoured sub-query is added; for pending work, the
backlog vocabulary. knowledge/search/retrieval.py runs the rounds and fuses them by RRF (the original question weighs
most), then adds each chunk's `Plan.bonus`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from knowledge.index.vectorstore import RRF_K
from knowledge.models import Chunk
from knowledge.search.ranking import identifiers

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


@dataclass(kw_only=True)
class Plan:
    """The sub-queries of a specific retrieval (the question first) and what the question asks for."""

    subqueries: list[SubQuery]
    code: bool = False  # "where is X implemented": the code leg on its own, code chunks lifted
    config: bool = False  # "how do I configure X"
    pending: bool = False  # open work: backlog vocabulary, list items lifted
    identifiers: list[str] = field(default_factory=list)  # named in the question: chunks holding them lifted

    def bonus(self, chunk: Chunk) -> float:
        """Concrete lines beat general descriptions: the literal identifier, the code for "where is it
        implemented", list items for pending work."""
        bonus = 0.0
        text = chunk.text.lower()
        if self.identifiers and any(identifier.lower() in text for identifier in self.identifiers):
            bonus += 0.5 / (RRF_K + 1)
        if self.code and chunk.mode == "code":
            bonus += 0.3 / (RRF_K + 1)
        if self.pending and re.search(r"(?im)^\s*(?:[-*] \[ \]|[-*]|todo|fixme)\b", chunk.text):
            bonus += 0.3 / (RRF_K + 1)
        return bonus


def plan(query: str) -> Plan:
    idents = identifiers(query)
    found = Plan(
        subqueries=[SubQuery(query, 1.0)],
        code=bool(CODE_INTENT.search(query)),
        config=bool(CONFIG_INTENT.search(query)),
        pending=bool(PENDING_INTENT.search(query)),
        identifiers=idents,
    )
    keywords = " ".join(w for w in re.findall(r"[\w\-.:]+", query) if w.lower() not in STOPWORDS)
    if idents:
        found.subqueries.append(SubQuery(" ".join(idents), 0.8))
    if found.code:
        found.subqueries.append(SubQuery(keywords or query, 0.7, mode="code"))
    if found.config:
        found.subqueries.append(SubQuery(f"{keywords} configuration setting default value", 0.5))
    if found.pending:
        found.subqueries.append(SubQuery(f"{keywords} TODO FIXME pending backlog next steps", 0.6))
    return found
