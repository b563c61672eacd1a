"""Rank fusion and identifier spotting: shared by plain retrieval and the specific re-rank (neither imports
the other's internals, so the two modules form no cycle)."""

from __future__ import annotations

import re
from collections import defaultdict

from knowledge.index.vectorstore import RRF_K


def rrf_merge(rankings: list[tuple[list[str], float]]) -> dict[str, float]:
    """Reciprocal Rank Fusion of several rankings, each with a weight: Σ w / (k + rank)."""
    scores: dict[str, float] = defaultdict(float)
    for ranking, weight in rankings:
        for rank, point in enumerate(ranking, 1):
            scores[point] += weight / (RRF_K + rank)
    return scores


IDENTIFIER_RE = re.compile(
    r"`([^`]{2,80})`"  # anything in backticks
    r"|(?<![\w-])(--?[a-z][a-z0-9]*(?:-[a-z0-9]+)*)"  # command-line options: --exclude-patterns
    r"|\b([A-Za-z][A-Za-z0-9]*(?:_|::|\.)[A-Za-z0-9]+(?:(?:_|::|\.|-)[A-Za-z0-9]+)*)\b"  # snake_case, a.b, A::B-C
    r"|\b(_[A-Za-z0-9_]+)\b"  # _private_names
    r"|\b([A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)\b"  # X-Api-Key, Content-Type (not "built-in")
    r"|\b([a-z]+[A-Z][A-Za-z0-9]*)\b"  # camelCase
    r"|\b([A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\b"  # PascalCase with an inner capital
    r"|\b([A-Z][A-Z0-9_]{3,})\b"  # CONSTANT_NAMES
)


def identifiers(query: str) -> list[str]:
    found = []
    for match in IDENTIFIER_RE.finditer(query):
        token = next(group for group in match.groups() if group)
        if token not in found:
            found.append(token)
    return found
