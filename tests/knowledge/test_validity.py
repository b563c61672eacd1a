"""Validity, supersession, freshness and as-of reads, with real files, the real pipeline and a real Qdrant Edge store.

The company's refund policy changed: `refunds-2025.md` was in force through 2025, `refunds-2026.md` supersedes it
from 2026-01-01. A price list was edited (version 1, then version 2); a future policy starts next year.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.models import Document, DocumentEvent
from knowledge.search.retrieval import RetrieveFilters, retrieve
from knowledge.validity import parse_instant
from tenants.principals import Viewer
from tests.factories import make_folder_source

TODAY = dt.date.today()
LAST_YEAR, THIS_YEAR = TODAY.year - 1, TODAY.year
REVIEW_BY = TODAY + dt.timedelta(days=90)
OLD_POLICY = f"""---
valid_from: {LAST_YEAR}-01-01
valid_until: {LAST_YEAR}-12-31
---
# Refund policy 2025

Customers may ask for a refund within 14 days of purchase.
"""
NEW_POLICY = f"""---
valid_from: {THIS_YEAR}-01-01
supersedes: refunds-2025.md
review_by: {REVIEW_BY}
---
# Refund policy 2026

Customers may ask for a refund within 30 days of purchase.
"""
QUESTION = "Within how many days may customers ask for a refund?"


def _sync(source, root):  # type: ignore[no-untyped-def]
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()


def _keys(hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.chunk.document.document_key for h in hits]


@pytest.fixture
def policies(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "policies"
    source = make_folder_source(
        tenant=tenant_a, root=root, name="policies",
        files={"refunds-2025.md": OLD_POLICY, "refunds-2026.md": NEW_POLICY},
    )  # fmt: skip
    indexer.drain()
    return source, root


def test_the_successor_is_served_and_the_superseded_policy_is_not(policies, tenant_a):  # type: ignore[no-untyped-def]
    viewer = Viewer.everything(tenant_a)
    hits = retrieve(viewer=viewer, query=QUESTION, top_k=5)
    assert "refunds-2026.md" in _keys(hits) and "refunds-2025.md" not in _keys(hits)
    new = Document.objects.get(document_key="refunds-2026.md")
    old = Document.objects.get(document_key="refunds-2025.md")
    assert new.supersedes_id == old.pk and new.valid_from == dt.date(THIS_YEAR, 1, 1)
    freshness = hits[_keys(hits).index("refunds-2026.md")].freshness
    assert freshness["status"] == "current" and freshness["review_by"] == REVIEW_BY.isoformat()

    everything = retrieve(viewer=viewer, query=QUESTION, top_k=5, filters=RetrieveFilters(include_expired=True))
    statuses = {h.chunk.document.document_key: h.freshness["status"] for h in everything}
    assert statuses["refunds-2025.md"] == "expired" and statuses["refunds-2026.md"] == "current"


def test_as_of_serves_what_was_in_force_then(policies, tenant_a):  # type: ignore[no-untyped-def]
    viewer = Viewer.everything(tenant_a)
    then = RetrieveFilters(as_of=parse_instant(f"{LAST_YEAR}-06-01"))
    hits = retrieve(viewer=viewer, query=QUESTION, top_k=5, filters=then)
    assert _keys(hits) == ["refunds-2025.md"]
    assert hits[0].freshness["status"] == "current"


def test_as_of_before_an_edit_reads_the_first_version(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "prices"
    source = make_folder_source(
        tenant=tenant_a, root=root, files={"prices.md": "# Prices\n\nThe basic plan costs 9 euros a month.\n"}
    )
    indexer.drain()
    between = timezone.now()
    (root / "prices.md").write_text("# Prices\n\nThe basic plan costs 12 euros a month.\n")
    _sync(source, root)
    viewer = Viewer.everything(tenant_a)
    before = retrieve(
        viewer=viewer, query="How much is the basic plan?", top_k=3, filters=RetrieveFilters(as_of=between)
    )
    after = retrieve(viewer=viewer, query="How much is the basic plan?", top_k=3)
    assert [h.chunk.document_version.version for h in before] == [1] and "9 euros" in before[0].text
    assert [h.chunk.document_version.version for h in after] == [2] and "12 euros" in after[0].text
    kinds = list(
        DocumentEvent.objects.filter(document__document_key="prices.md").values_list(
            "kind", "old_version", "new_version"
        )
    )
    assert kinds == [("added", None, 1), ("changed", 1, 2)]


def test_supersession_follows_the_successor(policies, tenant_a):  # type: ignore[no-untyped-def]
    """The points carry their successor's window: a successor not yet in force supersedes nothing yet, a retired
    one supersedes nothing any more; the vector query follows each change once the indexer has passed."""
    from knowledge import services

    viewer = Viewer.everything(tenant_a)
    old, new = (
        Document.objects.get(document_key="refunds-2025.md"),
        Document.objects.get(document_key="refunds-2026.md"),
    )
    services.document_set_validity(tenant=tenant_a, document=old, changes={"valid_until": None}, actor="t")
    indexer.drain()
    assert _keys(retrieve(viewer=viewer, query=QUESTION, top_k=5)) == ["refunds-2026.md"]  # superseded, not expired
    services.document_set_validity(tenant=tenant_a, document=new, changes={"valid_from": f"{THIS_YEAR + 1}-01-01"},
                                   actor="t")  # fmt: skip
    # Before the indexer's pass: what leaves force does so at once (by id); what comes back waits for the payloads.
    assert "refunds-2026.md" not in _keys(retrieve(viewer=viewer, query=QUESTION, top_k=5))
    indexer.drain()
    hits = retrieve(viewer=viewer, query=QUESTION, top_k=5)
    assert _keys(hits) == ["refunds-2025.md"] and hits[0].freshness["status"] == "current"
    services.document_set_validity(tenant=tenant_a, document=new, changes={"valid_from": None}, actor="t")
    indexer.drain()
    assert _keys(retrieve(viewer=viewer, query=QUESTION, top_k=5)) == ["refunds-2026.md"]
    services.documents_retire(tenant=tenant_a, documents=Document.objects.filter(pk=new.pk), actor="t")
    indexer.drain()
    assert _keys(retrieve(viewer=viewer, query=QUESTION, top_k=5)) == ["refunds-2025.md"]


def test_a_document_not_yet_valid_is_served_from_its_first_day(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    tomorrow = TODAY + dt.timedelta(days=1)
    make_folder_source(
        tenant=tenant_a,
        root=tmp_path / "desk",
        files={"desk.md": f"---\nvalid_from: {tomorrow}\n---\n# Returns desk\n\nThe returns desk moves to Lyon.\n"},
    )
    indexer.drain()
    viewer = Viewer.everything(tenant_a)
    assert retrieve(viewer=viewer, query="Where is the returns desk?") == []
    then = retrieve(viewer=viewer, query="Where is the returns desk?",
                    filters=RetrieveFilters(as_of=parse_instant(f"{tomorrow}T09:00:00")))  # fmt: skip
    assert _keys(then) == ["desk.md"] and then[0].freshness["status"] == "current"
    marked = retrieve(viewer=viewer, query="Where is the returns desk?", filters=RetrieveFilters(include_expired=True))
    assert marked[0].freshness["status"] == "not_yet_valid"
