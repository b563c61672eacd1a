"""Frontmatter is metadata: out of the chunks, the excerpts and the citations; the title and the validity still come
from it (issue 50: the `--- title … supersedes … ---` block showed in every excerpt of a policy, and a chunk's
heading read "valid_until: 2025-12-31")."""

from __future__ import annotations

from django.core.management import call_command

from knowledge.models import Chunk, Document, Source
from knowledge.search.retrieval import RetrieveFilters, retrieve
from tenants.principals import Viewer
from tests.factories import make_folder_source

POLICY = """---
title: Travel policy 2025
valid_from: 2025-01-01
valid_until: 2025-12-31
tags: [travel]
---
Trains are booked in second class for every trip under four hours.

## Hotels

A hotel night costs at most 140 euros in every city of the country.
"""

HUGO = """+++
title = "Expense rules"
draft = false
+++
Receipts are scanned within seven days of the purchase.
"""


def _assert_no_header(tenant) -> None:  # type: ignore[no-untyped-def]
    chunks = list(Chunk.objects.for_tenant(tenant))
    assert chunks
    for chunk in chunks:
        assert "valid_until" not in chunk.text and "valid_until" not in chunk.heading
        assert not chunk.text.lstrip().startswith(("---", "+++")) and "draft = false" not in chunk.text


def test_a_markdown_policy_is_chunked_without_its_frontmatter_and_keeps_its_title_and_validity(tenant_a, tmp_path):
    make_folder_source(tenant=tenant_a, root=tmp_path / "policies", files={"travel.md": POLICY, "expenses.md": HUGO})
    _assert_no_header(tenant_a)
    travel = Document.objects.get(document_key="travel.md")
    version = travel.versions.get()
    assert version.title == "Travel policy 2025"  # from the header, not "valid_until: 2025-12-31"
    assert version.stated["valid_until"] == "2025-12-31" and version.stated["valid_from"] == "2025-01-01"
    assert Document.objects.get(document_key="expenses.md").versions.get().title == "Expense rules"

    hit = retrieve(viewer=Viewer.everything(tenant_a), query="hotel night price limit", top_k=1,
                   filters=RetrieveFilters(include_expired=True))[0]  # fmt: skip
    assert hit.chunk.heading == "Hotels" and "140 euros" in hit.chunk.text
    # The body keeps the file's line numbers: "A hotel night …" is line 10 of travel.md.
    assert hit.chunk.line_start is not None and hit.chunk.line_start <= 10 <= hit.chunk.line_end


def test_a_vault_note_is_chunked_without_its_frontmatter_and_keeps_its_tags(tenant_a, tmp_path):
    root = tmp_path / "vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / "Travel.md").write_text(POLICY)
    (root / "Index.md").write_text("# Index\n\n![[Travel#Hotels]]\n")
    call_command("ingest", "acme", str(root), "--source", "vault")
    assert Source.objects.get().kind == "obsidian"
    _assert_no_header(tenant_a)
    note = Document.objects.get(document_key="Travel.md")
    version = note.versions.get()
    assert version.title == "Travel policy 2025" and version.stated["valid_until"] == "2025-12-31"
    assert list(note.tags.values_list("name", flat=True)) == ["travel"]
    index = Chunk.objects.get(document__document_key="Index.md")
    assert "140 euros" in index.text and "valid_until" not in index.text
