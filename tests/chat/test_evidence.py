"""Only source text is evidence; a value belongs to its column; a refusal shows where to look. Real components
throughout: Tesseract, the packaged embedder and cross-encoder, and (slow tests) the packaged 0.5B, in its own process,
writing both the enrichment and the answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.test import Client

from chat import excerpts, services, verdicts, wording
from inference.catalog import catalog_register_packaged
from inference.embedders import get_embedder
from knowledge import claims
from knowledge.index.lexical import query_vector
from knowledge.index.vectorstore import Scope, get_store
from knowledge.ingest import office, pipeline, versions
from knowledge.models import Chunk, Document
from knowledge.search.retrieval import retrieve
from mcp_tools import operations
from tenants.models import Membership
from tenants.principals import Viewer
from tenants.services import api_key_issue
from tests.factories import make_folder_source, make_member, scanned_pdf
from tests.knowledge.test_api import CommittingClient

ENRICHMENT_MODEL = "qwen2.5-coder-0.5b-instruct enrichment (packaged)"
NOTICE = ["Notice to residents", "The car park on Elm Street closes", "on 14 October for resurfacing.",
          "Parking returns on 21 October."]  # fmt: skip


def _named(data: bytes, name: str) -> io.BytesIO:
    buffer = io.BytesIO(data)
    buffer.name = name
    return buffer


def test_summary_sentences_the_text_does_not_support_are_dropped_with_the_reason():
    text = ("Notice to residents. The car park on Elm Street closes on 14 October for resurfacing. "
            "Parking returns on 21 October.")  # fmt: skip
    right = "The car park on Elm Street closes on 14 October for resurfacing."
    invented_year = "The car park closes on October 14th, 2023."
    invented_person = "Marta Lindqvist will handle the resurfacing of the car park."
    opposite = "Parking does not return on 21 October."
    dropped = claims.unsupported([right, invented_year, invented_person, opposite], text, embed=get_embedder().embed)
    assert set(dropped) == {invented_year, invented_person, opposite}
    assert dropped[invented_year] == claims.PROBLEM_REASONS["value"]  # 2023 is not in the notice
    assert dropped[opposite] == claims.PROBLEM_REASONS["polarity"]


@pytest.mark.slow
def test_an_enriched_scan_is_found_by_its_summary_but_only_its_page_is_quoted_or_cited(tenant_a, chat_model, settings):
    settings.RAG_ENRICH_TIMEOUT_S = 3600  # a loaded machine is slow, not wrong
    catalog_register_packaged()
    client = CommittingClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    source = client.post("/api/v1/tenants/acme/sources/", {"kind": "upload", "name": "notices"}, format="json")
    url = f"/api/v1/tenants/acme/sources/{source.json()['id']}/upload/"
    unknown = client.post(url, {"files": [_named(b"# x\n\nx\n", "x.md")], "enrich_model": "gpt-9"}, format="multipart")
    assert unknown.status_code == 400 and "gpt-9" in unknown.json()["enrich_model"][0]
    canteen = b"# Canteen\n\nThe canteen serves lunch from 12:00 to 14:00 on weekdays.\n"
    files = [_named(scanned_pdf([NOTICE]), "notice.pdf"), _named(canteen, "canteen.md")]
    upload = client.post(url, {"files": files, "enrich_model": ENRICHMENT_MODEL}, format="multipart")  # the REST door
    assert upload.status_code == 202
    job = client.get(f"/api/v1/tenants/acme/jobs/{upload.json()['id']}/").json()
    assert job["status"] == "succeeded" and job["counts"]["added"] == 2
    notice = Document.objects.get(document_key="notice.pdf")
    enrichment = notice.versions.get().enrichment
    assert enrichment["status"] == "ok" and enrichment["checked"] >= 1  # every summary sentence was checked
    summary = Chunk.objects.get(document=notice, mode="summary")

    question = "When does the Elm Street car park close?"
    # The summary is indexed and the raw store ranks it for the question: without the rule it would be served.
    embedder, everything = get_embedder(), Scope(tenant=str(tenant_a.public_id), statuses=None)
    dense = embedder.embed([question])[0].tolist()
    raw = get_store().hybrid(embedder.identity, everything, dense=dense, sparse=query_vector(question), limit=10)
    assert summary.point_id in [hit.id for hit in raw.fused]
    hits = retrieve(viewer=Viewer.everything(tenant_a), query=question, top_k=5)
    assert hits[0].chunk.document == notice and hits[0].chunk.mode != "summary" and hits[0].page == 1
    # Every door: retrieve, bootstrap, answer (JSON and SSE), Dify, the document over MCP, the search preview.
    base = "/api/v1/tenants/acme"
    answered = client.post(f"{base}/answer/", {"question": question}, format="json").json()
    streamed = client.post(f"{base}/answer/", {"question": question, "stream": True}, format="json",
                           HTTP_ACCEPT="text/event-stream")  # fmt: skip
    seen = [
        client.post(f"{base}/retrieve/", {"query": question, "top_k": 10}, format="json").json(),
        client.post(f"{base}/bootstrap/", {"intent": question}, format="json").json(),
        answered,
        b"".join(streamed.streaming_content).decode(),
        client.post(
            f"{base}/dify/retrieval",
            {
                "knowledge_id": "src:acme:upload:notices",
                "query": question,
                "retrieval_setting": {"top_k": 10, "score_threshold": 0},
            },
            format="json",
        ).json(),  # fmt: skip
        operations.get_document(api_key_issue(tenant=tenant_a)[0], notice.document_id),
    ]
    admin_client = Client()
    admin_client.force_login(make_member(tenant_a, role=Membership.Role.ADMIN, username="ada"))
    preview = admin_client.get("/t/acme/search/", {"q": question})
    assert all(summary.chunk_id not in json.dumps(page) for page in seen)
    assert summary.text.split("\n")[-1] not in preview.content.decode()
    if answered["status"] in ("answered", "partial"):  # the 0.5B may also refuse: then its passages are the page's
        assert {(c["document_key"], c["page"]) for c in answered["citations"]} == {("notice.pdf", 1)}
    else:
        assert answered["status"] == "not_verified" and answered["evidence"]
        assert all(c["document_key"] == "notice.pdf" for c in answered["citations"])
    page = admin_client.get(f"/t/acme/documents/{notice.public_id}/").content.decode()
    assert 'id="enrichment-checked"' in page and f"{enrichment['checked']} summary sentences" in page


def stock_sheet(path: Path) -> dict[int, tuple[str, str, int]]:
    """A 60-row spreadsheet (SKU, Product, Stock); row 47's stock is 239, as in the issue. Returns the rows by the
    number the spreadsheet shows."""
    import openpyxl

    colours = ["Red", "Blue", "Green", "Amber", "Slate", "Ivory"]
    items = ["kettle", "lamp", "stool", "drawer", "mirror", "clock", "rack", "vase", "tray", "bench"]
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Stock"
    sheet.append(["SKU", "Product", "Stock"])
    rows = {}
    for row in range(2, 62):
        rows[row] = (f"SKU-{1000 + row}", f"{colours[(row - 2) // 10]} {items[(row - 2) % 10]}", row * 5 + 4)
        sheet.append(list(rows[row]))
    book.save(path)
    return rows


def test_a_value_under_another_column_of_the_row_does_not_verify(tenant_a, tmp_path):
    folder = tmp_path / "stock"
    folder.mkdir()
    rows = stock_sheet(folder / "stock.xlsx")
    assert rows[47][2] == 239
    text = office.extract_office((folder / "stock.xlsx").read_bytes(), "xlsx").text
    assert f"- Row 47: SKU: SKU-1047; Product: {rows[47][1]}; Stock: 239" in text  # the row number, as shown
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="stock", path=folder)
    pipeline.sync_folder(source=source, root=folder)
    question = "What is the product in row 47?"
    sources = excerpts.prepare(viewer=Viewer.everything(tenant_a), question=question, options=excerpts.AnswerSettings())
    _, evidence = excerpts.focused_prompt(question, sources, excerpts.AnswerSettings())
    # The row reaches the model whole, beside its column names (not cut at its colons).
    assert any(f"- Row 47: SKU: SKU-1047; Product: {rows[47][1]}; Stock: 239" in e.units for e in evidence)

    def verdict(draft: str) -> verdicts.Verdict:
        return verdicts.verified(question, draft, sources, evidence)

    wrong = verdict("The product in row 47 is SKU: 239.")  # the issue's answer: 239 is the row's stock
    assert wrong.status in ("not_verified", "not_found") and wrong.claims[0]["problem"] == "field"
    other_row = verdict(f"The product in row 47 is {rows[48][1]}.")
    assert other_row.status in ("not_verified", "not_found")
    right = verdict(f"The product in row 47 is {rows[47][1]}.")
    assert right.status == "answered" and rows[47][1] in right.text
    assert "Row 47" in right.claims[0]["quotes"][0]["text"]
    # A Markdown table: the stock of the row the question names, not another column's value.
    markdown = "| SKU | Product | Stock |\n|---|---|---|\n| SKU-1 | Red kettle | 12 |\n| SKU-2 | Blue lamp | 239 |\n"
    table = claims.Verifier(claims.passages(markdown), question="How many Red kettle are in stock?")
    assert table.check("There are 12 in stock.")[0].supported is True
    assert table.check("There are 239 in stock.")[0].problem == "field"


@pytest.mark.slow
def test_the_packaged_model_names_row_47s_product_or_refuses(tenant_a, tmp_path, chat_model):
    folder = tmp_path / "stock"
    folder.mkdir()
    rows = stock_sheet(folder / "stock.xlsx")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="stock", path=folder)
    pipeline.sync_folder(source=source, root=folder)
    result = services.answer_question(viewer=Viewer.everything(tenant_a), question="What is the product in row 47?",
                                      options=excerpts.AnswerSettings(temperature=0.0))  # fmt: skip
    if result.status in ("answered", "partial"):
        assert rows[47][1].lower() in result.answer.lower()
        shown = [c for c in result.claims if c["supported"]]
        assert all("239" not in c["text"] for c in shown if "product" in c["text"].lower())
    else:
        assert result.status in ("not_verified", "not_found")
        assert all(e["n"] >= 1 for e in result.evidence)


def test_a_refusal_shows_the_passages_that_may_hold_the_answer_and_nothing_when_none_bears_on_it(tenant_a, tmp_path):
    warranty = "Every product carries a two year warranty. Claims need the original receipt."
    files = {"warranty.md": f"# Warranty\n\n{warranty}\n\n# Returns\n\nReturns are accepted within thirty days.\n"}
    make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=files)
    viewer, options = Viewer.everything(tenant_a), excerpts.AnswerSettings()
    question = "How long is the warranty?"
    sources = excerpts.prepare(viewer=viewer, question=question, options=options)
    _, evidence = excerpts.focused_prompt(question, sources, options)
    refused = verdicts.verified(question, "The warranty lasts five years.", sources, evidence)  # not what it says
    assert refused.status == "not_verified" and refused.text.startswith(wording.where_to_look("en"))
    assert 1 <= len(refused.evidence) <= 3 and "two year warranty" in refused.evidence[0]["text"]
    assert all(p["text"] in " ".join(sources.excerpts[p["n"] - 1].chunk.text.split()) for p in refused.evidence)
    assert [c["document_key"] for c in refused.citations] == ["warranty.md"]
    unrelated = "Which airline flies from Reykjavik to Nuuk?"
    sources = excerpts.prepare(viewer=viewer, question=unrelated, options=options)
    _, evidence = excerpts.focused_prompt(unrelated, sources, options)
    nothing = verdicts.verified(unrelated, "Air Greenland flies from Reykjavik to Nuuk.", sources, evidence)
    assert nothing.status == "not_found" and nothing.evidence == [] and nothing.citations == []


def test_a_summary_hit_expands_only_within_what_the_reader_may_see(tenant_a, tenant_b, tmp_path, monkeypatch):
    """The summary's replacement search runs with the reader's principals in the vector query: a restricted
    document's summary and its source chunks reach neither a staff member outside its group nor another tenant.
    (The enrichment model is a stand-in here; the slow test above runs the real one.)"""
    from knowledge.index import indexer
    from knowledge.options import EnrichmentRequest, IngestOptions
    from knowledge.services import source_set_access
    from tenants.principals import viewer_for
    from tenants.services import group_create

    group_create(tenant=tenant_a, name="hr")
    canary = "okapi7731heron"
    summary_text = f"The salary bands {canary} are reviewed every March."
    record = {"status": "ok", "model": "stand-in", "directives": "", "title": "Salary bands",
              "summary": summary_text, "topics": ["pay"], "key_points": []}  # fmt: skip
    monkeypatch.setattr(versions, "enrich", lambda **_: dict(record))
    folder = tmp_path / "hr"
    folder.mkdir()
    (folder / "salaries.md").write_text(f"# Salary bands\n\nThe salary bands {canary} are reviewed every March.\n")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="hr", path=folder)
    source_set_access(tenant=tenant_a, source=source, access=["group:hr"])
    options = IngestOptions(enrichment=EnrichmentRequest(model_path="", model_name="stand-in"))
    pipeline.sync_folder(source=source, root=folder, options=options)
    make_folder_source(tenant=tenant_a, root=tmp_path / "open", files={"lunch.md": "# Lunch\n\nLunch is at noon.\n"})
    indexer.drain()
    summary = Chunk.objects.get(document__document_key="salaries.md", mode="summary")
    question = "When are the salary bands reviewed?"
    everyone = retrieve(viewer=Viewer.everything(tenant_a), query=question, top_k=5)
    assert everyone[0].chunk.document.document_key == "salaries.md"  # the document is found ...
    assert summary.chunk_id not in {h.chunk.chunk_id for h in everyone}  # ... by its page, never the summary
    staff = viewer_for(tenant=tenant_a, membership=Membership.objects.get(user=make_member(tenant_a, username="sam")))
    for viewer in (staff, Viewer.everything(tenant_b)):
        hits = retrieve(viewer=viewer, query=question, top_k=5)
        assert all(canary not in h.chunk.text and h.chunk.document.document_key != "salaries.md" for h in hits)
