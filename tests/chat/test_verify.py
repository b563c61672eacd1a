"""The citation verifier and the excerpt focus, on real text with the real packaged embedder."""

from __future__ import annotations

from chat.focus import focus_excerpts, split_units
from core.languages import answer_language
from inference.embedders import get_embedder
from knowledge.claims import EvidenceText, Verifier, render, says_not_found, specifics, split_claims
from tenants.principals import Viewer

RETURNS = "Returns are accepted within thirty days of purchase. Refunds go back to the original card."
WARRANTY = (
    "Every product carries a two year warranty. Claims need the original receipt and the serial number. "
    "Set WARRANTY_EMAIL to the address that receives claims; it defaults to claims@example.com."
)


def _verifier() -> Verifier:
    evidence = [EvidenceText(text, [u.text for u in split_units(text, code=False)]) for text in (RETURNS, WARRANTY)]
    return Verifier(evidence, embed=get_embedder().embed)


def test_a_fabricated_marker_is_replaced_by_the_excerpt_that_supports_the_sentence():
    claims = _verifier().check("Returns are accepted within thirty days [1]. The warranty lasts two years [1][7].")
    assert [(c.citations, c.supported) for c in claims] == [([1], True), ([2], True)]
    assert render(claims) == "Returns are accepted within thirty days [1]. The warranty lasts two years [2]."


def test_each_citation_carries_the_excerpt_sentence_it_stands_on_verbatim():
    claims = _verifier().check("Claims need the receipt and the serial number [2]. Refunds go to the card.")
    assert claims[0].quotes == [{"n": 2, "text": "Claims need the original receipt and the serial number."}]
    assert claims[1].quotes == [{"n": 1, "text": "Refunds go back to the original card."}]
    assert claims[0].as_dict()["quotes"] == claims[0].quotes
    invented = _verifier().check("Shipping to Mongolia is free on orders above 300 euros [2].")[0]
    assert invented.quotes == []  # nothing supports it: nothing is quoted for it


def test_an_invented_fact_keeps_no_citation_and_is_marked_unsupported():
    claims = _verifier().check("Shipping to Mongolia is free on orders above 300 euros [2].")
    assert claims[0].supported is False and claims[0].citations == []


def test_a_sentence_with_a_number_or_setting_the_excerpt_lacks_is_not_supported_by_it():
    verifier = _verifier()
    assert verifier.check("The warranty lasts two years.")[0].citations == [2]
    assert verifier.check("The warranty lasts five years and covers 12 claims.")[0].supported is False
    assert verifier.check("Set WARRANTY_ADDRESS to receive claims.")[0].supported is False
    assert verifier.check("Set `WARRANTY_EMAIL` to the address that receives claims.")[0].citations == [2]


def test_an_uncited_sentence_gets_the_excerpt_that_supports_it():
    claims = _verifier().check("Refunds are paid back to the original card.")
    assert claims[0].citations == [1] and claims[0].supported


def test_sentences_with_nothing_to_check_are_neither_supported_nor_not():
    claims = _verifier().check("Here is how:\n- Returns are accepted within thirty days of purchase.")
    assert claims[0].supported is None and claims[1].citations == [1]


def test_claims_split_on_sentences_and_list_items_and_keep_their_markers():
    parts = split_claims("First, do this [1]. Then that [2, 3].\n- An item [4-5]\n\nLast one.")
    assert parts == [("First, do this.", [1]), ("Then that.", [2, 3]), ("- An item", [4, 5]), ("Last one.", [])]
    found = specifics("Set MAX_COOKIE_SIZE to 4093 with app.config or --max-size, two times.")
    assert sorted(found) == sorted(["--max-size", "MAX_COOKIE_SIZE", "app.config", "4093", "two"])


def test_not_found_statements_and_the_question_language_are_recognised():
    assert says_not_found("The excerpts do not contain the answer.")
    assert says_not_found("Los fragmentos no contienen esa información.")
    assert says_not_found("I cannot find this in the documents.")
    assert says_not_found("The phone number of the hotline is not mentioned in the provided excerpts.")
    # Such a sentence is a statement about the excerpts, never a supported claim, even in their words.
    assert _verifier().check("The warranty length is not mentioned in the provided excerpts.")[0].supported is None
    assert says_not_found("No se proporciona información sobre los votos obtenidos por Jonathan Carter [3].")
    assert says_not_found("No information is provided about the exporter's port.")
    assert not says_not_found("Se proporciona información sobre los votos en la tabla 2.")
    assert not says_not_found("Returns are accepted within thirty days [1].")
    assert answer_language("¿Cómo se configura el proxy en aptitude?") == "es"
    assert answer_language("How do I configure the proxy?") == "en"
    assert answer_language("Como faço uma rota aceitar GET e POST?") == "en"  # read as Portuguese, answered in English


def test_focus_keeps_the_sentences_that_bear_on_the_question_within_the_budget():
    filler = " ".join(f"Section {i} describes the history of the company in some detail." for i in range(30))
    text = f"{filler} The warranty lasts two years for every product. {filler}"
    focused = focus_excerpts("How long does the warranty last?", [(text, False)], budget_chars=200,
                             embed=get_embedder().embed)  # fmt: skip
    assert "The warranty lasts two years for every product." in focused[0].text
    assert len(focused[0].text) < 400 and focused[0].text.startswith("… ")


def test_focus_gives_code_whole_lines():
    code = "\n".join([f"def helper_{i}():\n    return {i}" for i in range(40)] + ["def send(request):\n    retry(3)"])
    focused = focus_excerpts("What does send do?", [(code, True)], budget_chars=120, embed=get_embedder().embed)
    assert "def send(request):" in focused[0].units and "    retry(3)" in focused[0].units


COOKIES = (
    ".. py:data:: MAX_COOKIE_SIZE\n\n    Warn if cookie headers are larger than this many bytes. Defaults to\n"
    "    ``4093``. Larger cookies may be silently ignored by browsers. Set to\n    ``0`` to disable the warning.\n"
)
STRESS = "Stress tests only (30k iterations, ~52min):\n    pytest -m stress tests/test_stream_lifecycle.py\n"
ROUTING = "A converter that matches slashes must set ``part_isolating = False`` so that routes keep matching."
SEARCH = "Término ?name (forma abreviada ~n): selecciona los paquetes cuyo nombre coincide."


def _check(text: str, claim: str, question: str = ""):  # type: ignore[no-untyped-def]
    evidence = [EvidenceText(text, [u.text for u in split_units(text, code=False)])]
    return Verifier(evidence, question=question, embed=get_embedder().embed).check(claim)


def test_numbers_are_found_however_they_are_written_and_wrapped():
    """A value on its own wrapped line still has its sentence; 30k, 30,000 and 30_000 are one number."""
    question = "What does MAX_COOKIE_SIZE default to, and how do you switch its warning off?"
    claims = _check(COOKIES, "It defaults to 4093 bytes. Set it to 0 to disable the warning.", question)
    assert [c.supported for c in claims] == [True, True]
    assert _check(STRESS, "The stress tests run 30,000 iterations.")[0].supported
    assert _check(STRESS, "The stress tests run 40,000 iterations.")[0].supported is False
    assert _check(COOKIES, "It defaults to 4096 bytes.", question)[0].supported is False


def test_code_and_query_syntax_count_as_specifics_that_must_be_in_the_excerpt():
    assert _check(ROUTING, "The converter needs `part_isolating=False`.")[0].supported
    assert _check(ROUTING, "The converter needs `part_isolating=True`.")[0].supported is False
    question = "¿Cuál es la forma abreviada del término de búsqueda ?name en aptitude?"
    assert specifics("La forma abreviada de ?name es ~n.") == ["?name", "~n"]
    assert _check(SEARCH, "La forma abreviada del término ?name es ~n.", question)[0].supported
    assert _check(SEARCH, "La forma abreviada del término ?name es ~p.", question)[0].supported is False


def test_a_sentence_two_excerpts_support_cites_both_and_one_only_one_supports_cites_that_one():
    policy = "Customers may return purchases within thirty days; after that, returns are not accepted."
    texts = (RETURNS, WARRANTY, policy)
    evidence = [EvidenceText(text, [u.text for u in split_units(text, code=False)]) for text in texts]
    verifier = Verifier(evidence, embed=get_embedder().embed)
    both, one = verifier.check("Returns are accepted within thirty days. Claims need the serial number.")
    assert sorted(both.citations) == [1, 3] and both.supported
    assert one.citations == [2]


def test_a_sentence_two_excerpts_of_one_document_support_cites_another_document_that_supports_it_too():
    # The HTTP date helpers' page and two chunks of a signer module all state the UTC rule; the second
    # citation goes to the other document, not to the same module twice.
    helpers = "Timestamps without a timezone are taken to be in UTC by the HTTP date helpers."
    signer = "The signer's timestamps without an offset are in UTC: naive datetimes are treated as UTC."
    texts = [(helpers, "http.rst"), (signer, "timed.py"), (signer + " Signing adds a timestamp.", "timed.py")]
    evidence = [EvidenceText(t, [u.text for u in split_units(t, code=False)], key) for t, key in texts]
    claim = Verifier(evidence, embed=get_embedder().embed).check("Timestamps without an offset are in UTC.")[0]
    assert claim.supported and len(claim.citations) == 2
    assert sorted(texts[n - 1][1] for n in claim.citations) == ["http.rst", "timed.py"]


UPLOADS = (
    "DATA_UPLOAD_MAX_NUMBER_FIELDS. Default: 1000. The maximum number of parameters that may be received via GET or "
    "POST before a SuspiciousOperation (TooManyFields) is raised. You can set this to None to disable the check. "
    "FILE_UPLOAD_PERMISSIONS. Default: 0o644. The numeric mode to set newly uploaded files to."
)
LOGINS = (
    "Django's authentication system does not throttle login attempts. It provides no protection against brute "
    "force attacks. Use a third-party package or a web server module for throttling."
)


def _cross_check(question: str, answer: str):  # type: ignore[no-untyped-def]
    from knowledge.search.rerank import get_reranker

    evidence = [EvidenceText(t, [u.text for u in split_units(t, code=False)]) for t in (UPLOADS, LOGINS)]
    verifier = Verifier(evidence, question=question, embed=get_embedder().embed, cross=get_reranker().score)
    return verifier.check(answer)


def test_a_value_the_cited_sentence_does_not_state_is_marked_even_when_the_chunk_has_it_elsewhere():
    question = "What is the default value of DATA_UPLOAD_MAX_NUMBER_FIELDS?"
    wrong = _cross_check(question, "The default value of DATA_UPLOAD_MAX_NUMBER_FIELDS is 100 [1].")[0]
    assert (wrong.supported, wrong.problem, wrong.citations) == (False, "value", [])
    right = _cross_check(question, "The default value of DATA_UPLOAD_MAX_NUMBER_FIELDS is 1000 [1].")[0]
    assert right.supported and right.relevant and right.quotes == [{"n": 1, "text": "Default: 1000."}]
    # 644 is in the excerpt, but as another setting's mode: the number must stand with the claim's own words.
    assert _cross_check(question, "DATA_UPLOAD_MAX_NUMBER_FIELDS defaults to 644 fields.")[0].supported is False


def test_a_yes_that_its_excerpt_denies_is_not_supported():
    question = "Will Django lock out someone who keeps typing wrong passwords?"
    yes = _cross_check(question, "Yes, Django's authentication system throttles login attempts [2].")[0]
    assert yes.supported is False and yes.citations == [] and yes.problem == "polarity"
    no = _cross_check(question, "No, Django's authentication system does not throttle login attempts [2].")[0]
    assert no.supported and no.citations == [2] and no.relevant


def test_a_true_sentence_that_does_not_answer_the_question_is_marked_off_topic():
    question = "What is the default value of DATA_UPLOAD_MAX_NUMBER_FIELDS?"
    aside = _cross_check(question, "Use a third-party package or a web server module for throttling.")[0]
    assert aside.supported and aside.citations == [2]  # true: its excerpt says so
    assert aside.relevant is False  # but it is no answer to this question


def test_the_answer_text_shows_each_claims_evidence_and_leaves_out_what_nothing_supports():
    question = "Will Django lock out someone who keeps typing wrong passwords?"
    claims = _cross_check(question, "No, Django does not throttle login attempts [2]. It bans the IP for 24 hours.")
    assert [c.supported for c in claims] == [True, False]
    assert render(claims, evidence=True) == (
        "No, Django does not throttle login attempts [2].\n"
        "> [2] “Django's authentication system does not throttle login attempts.”"
    )


SETTINGS_PAGE = (
    "CSRF_COOKIE_AGE. Default: 31449600 (approximately 1 year, in seconds). The age of CSRF cookies, in seconds. "
    "CSRF_COOKIE_HTTPONLY. Default: False. Whether to use HttpOnly flag on the CSRF cookie."
)


def test_a_value_must_belong_to_the_setting_the_claim_names_not_to_its_neighbour():
    assert _check(SETTINGS_PAGE, "CSRF_COOKIE_HTTPONLY defaults to False.")[0].supported
    assert _check(SETTINGS_PAGE, "CSRF_COOKIE_AGE defaults to 31449600 seconds.")[0].supported
    assert _check(SETTINGS_PAGE, "CSRF_COOKIE_AGE defaults to False.")[0].supported is False
    assert _check(SETTINGS_PAGE, "CSRF_COOKIE_HTTPONLY defaults to 31449600 seconds.")[0].supported is False


SOCKETS = "socket_connect(Socket, Address) connects a socket to the given address. socket_close/1 closes it."


def test_a_claim_about_a_name_the_question_asks_about_needs_that_name_in_its_excerpt():
    """The excerpt documents a socket predicate, not a PostgreSQL client: "opens a PostgreSQL connection" is not
    supported by it, however well its other words match."""
    question = "Which GNU Prolog predicate opens a connection to a PostgreSQL database?"
    claim = "The predicate that connects to a PostgreSQL database is `socket_connect`."
    assert _check(SOCKETS, claim, question)[0].supported is False
    assert _check(SOCKETS, "The predicate `socket_connect` connects a socket to an address.", question)[0].supported


def test_without_a_loadable_cross_encoder_answers_keep_their_other_checks(tenant_a, tmp_path, monkeypatch):
    """A missing or tampered cross-encoder file costs the relevance and weak-evidence checks, never the answer."""
    from chat import excerpts, verdicts
    from inference import packaged
    from knowledge.search import rerank
    from tests.factories import make_folder_source

    def tampered() -> None:
        raise packaged.PackagedModelError("reranker_en/model.onnx: sha256 mismatch")

    monkeypatch.setattr(rerank, "_reranker", None)
    monkeypatch.setattr(excerpts, "_cross_failed_at", None)
    monkeypatch.setattr(packaged, "packaged_reranker_files", tampered)
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"warranty.md": f"# Warranty\n\n{WARRANTY}\n"})
    sources = excerpts.prepare(
        viewer=Viewer.everything(tenant_a), question="How long is the warranty?", options=excerpts.AnswerSettings()
    )
    assert sources.excerpts and sources.strength is None and not verdicts.weak_evidence(sources)
    assert excerpts.cross_encoder() is None
    monkeypatch.setattr(packaged, "packaged_reranker_files", lambda: 1 / 0)  # not even tried again meanwhile
    assert excerpts.cross_encoder() is None


def test_a_name_the_claim_adds_must_be_in_the_excerpt_it_cites_however_many_words_they_share():
    """The packaged 0.5B wrote "… is the GLS courier [1][2]" from excerpts about damage and tracking, and the
    right name from excerpt [1] under markers [2][3]: a name is checked like a number, and moves the citation."""
    texts = [
        "Parcels for Reykjavik go by sea from Rotterdam: for Iceland the courier is Eimskip, about ten days.",
        "If a courier delivers a damaged parcel, refuse it. This applies to orders to Iceland as well.",
        "Every courier delivery gets a tracking link by e-mail, for orders to Iceland too.",
    ]
    evidence = [EvidenceText(text, [u.text for u in split_units(text, code=False)]) for text in texts]
    verifier = Verifier(evidence, question="Which courier delivers orders to Iceland?", embed=get_embedder().embed)
    invented = verifier.check("The courier that delivers orders to Iceland is the GLS courier [2][3].")[0]
    assert invented.supported is False and invented.citations == [] and invented.problem == "value"
    moved = verifier.check("According to the excerpts, the courier for orders to Iceland is Eimskip [2][3].")[0]
    assert moved.supported and moved.citations == [1]
    # A sentence that repeats the question and adds only the name is an answer to check, not a restatement.
    restated = verifier.check("The courier that delivers orders to Iceland is the Eimskip courier.")[0]
    assert restated.supported and restated.citations == [1]
    assert verifier.check("Returns from Iceland are tracked by e-mail [3].")[0].citations == [3]  # no new name


def test_a_follow_ups_answer_leaves_out_what_the_previous_answer_said(tenant_a, tmp_path):
    """Issue 50: OpenAI-door follow-ups repeated the previous answer before answering the new question (the
    follow-up is read with the question before it, and the model answered both)."""
    from chat import excerpts, services, verdicts
    from tests.factories import make_folder_source

    text = ("# Warranty\n\nIn France every product carries a two year warranty.\n\n"
            "In Spain every product carries a three year warranty.\n")  # fmt: skip
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"warranty.md": text})
    together = "How long is the warranty in France? and in Spain?"
    sources = excerpts.prepare(viewer=Viewer.everything(tenant_a), question=together,
                               options=excerpts.AnswerSettings())  # fmt: skip
    _, evidence = excerpts.focused_prompt(together, sources, excerpts.AnswerSettings())
    said = ["In France every product carries a two year warranty [1]."]
    draft = "In France every product carries a two year warranty [1]. In Spain it carries a three year warranty [1]."
    verdict = verdicts.verified(together, draft, sources, evidence, said=said)
    assert verdict.status in ("answered", "partial") and "three year" in verdict.text
    assert "France" not in verdict.text, verdict.text
    assert [c["problem"] for c in verdict.claims if "France" in c["text"]] == ["repeat"]
    assert "France" in verdicts.verified(together, draft, sources, evidence).text  # a question of its own: all of it

    checker = verdicts.SentenceChecker(verdicts.answer_verifier(together, evidence), lambda: 0.0, said)
    sentences = checker.feed(draft) + checker.finish()
    assert [s.shown for s in sentences] == [False, True] and sentences[0].reason == verdicts.REPEATS
    alone = verdicts.verified(together, said[0], sources, evidence, said=said)  # nothing new: the repeat stands
    assert "two year" in alone.text
    asked = services.follow_up_prompt("and in Spain?", together)
    assert asked.startswith("and in Spain?") and "How long is the warranty in France?" in asked


def test_a_spanish_answer_is_checked_against_english_excerpts_with_its_values_and_quoted_in_english():
    """Issue 52: across languages the multilingual encoder says which excerpt sentence a claim stands on; a number
    the excerpt does not state is still a wrong value, and an unrelated sentence is still unsupported."""
    from chat.verdicts import answer_verifier

    policy = ("Refunds are paid to the original card within 5 business days. Orders above 300 euros ship for free. "
              "The support desk answers from 9:00 to 17:00 on weekdays.")  # fmt: skip
    evidence = [EvidenceText(policy, [u.text for u in split_units(policy, code=False)])]
    question = "¿En cuántos días se pagan los reembolsos?"
    verifier = answer_verifier(question, evidence, multilingual=True)
    right, wrong, unrelated = verifier.check(
        "Los reembolsos se pagan en la tarjeta original en un plazo de 5 días hábiles. "
        "Los reembolsos se pagan en 7 días hábiles. La impresora imprime a doble cara por defecto."
    )
    assert right.supported and right.quotes == [
        {"n": 1, "text": "Refunds are paid to the original card within 5 business days."}
    ]
    assert wrong.supported is False and wrong.citations == []
    assert unrelated.supported is False
    english = answer_verifier(question, evidence)  # the English embedder alone would not see the Spanish claim
    claim = "Los reembolsos se pagan en la tarjeta original en un plazo de 5 días hábiles."
    assert english.check(claim)[0].supported is False


def test_a_code_block_in_a_claim_is_checked_by_its_code_and_sentence_starts_and_german_nouns_are_no_names():
    doc = "Run gunicorn -w 4 'hello:app' to start four worker processes. Gunicorn should not be run as root."
    evidence = [EvidenceText(doc, [u.text for u in split_units(doc, code=False)])]
    verifier = Verifier(evidence, question="How do I start Gunicorn with four workers?", embed=get_embedder().embed)
    assert specifics("Use: ```bash gunicorn -w 4 'hello:app' ``` This starts `hello`.") == ["-w", "hello", "4"]
    # as the model writes a block inside a sentence (a block on lines of its own is split into claims by line)
    fenced = verifier.check("Start it with ```bash gunicorn -w 4 'hello:app' ``` This starts four worker processes.")
    assert len(fenced) == 1 and fenced[0].supported
    eight = verifier.check("Start it with ```bash gunicorn -w 8 'hello:app' ``` This starts eight worker processes.")
    assert eight[0].supported is False
    from knowledge.claims import name_words

    assert name_words("The courier is GLS. Then Eimskip takes over, says Jonathan.") == ("Eimskip", "Jonathan")
    assert name_words("Sie können die folgenden Befehle mit PostgreSQL verwenden.") == ("PostgreSQL",)
    assert specifics("El PIN se genera en una forma estable.") == []  # "una" is an article, not a number
