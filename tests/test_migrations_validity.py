"""Upgrading an install from before validity existed loses nothing: every document is in force as before, the
versions get the windows they were served in, and once the indexer has passed, as-of reads pick the right version
(real ingested documents, a real edit, a real store whose points carry no windows)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.utils import timezone

from knowledge.index import indexer
from knowledge.index.vectorstore import WINDOW_FIELDS
from knowledge.ingest import pipeline
from knowledge.models import Document, DocumentVersion
from knowledge.search.retrieval import RetrieveFilters, retrieve
from tenants.principals import Viewer
from tests.factories import make_folder_source, make_tenant, rewrite_points_without

QUESTION = "How much does express delivery cost?"


@pytest.mark.django_db(transaction=True)
def test_an_install_from_before_validity_upgrades_with_nothing_lost(tmp_path):
    tenant = make_tenant(slug="acme", name="Acme")
    root = tmp_path / "shop"
    source = make_folder_source(tenant=tenant, root=root, name="shop",
                                files={"shipping.md": "# Shipping\n\nExpress delivery costs 12 euros.\n"})  # fmt: skip
    indexer.drain()
    between = timezone.now()
    (root / "shipping.md").write_text("# Shipping\n\nExpress delivery costs 15 euros.\n")
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()
    rewrite_points_without(WINDOW_FIELDS)
    call_command("migrate", "knowledge", "0009", verbosity=0)
    call_command("migrate", verbosity=0)  # the upgrade

    old, new = DocumentVersion.objects.order_by("version")
    assert old.served_from and old.served_until and new.served_from and new.served_until is None
    assert Document.objects.get().needs_sync  # its points await their windows
    viewer = Viewer.everything(tenant)
    before_pass = retrieve(viewer=viewer, query=QUESTION, top_k=3)
    assert [h.chunk.document_version.version for h in before_pass] == [2]  # in force, as before the upgrade
    indexer.drain()  # the web server's first pass after the upgrade
    assert not Document.objects.get().needs_sync
    then = retrieve(viewer=viewer, query=QUESTION, top_k=3, filters=RetrieveFilters(as_of=between))
    assert [h.chunk.document_version.version for h in then] == [1] and "12 euros" in then[0].text
    assert [h.chunk.document_version.version for h in retrieve(viewer=viewer, query=QUESTION, top_k=3)] == [2]
