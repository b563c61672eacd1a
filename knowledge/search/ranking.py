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


def definition_names(query: str) -> list[str]:
    """The names a question mentions that a definition may carry: `Client.send` gives Client.send and send. A name
    written with a capital is matched as written (SCHEMA is not the class Schema), one written in lower case
    matches any case (definitions are indexed both ways). An option (--force) or a header (X-Api-Key) is not a
    definition's name."""
    names: list[str] = []
    for found in identifiers(query):
        token = re.sub(r"\(.*$", "", found.strip().strip("`")).strip()
        if not re.fullmatch(r"[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*", token):
            continue
        for name in (token.replace("::", "."), re.split(r"\.|::", token)[-1]):
            if len(name) >= 3 and name not in names:
                names.append(name)
    return names


TEST_PATH_RE = re.compile(r"(^|/)(tests?|__tests__|spec)/|(^|/)test_[^/]*$|_test\.\w+$|\.(spec|test)\.\w+$")
TESTS_ASKED_RE = re.compile(r"\b(tests?|tested|testing|fixtures?|spec|pruebas?)\b", re.IGNORECASE)


def is_test_path(key: str) -> bool:
    """A test file's key: tests/…, test_x.py, x_test.go, x.spec.ts."""
    return bool(TEST_PATH_RE.search(key.replace(":", "/")))


def mentions_tests(query: str) -> bool:
    return bool(TESTS_ASKED_RE.search(query))
