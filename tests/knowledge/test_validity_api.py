"""Validity at the doors: the document PATCH and page set the fields (bad values get 400s naming them), retrieve
takes as_of and include_expired, the changes feed and the review list return what the fixtures imply, and every
one of them sees only what the caller may see. Real files, the real pipeline, a real Qdrant Edge store."""

from __future__ import annotations

import datetime as dt
import io
import zipfile

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from chat.models import AnswerRecord
from knowledge import services
from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.models import Document, DocumentEvent
from knowledge.search.retrieval import retrieve
from tenants.principals import Viewer
from tenants.services import api_key_issue, group_create
from tests.factories import CommittingClientMixin, make_folder_source, make_member

TODAY = dt.date.today()
YESTERDAY, LAST_MONTH, NEXT_YEAR = TODAY - dt.timedelta(days=1), TODAY - dt.timedelta(days=30), TODAY.year + 1
FILES = {
    "warranty.md": "# Warranty\n\nEvery laptop has a warranty of two years from the day of delivery.\n",
    "shipping.md": f"---\nreview_by: {LAST_MONTH}\n---\n# Shipping\n\nOrders ship within three working days.\n",
    "promo.md": f"---\nvalid_until: {YESTERDAY}\n---\n# Summer promotion\n\nThe summer promotion: 20% off headsets.\n",
    "future.md": f"---\nvalid_from: {NEXT_YEAR}-01-01\n---\n# New returns desk\n\nThe returns desk moves to Lyon.\n",
    "broken.md": "---\nvalid_until: 2026-02-30\nvalid_from: yesterday\n---\n# Broken dates\n\nThe lobby opens at 8.\n",
}


class Client(CommittingClientMixin, APIClient):
    pass


@pytest.fixture
def kb(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files=FILES, name="kb")
    indexer.drain()
    return source, root


def _write_key(tenant):  # type: ignore[no-untyped-def]
    client = Client()
    key = api_key_issue(tenant=tenant, name="w", scope="write", acts_for=["all"])[1]
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def _url(tenant, path: str) -> str:  # type: ignore[no-untyped-def]
    return f"/api/v1/tenants/{tenant.slug}/{path}"


def _doc(key: str) -> Document:
    return Document.objects.get(document_key=key)


def test_what_the_files_state_is_applied_and_what_is_wrong_is_recorded(kb, tenant_a):  # type: ignore[no-untyped-def]
    assert _doc("shipping.md").review_by == LAST_MONTH and _doc("promo.md").valid_until == YESTERDAY
    broken = _doc("broken.md")
    assert broken.status == "active" and broken.valid_until is None and broken.valid_from is None
    problems = " ".join(broken.validity_problems)
    assert "'2026-02-30' is not a date" in problems and "'yesterday' is not a date" in problems

    viewer = Viewer.everything(tenant_a)
    served = {h.chunk.document.document_key for h in retrieve(viewer=viewer, query="promotion headsets returns desk")}
    assert "promo.md" not in served and "future.md" not in served  # expired; not yet valid
    hits = retrieve(viewer=viewer, query="When do orders ship?")
    due = [h for h in hits if h.chunk.document.document_key == "shipping.md"]
    assert due and due[0].freshness["status"] == "review_due"  # served, and marked


def test_office_custom_properties_set_validity(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    from docx import Document as Docx

    buffer = io.BytesIO()
    word = Docx()
    word.add_paragraph("Travel expenses are reimbursed within ten days of the claim.")
    word.save(buffer)
    custom = ('<?xml version="1.0" encoding="UTF-8"?><Properties xmlns="http://schemas.openxmlformats.org/officeDocument/'
              '2006/custom-properties" xmlns:vt="http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes">'
              f'<property fmtid="{{D5CDD505-2E9C-101B-9397-08002B2CF9AE}}" pid="2" name="valid_until"><vt:lpwstr>'
              f'{NEXT_YEAR}-06-30</vt:lpwstr></property></Properties>')  # fmt: skip
    with zipfile.ZipFile(buffer, "a") as bundle:
        bundle.writestr("docProps/custom.xml", custom)
    source = services.source_default_get(tenant=tenant_a)
    pipeline.ingest_files(source=source, files=[("travel.docx", buffer.getvalue())])
    indexer.drain()
    assert _doc("travel.docx").valid_until == dt.date(NEXT_YEAR, 6, 30)


def test_patch_and_page_set_the_same_fields_and_bad_values_get_400s(kb, tenant_a, admin_a):  # type: ignore[no-untyped-def]
    client = _write_key(tenant_a)
    warranty, promo = _doc("warranty.md"), _doc("promo.md")
    url = _url(tenant_a, f"documents/{warranty.public_id}/")
    changed = client.patch(url, {"valid_from": "2024-01-01", "review_by": f"{NEXT_YEAR}-01-31",
                                 "supersedes": "promo.md"}, format="json")  # fmt: skip
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert body["valid_from"] == "2024-01-01" and body["review_by"] == f"{NEXT_YEAR}-01-31"
    assert body["supersedes"] == promo.document_id and body["freshness"]["status"] == "current"
    wrongs = [({"valid_until": "2026-02-30"}, "valid_until"), ({"valid_until": "2023-12-31"}, "valid_until"),
              ({"supersedes": "nothing.md"}, "supersedes"), ({"supersedes": "warranty.md"}, "supersedes")]  # fmt: skip
    for wrong, field in wrongs:
        refused = client.patch(url, wrong, format="json")
        assert refused.status_code == 400 and field in refused.json(), (wrong, refused.content)
    cycle = client.patch(_url(tenant_a, f"documents/{promo.public_id}/"), {"supersedes": "warranty.md"}, format="json")
    assert cycle.status_code == 400 and "cycle" in cycle.json()["supersedes"][0]

    page = Client()
    page.force_login(admin_a)
    form = f"/t/{tenant_a.slug}/documents/{warranty.public_id}/validity/"
    saved = page.post(form, {"valid_from": "2024-02-01", "valid_until": "", "review_by": "", "supersedes": "promo.md"})
    assert saved.status_code == 200 and b"2024-02-01" in saved.content
    assert _doc("warranty.md").valid_from == dt.date(2024, 2, 1) and _doc("warranty.md").review_by is None
    bad = page.post(form, {"valid_from": "2024-02-01", "valid_until": "2024-01-01", "review_by": "", "supersedes": ""})
    assert bad.status_code == 400 and b"before valid_from" in bad.content
    staff = Client()
    staff.force_login(make_member(tenant_a, username="sam"))
    assert staff.post(form, {"valid_from": "2020-01-01"}).status_code == 404
    events = DocumentEvent.objects.filter(document=warranty, kind="validity").values_list("actor", flat=True)
    assert list(events)[-1] == admin_a.get_username()


def test_retrieve_takes_as_of_and_include_expired(kb, tenant_a):  # type: ignore[no-untyped-def]
    client = _write_key(tenant_a)
    url = _url(tenant_a, "retrieve/")
    plain = client.post(url, {"query": "summer promotion headsets"}, format="json").json()["hits"]
    assert all(h["document_key"] != "promo.md" for h in plain) and all("freshness" in h for h in plain)
    every = client.post(url, {"query": "summer promotion headsets", "include_expired": True}, format="json").json()
    promo = [h for h in every["hits"] if h["document_key"] == "promo.md"]
    assert promo and promo[0]["freshness"]["status"] == "expired"
    assert promo[0]["freshness"]["valid_until"] == str(YESTERDAY)
    then = client.post(url, {"query": "summer promotion headsets", "as_of": str(YESTERDAY)}, format="json").json()
    assert any(h["document_key"] == "promo.md" for h in then["hits"])
    for bad in ("2026-13-01", "soon", "2026-02-30T10:00"):
        refused = client.post(url, {"query": "promotion", "as_of": bad}, format="json")
        assert refused.status_code == 400 and "as_of" in refused.json(), bad


def test_the_changes_feed_pages_through_what_happened(kb, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    source, root = kb
    started = timezone.now() - dt.timedelta(minutes=5)
    after_load = timezone.now()
    (root / "warranty.md").write_text("# Warranty\n\nEvery laptop has a warranty of three years.\n")
    (root / "future.md").unlink()
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()
    client = _write_key(tenant_a)
    url = _url(tenant_a, "changes/")
    whole = client.get(url, {"since": started.isoformat()}).json()
    kinds = [(c["kind"], c["document"]["document_key"]) for c in whole["changes"]]
    assert ("added", "warranty.md") in kinds and ("changed", "warranty.md") in kinds
    expired_at = timezone.make_aware(dt.datetime.combine(TODAY, dt.time.min))  # the day after its valid_until
    assert ("retired", "future.md") in kinds and (("expired", "promo.md") in kinds) == (expired_at >= started)
    changed = next(c for c in whole["changes"] if c["kind"] == "changed")
    assert (changed["old_version"], changed["new_version"]) == (1, 2)
    recent = client.get(url, {"since": after_load.isoformat()}).json()["changes"]
    assert {c["kind"] for c in recent} == {"changed", "retired"}
    since_yesterday = client.get(url, {"since": str(YESTERDAY - dt.timedelta(days=1))}).json()["changes"]
    assert ("expired", "promo.md") in [(c["kind"], c["document"]["document_key"]) for c in since_yesterday]

    cursor, seen = started.isoformat(), []
    for _ in range(20):
        page = client.get(url, {"since": cursor, "limit": 2}).json()
        seen += [c["cursor"] for c in page["changes"]]
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    assert seen == [c["cursor"] for c in whole["changes"]]  # every change once, in order
    assert client.get(url, {"since": "yesterday-ish"}).status_code == 400
    assert client.get(url).status_code == 400


def test_the_feed_and_the_review_list_show_only_what_the_caller_sees(kb, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    group_create(tenant=tenant_a, name="hr")
    secret_root = tmp_path / "hr"
    pay = f"---\nreview_by: {LAST_MONTH}\n---\n# Pay\n\nBands are secret.\n"
    secret = make_folder_source(tenant=tenant_a, root=secret_root, name="hr", files={"pay.md": pay})
    services.source_set_access(tenant=tenant_a, source=secret, access=["group:hr"])
    indexer.drain()
    reader = Client()
    reader.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, name='r', scope='read')[1]}")
    feed = reader.get(_url(tenant_a, "changes/"), {"since": "2000-01-01"}).json()["changes"]
    assert feed and all(c["document"]["document_key"] != "pay.md" for c in feed)
    assert reader.get(_url(tenant_a, "review/")).status_code == 403  # the review list is the admins'
    admin_view = _write_key(tenant_a).get(_url(tenant_a, "review/")).json()["items"]
    assert "pay.md" in [i["document"]["document_key"] for i in admin_view]


def test_the_review_list_ranks_by_use_and_its_actions_are_recorded(kb, tenant_a, admin_a):  # type: ignore[no-untyped-def]
    shipping, promo, warranty = _doc("shipping.md"), _doc("promo.md"), _doc("warranty.md")
    Document.objects.filter(pk=warranty.pk).update(review_by=LAST_MONTH - dt.timedelta(days=60))  # longer overdue
    hits = [{"document_id": shipping.document_id}, {"document_id": promo.document_id}]
    AnswerRecord.objects.create(tenant=tenant_a, channel="api", question="q", answer="a", status="answered",
                                citations=[{"document_id": shipping.document_id}], hits=hits)  # fmt: skip
    client = _write_key(tenant_a)
    items = client.get(_url(tenant_a, "review/")).json()["items"]
    order = [i["document"]["document_key"] for i in items]
    assert order[:3] == ["shipping.md", "promo.md", "warranty.md"]  # cited, then retrieved, then most overdue
    assert items[0]["cited_30d"] == 1 and items[1]["reason"] == "expired"

    act = _url(tenant_a, f"review/{shipping.public_id}/")
    assert client.post(act, {"action": "still_true"}, format="json").status_code == 400
    assert client.post(act, {"action": "still_true", "days": 90}, format="json").status_code == 200
    reviewed = _doc("shipping.md")
    assert reviewed.review_by == TODAY + dt.timedelta(days=90) and reviewed.reviewed_by.startswith("API key")
    retire = client.post(_url(tenant_a, f"review/{promo.public_id}/"), {"action": "retire"}, format="json")
    assert retire.status_code == 200
    assert _doc("promo.md").status == "retired"
    page = Client()
    page.force_login(admin_a)
    form = {"action": "superseded_by", "successor": "shipping.md"}
    gone = page.post(f"/t/{tenant_a.slug}/review/{warranty.public_id}/", form)
    assert gone.status_code == 302 and _doc("shipping.md").supersedes_id == warranty.pk
    remaining = [i["document"]["document_key"] for i in client.get(_url(tenant_a, "review/")).json()["items"]]
    assert "shipping.md" not in remaining and "promo.md" not in remaining
    kinds = set(DocumentEvent.objects.filter(actor__in=[admin_a.get_username(), reviewed.reviewed_by])
                .values_list("kind", flat=True))  # fmt: skip
    assert {"reviewed", "retired", "validity"} <= kinds


def test_a_source_review_interval_sets_review_dates(kb, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    source, root = kb
    call_command("ingest", tenant_a.slug, str(root), "--source", "kb", "--review-every", "30")
    warranty, shipping = _doc("warranty.md"), _doc("shipping.md")
    assert warranty.review_by == TODAY + dt.timedelta(days=30) and warranty.review_by_origin == "source"
    assert shipping.review_by == LAST_MONTH  # stated by its file: kept
    client = _write_key(tenant_a)
    assert client.patch(_url(tenant_a, f"sources/{source.public_id}/"), {"review_every_days": 0},
                        format="json").status_code == 400  # fmt: skip
    stated = f"{NEXT_YEAR}-03-01"
    assert client.patch(_url(tenant_a, f"documents/{warranty.public_id}/"), {"review_by": stated},
                        format="json").status_code == 200  # fmt: skip
    (root / "warranty.md").write_text("# Warranty\n\nEvery laptop has a warranty of three years.\n")
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()
    assert _doc("warranty.md").version == 2 and str(_doc("warranty.md").review_by) == stated  # a set date is kept
    (root / "shipping.md").write_text("# Shipping\n\nOrders ship within two working days.\n")  # no frontmatter now
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()
    assert _doc("shipping.md").review_by == LAST_MONTH  # stated by an earlier version: kept
    cleared = client.patch(_url(tenant_a, f"sources/{source.public_id}/"), {"review_every_days": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["review_every_days"] is None
    assert _doc("warranty.md").review_by == dt.date.fromisoformat(stated)  # a stated date is not the source's


def test_a_broken_header_is_a_recorded_reason_and_the_batch_goes_on(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    files = {
        "broken-yaml.md": "---\nvalid_until: [2026-01-01\nreview_by: {\n---\n# Lobby\n\nThe lobby opens at 8.\n",
        "after.md": f"---\nvalid_until: {NEXT_YEAR}-12-31\n---\n# Desk\n\nThe desk closes at 6.\n",
    }
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=files, name="kb")
    indexer.drain()
    broken = _doc("broken-yaml.md")
    assert broken.status == "active" and broken.valid_until is None
    assert any("metadata could not be read" in p for p in broken.validity_problems)
    assert _doc("after.md").valid_until == dt.date(NEXT_YEAR, 12, 31)  # the next file of the batch was read as usual
