"""Answers across languages (issue 62), with the real packaged model served by its own process and Debian's
Apertium: a Spanish question over English documents, and an English one over Spanish documents, is put to the model
in the evidence's language, each sentence is verified there, and the verified sentence reaches the asker in the
asker's language with its values, names and markers unchanged, the sentence as verified one click away (`original`).
A question the documents do not answer is refused in the asker's language, without claiming the documents lack it."""

from __future__ import annotations

import json
import shutil

import pytest
from rest_framework.test import APIClient

from chat import excerpts, services
from chat.rendering import render_in
from inference import translation
from tenants.principals import Viewer
from tenants.services import api_key_issue
from tests.factories import make_folder_source

APERTIUM = shutil.which("apertium") is not None and all(
    (translation.MODES_DIR / f"{mode}.mode").exists() for mode in ("spa-eng", "eng-spa")
)
pytestmark = pytest.mark.skipif(not APERTIUM, reason="Debian's apertium-eng-spa is not installed")

POLICY = """# Travel policy

The daily per diem for travel within Spain is 52 EUR per day. Expense claims are submitted within 30 days of the end
of the trip.
"""
RECLAMACIONES = """# Procedimiento de reclamaciones

El cliente debe comunicar los daños en un paquete en un plazo de 7 días naturales desde la entrega.
"""


@pytest.fixture
def company(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    return make_folder_source(tenant=tenant_a, root=tmp_path / "kb",
                              files={"travel.md": POLICY, "reclamaciones.md": RECLAMACIONES})  # fmt: skip


def _answer(tenant, question: str) -> services.Answer:  # type: ignore[no-untyped-def]
    return services.answer_question(viewer=Viewer.everything(tenant), question=question,
                                    options=excerpts.AnswerSettings(temperature=0.0))  # fmt: skip


def test_the_evidence_language_is_the_first_prose_excerpts_not_a_sheets_that_shares_a_name(tenant_a, tmp_path):
    """An English question whose first excerpt is a workbook (it names the city) and whose answer is in a Spanish
    procedure is drafted in Spanish, the procedure's language; with no prose among the excerpts, the sheet's."""
    from chat.rendering import evidence_language
    from knowledge.search.retrieval import retrieve

    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={
        "invoices.csv": "Invoice,Client,City\n" + "\n".join(f"INV-{n},Cafe Mar,Valencia" for n in range(30)),
        "entregas.md": "# Entregas\n\nLas entregas en Valencia se realizan de 6:00 a 11:00, de lunes a sábado.\n",
    })  # fmt: skip
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="Until what time are deliveries made in Valencia?",
                    top_k=5)  # fmt: skip
    keys = [hit.chunk.document.document_key for hit in hits]
    assert set(keys) == {"invoices.csv", "entregas.md"}
    sheet = next(hit for hit in hits if hit.chunk.document.document_key == "invoices.csv")
    prose = next(hit for hit in hits if hit.chunk.document.document_key == "entregas.md")
    assert sheet.table and evidence_language([sheet, prose], "en") == "es"
    assert evidence_language([sheet], "es") == "en" and evidence_language([], "es") == "es"


def test_a_rendering_keeps_values_codes_names_and_markers_or_is_not_made():
    shown = render_in("Tracking numbers start with TIL- followed by 8 digits, as TIL-20461873 [1].", "en", "es")
    assert shown is not None and "TIL-" in shown and "TIL-20461873" in shown and shown.endswith("[1].")
    assert "números" in shown  # translated around what it keeps
    shown = render_in("Acme Retail pays 1,200.50 EUR by 18:00 CET [2].", "en", "es")
    assert shown is not None and all(kept in shown for kept in ("Acme Retail", "1,200.50", "EUR", "18:00", "[2]"))
    english = render_in("El cliente debe comunicar los daños en un plazo de 7 días [1].", "es", "en")
    assert english is not None and "7" in english and "days" in english and english.endswith("[1].")


@pytest.mark.slow
@pytest.mark.usefixtures("chat_model")
def test_a_spanish_question_over_an_english_policy_is_answered_in_spanish_and_verified_in_english(company, tenant_a):
    result = _answer(tenant_a, "¿Cuál es la dieta diaria para viajes dentro de España?")
    assert result.status in ("answered", "partial"), (result.answer, result.reason)
    assert "52 EUR" in result.answer and result.citations[0]["document_key"] == "travel.md"
    shown = [c for c in result.claims if c["supported"] and "52" in c["text"]]
    assert shown and shown[0]["original"]  # checked in English, shown in Spanish, the English one click away
    assert "per day" in shown[0]["original"] and "por día" in shown[0]["text"]
    assert shown[0]["quotes"][0]["text"].startswith("The daily per diem")  # the evidence stays verbatim


@pytest.mark.slow
@pytest.mark.usefixtures("chat_model")
def test_an_english_question_over_a_spanish_procedure_streams_verified_english_sentences(tenant_a, tmp_path):
    make_folder_source(tenant=tenant_a, root=tmp_path / "procedimientos", files={"reclamaciones.md": RECLAMACIONES})
    key = api_key_issue(tenant=tenant_a)[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    response = client.post("/api/v1/tenants/acme/answer/", {"question": "How many days do customers have to "
                           "report a damaged parcel?", "stream": True}, format="json",
                           HTTP_ACCEPT="text/event-stream")  # fmt: skip
    events = []
    for block in b"".join(response.streaming_content).decode().strip().split("\n\n"):
        name, data = block.split("\n", 1)
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    shown = [data for name, data in events if name == "sentence" and data["shown"]]
    done = events[-1][1]
    assert shown and done["status"] in ("answered", "partial"), done["answer"]
    assert "7" in shown[0]["text"] and "days" in shown[0]["text"]  # in English, as it was verified in Spanish
    assert "días" in shown[0]["claim"]["original"]


@pytest.mark.slow
@pytest.mark.usefixtures("chat_model")
def test_a_spanish_question_the_english_documents_do_not_answer_is_refused_honestly(company, tenant_a):
    result = _answer(tenant_a, "¿Cuál es la política de permiso parental de la empresa?")
    assert result.status in ("not_found", "not_verified") and not any(c["supported"] for c in result.claims)
    assert "no contienen" not in result.answer and result.answer.startswith("No se encuentra")
