"""An answer's receipt (chat/receipts.py) on a real folder source, the real retriever and the real claim verifier (the
model is the only stand-in: its answer text is given): each claim's evidence is judged against the document as it is
now, as the documents change under it — an edit elsewhere leaves the claim unchanged, a changed value says what it
says now, a restriction tells the asker nothing but "no longer available" — and only the asker and the admins read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.test import TestCase
from rest_framework.test import APIClient

from chat.citations import citation_of
from chat.records import answer_record
from chat.services import Answer
from knowledge import services
from knowledge.claims import EvidenceText, Verifier
from knowledge.ingest import pipeline
from knowledge.models import Document
from knowledge.search.retrieval import retrieve
from tenants.principals import Viewer
from tenants.services import api_key_issue, group_create
from tests.factories import make_folder_source, make_member

QUESTION = "What is the per diem for travel?"
TRAVEL = "# Travel\n\nThe per diem for travel is 42 EUR a day.\n\nTrains are booked through the travel portal.\n"


def _answer(tenant, who: dict[str, Any]):  # type: ignore[no-untyped-def]
    """An answer as the answer flow records it: real hits and citations, the claim checked by the real verifier."""
    hits = retrieve(viewer=Viewer.everything(tenant), query=QUESTION, top_k=3)
    hits = [hit for hit in hits if hit.chunk.document.document_key == "travel.md"][:1]
    citations = [citation_of(1, hits[0])]
    claims = Verifier([EvidenceText(text=hits[0].chunk.text, units=[])]).check("The per diem is 42 EUR a day [1].")
    assert claims[0].supported and claims[0].quotes
    result = Answer(answer="The per diem is 42 EUR a day [1].", generated=True, model="test", status="answered",
                    citations=citations, hits=hits, claims=[c.as_dict() for c in claims])  # fmt: skip
    return answer_record(viewer=Viewer.everything(tenant), question=QUESTION, result=result, channel="api", **who)


def _resync(source, root: Path, text: str) -> None:  # type: ignore[no-untyped-def]
    (root / "travel.md").write_text(text)
    with TestCase.captureOnCommitCallbacks(execute=True):
        pipeline.sync_folder(source=source, root=root)


def _receipt(client: APIClient, record) -> tuple[int, Any]:  # type: ignore[no-untyped-def]
    response = client.get(f"/api/v1/tenants/acme/answers/{record.public_id}/receipt/")
    return response.status_code, response.json()


def test_a_receipt_says_what_each_claims_evidence_is_now_as_the_documents_change(tenant_a, admin_a, tmp_path):
    root = tmp_path / "kb"
    source = make_folder_source(
        tenant=tenant_a, root=root, files={"travel.md": TRAVEL, "leave.md": "# Leave\n\n27 days.\n"}
    )
    hanna = make_member(tenant_a, username="hanna")
    record = _answer(tenant_a, {"user": hanna})
    asker = APIClient()
    asker.force_login(hanna)

    status, receipt = _receipt(asker, record)
    assert status == 200 and receipt["question"] == QUESTION and receipt["door"] == "api"
    assert receipt["asked_by"] == "hanna" and {"document_id", "version"} <= set(receipt["documents_read"][0])
    claim = receipt["claims"][0]
    assert claim["now"] == "unchanged" and "42 EUR" in claim["evidence"][0]["sentence"]
    assert claim["evidence"][0]["document_key"] == "travel.md" and claim["evidence"][0]["version"] == 1

    _resync(source, root, TRAVEL.replace("travel portal", "new travel portal"))  # an edit elsewhere
    claim = _receipt(asker, record)[1]["claims"][0]
    assert claim["now"] == "unchanged" and claim["version_now"] == 2

    _resync(source, root, TRAVEL.replace("42 EUR", "45 EUR"))
    claim = _receipt(asker, record)[1]["claims"][0]
    assert claim["now"] == "changed" and "45 EUR" in claim["changed_to"] and claim["still_holds"] is False

    group_create(tenant=tenant_a, name="board")
    with TestCase.captureOnCommitCallbacks(execute=True):  # hanna is not on the board
        services.source_set_access(tenant=tenant_a, source=source, access=["group:board"])
    status, hidden = _receipt(asker, record)
    claim = hidden["claims"][0]
    assert claim["now"] == "no_longer_available" and "changed_to" not in claim and claim["evidence"] == []
    assert "EUR" not in str(hidden) and "travel.md" not in str(hidden)  # told nothing more about it
    admin = APIClient()
    admin.force_login(admin_a)
    audit = _receipt(admin, record)[1]["claims"][0]  # an admin reads it whole, with the asker's state
    assert audit["now"] == "no_longer_available" and "42 EUR" in audit["evidence"][0]["sentence"]

    with TestCase.captureOnCommitCallbacks(execute=True):  # open again (the payloads follow), then retired
        services.source_set_access(tenant=tenant_a, source=source, access=["tenant"])
    services.documents_retire(tenant=tenant_a, documents=Document.objects.filter(document_key="travel.md"))
    assert _receipt(asker, record)[1]["claims"][0]["now"] == "retired"


def test_only_the_asker_and_the_admins_read_a_receipt(tenant_a, tenant_b, admin_a, tmp_path):
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"travel.md": TRAVEL})
    hanna, sam = make_member(tenant_a, username="hanna"), make_member(tenant_a, username="sam")
    key, secret = api_key_issue(tenant=tenant_a, name="agent", scope="read")
    by_hanna, by_key = _answer(tenant_a, {"user": hanna}), _answer(tenant_a, {"api_key": key})
    clients = {}
    for name, user in (("hanna", hanna), ("sam", sam), ("admin", admin_a)):
        clients[name] = APIClient()
        clients[name].force_login(user)
    clients["key"], clients["other-key"], clients["other-tenant"] = APIClient(), APIClient(), APIClient()
    clients["key"].credentials(HTTP_AUTHORIZATION=f"Api-Key {secret}")
    clients["other-key"].credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, name='x')[1]}")
    clients["other-tenant"].credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_b, name='y')[1]}")
    got = {name: (_receipt(c, by_hanna)[0], _receipt(c, by_key)[0]) for name, c in clients.items()}
    assert got == {"hanna": (200, 404), "sam": (404, 404), "admin": (200, 200), "key": (404, 200),
                   "other-key": (404, 404), "other-tenant": (404, 404)}  # fmt: skip
    assert _receipt(clients["hanna"], type(by_hanna)(public_id="00000000-0000-0000-0000-000000000000"))[0] == 404


def test_a_claim_on_a_superseded_or_expired_document_says_so(tenant_a, admin_a, tmp_path):
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files={"travel.md": TRAVEL})
    hanna = make_member(tenant_a, username="hanna")
    record = _answer(tenant_a, {"user": hanna})
    asker = APIClient()
    asker.force_login(hanna)
    (root / "travel-2027.md").write_text("---\nsupersedes: travel.md\n---\n# Travel 2027\n\nThe per diem is 50 EUR.\n")
    with TestCase.captureOnCommitCallbacks(execute=True):
        pipeline.sync_folder(source=source, root=root)
    assert _receipt(asker, record)[1]["claims"][0]["now"] == "superseded"

    (root / "travel-2027.md").unlink()
    _resync(source, root, "---\nvalid_until: 2026-01-31\n---\n" + TRAVEL)
    claim = _receipt(asker, record)[1]["claims"][0]
    assert claim["now"] == "expired" and claim["valid_until"] == "2026-01-31"
