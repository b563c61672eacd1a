"""Contradictions between current documents become curation items: real files, the real pipeline and store, the
lexical search that finds the other document, the queue page and its one-click resolutions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from feedback.conflicts import conflicting, first_conflict, scan_pending, statements
from feedback.models import Conflict
from knowledge.index import indexer
from knowledge.models import Document
from tests.factories import make_folder_source, make_member

SET = Path(__file__).resolve().parents[2] / "bench" / "data" / "conflicts.jsonl"


def test_the_rule_keeps_its_precision_on_the_written_set():
    rows = [json.loads(line) for line in SET.read_text().splitlines() if line]
    found = [(first_conflict(r["a"], r["b"]) is not None, r["conflict"]) for r in rows]
    true_positives = sum(f and c for f, c in found)
    assert true_positives / sum(f for f, _ in found) >= 0.8
    assert sum(c for _, c in found) >= 10 and sum(not c for _, c in found) >= 20


def test_a_value_is_read_with_its_unit_and_what_it_names():
    [statement] = statements("Uploads are limited to 10 MB per file.")
    assert (statement.value, statement.unit, statement.shown) == (10.0, "mb/file", "10 MB")
    [price] = statements("The Pro plan costs 49 euros a month.")
    assert price.unit == "eur/month" and "pro" in price.terms
    assert not conflicting(*statements("The Free plan allows 10 MB uploads. The Pro plan allows 25 MB uploads."))


@pytest.fixture
def kb(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    files = {
        "handbook.md": "# Handbook\n\n## Uploads\n\nUploads are limited to 10 MB per file.\n\n"
                       "## Plans\n\nThe Free plan includes 5 GB of storage.\n",
        "plans.md": "# Plans\n\nThe Pro plan includes 50 GB of storage.\n",
    }  # fmt: skip
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=files, name="kb")
    indexer.drain()
    scan_pending()
    return source, tmp_path / "kb"


def test_a_new_document_that_contradicts_a_current_one_is_queued_and_resolved(kb, tenant_a, admin_a):  # type: ignore[no-untyped-def]
    from knowledge.ingest import pipeline

    source, root = kb
    assert not Conflict.objects.exists()  # the Free and the Pro plan are two things
    (root / "upload-limits.md").write_text("# Upload limits\n\nThe maximum upload size is 25 MB per file.\n")
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()
    assert scan_pending() == 1
    conflict = Conflict.objects.get()
    assert (conflict.document.document_key, conflict.other.document_key) == ("upload-limits.md", "handbook.md")
    assert (conflict.value, conflict.other_value) == ("25 MB", "10 MB")
    assert scan_pending() == 0  # read once

    client = Client()
    client.force_login(admin_a)
    page = client.get(f"/t/{tenant_a.slug}/curation/")
    assert b"Contradictions" in page.content and b"upload-limits.md" in page.content
    staff = Client()
    staff.force_login(make_member(tenant_a, username="sam"))
    url = f"/t/{tenant_a.slug}/contradictions/{conflict.public_id}/"
    assert staff.post(url, {"action": "dismiss"}).status_code == 404
    assert client.post(url, {"action": "document_supersedes"}).status_code == 302
    conflict.refresh_from_db()
    assert conflict.state == "resolved" and conflict.resolved_by == admin_a.get_username()
    assert Document.objects.get(document_key="upload-limits.md").supersedes.document_key == "handbook.md"
    assert b"Contradictions" not in client.get(f"/t/{tenant_a.slug}/curation/").content


POLICY_2025 = ("---\nvalid_from: 2025-01-01\nvalid_until: 2025-12-31\n---\n# Travel policy 2025\n\n"
               "The per diem for travel is 42 euros a day.\n\nThe hotel allowance is 120 euros a night.\n")  # fmt: skip
POLICY_2026 = ("---\nvalid_from: 2026-01-01\nsupersedes: travel-2025.md\n---\n# Travel policy 2026\n\n"
               "The per diem for travel is 55 euros a day.\n\nThe hotel allowance is 140 euros a night.\n")  # fmt: skip


def test_a_declared_supersession_is_no_contradiction_no_review_item_and_shows_on_the_pages(tenant_a, admin_a, tmp_path):  # type: ignore[no-untyped-def]
    """A 2026 policy that says it supersedes the 2025 one (and a 2027 draft further down the chain): the values
    differ on purpose. No contradiction item in either direction or at any distance, the superseded policy is not
    on the review list, and the document list and page say it is not in force beside "Active"."""
    from feedback.review import review_items
    from tenants.principals import Viewer

    files = {"travel-2025.md": POLICY_2025, "travel-2026.md": POLICY_2026}
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "policies", files=files, name="policies")
    indexer.drain()
    scan_pending()
    assert not Conflict.objects.exists()
    # Three steps down the chain, found later: still one lineage.
    from knowledge.ingest import pipeline

    (tmp_path / "policies" / "travel-2027.md").write_text(POLICY_2026.replace("2026", "2027").replace(
        "supersedes: travel-2025.md", "supersedes: travel-2026.md").replace("55 euros", "60 euros"))  # fmt: skip
    pipeline.sync_folder(source=source, root=tmp_path / "policies")
    indexer.drain()
    scan_pending()
    assert not Conflict.objects.exists()
    # A conflict found before the supersession was declared leaves the queue once it is.
    from feedback.conflicts import open_conflicts

    old, new = Document.objects.get(document_key="travel-2025.md"), Document.objects.get(document_key="travel-2027.md")
    Conflict.objects.create(tenant=tenant_a, document=new, other=old, subject="diem per travel", value="60 euros",
                            other_value="42 euros", sentence="…", other_sentence="…")  # fmt: skip
    assert not list(open_conflicts(viewer=Viewer.everything(tenant_a)))
    assert old.pk not in {item.document.pk for item in review_items(viewer=Viewer.everything(tenant_a))}
    client = Client()
    client.force_login(admin_a)
    listing = client.get(f"/t/{tenant_a.slug}/documents/").content.decode()
    row = listing.split("travel-2025.md", 1)[1].split("</tr>", 1)[0]
    assert "Not in force today" in row and ("expired" in row or "superseded" in row)  # never plainly "Active"
    assert "Not in force" not in listing.split("travel-2026.md", 1)[1].split("</tr>", 1)[0]  # in force today
    assert "not yet valid" in listing.split("travel-2027.md", 1)[1].split("</tr>", 1)[0]  # from 2027 on
    page = client.get(f"/t/{tenant_a.slug}/documents/{old.public_id}/").content.decode()
    assert "not in force today" in page


def test_a_note_quoting_another_raises_no_contradiction_with_it_or_itself(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    """Issue 67's rough edge: a vault note embedding another (its text carried over) raised "contradictions" of one
    sentence with itself, its two values on both sides."""
    sentence = "The daily per diem is 42 EUR within Spain and 70 EUR abroad."
    assert first_conflict(sentence, sentence) is None
    files = {"per-diem.md": f"# Per diem\n\n{sentence}\n", "travel.md": f"# Travel\n\n![[per-diem]]\n\n{sentence}\n"}
    make_folder_source(tenant=tenant_a, root=tmp_path / "vault", files=files, name="vault")
    indexer.drain()
    scan_pending()
    assert not Conflict.objects.filter(tenant=tenant_a).exists()
    assert first_conflict(sentence, "The daily per diem is 45 EUR within Spain.") is not None  # still a contradiction
