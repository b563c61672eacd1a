"""The pages in Spanish (issue 52), in a real browser (Debian's Chromium through Playwright): a browser that asks for
Spanish gets every page in Spanish, and the switch on every page changes the language and remembers it. A walk
through sign-in, sources, upload (and its job), chat and members finds no English left on them: no string of the
catalogue shown untranslated, and none of the English words a Spanish page never holds."""

from __future__ import annotations

import re
import shutil

import polib
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from chat.models import AnswerRecord
from tenants.models import Membership, Tenant
from tests.factories import make_member

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh)")

User = get_user_model()
# English words no Spanish sentence of the interface holds ("no", "a", "de" are Spanish too, so they are not here).
ENGLISH_WORDS = {"the", "and", "with", "your", "this", "from", "are", "you", "of", "to", "is", "for", "not", "have",
                 "has", "will", "can", "yet", "here", "there", "what", "which", "who", "when", "been", "was", "it",
                 "its", "be", "an", "or", "by", "on", "in", "at", "as"}  # fmt: skip
# What is the user's, not the interface's: code, names of files and people, the documents' own text.
USER_CONTENT = "code, pre, .who, .tenant, .brand, .message .text, blockquote, .evidence, [lang=en], .language-switch"


def _catalogue() -> set[str]:
    """The English strings the interface marks for translation (short ones too, but only whole words of them)."""
    found = set()
    for name in ("django", "djangojs"):
        for entry in polib.pofile(str(settings.BASE_DIR / "locale" / "es" / "LC_MESSAGES" / f"{name}.po")):
            for text in (entry.msgid, entry.msgid_plural):
                plain = re.sub(r"<[^>]+>|%\(\w+\)[sdr]|&\w+;", " ", text or "")
                if len(plain.split()) >= 3:
                    found.add(" ".join(plain.split()))
    return found


ENGLISH_SENTENCES = _catalogue()


def english_left(page) -> list[str]:  # type: ignore[no-untyped-def]
    """What of the page's visible interface is English: catalogue strings shown as written, and English words."""
    text = page.evaluate(
        """(skip) => {
            const copy = document.body.cloneNode(true);
            copy.querySelectorAll(skip).forEach((node) => node.remove());
            copy.querySelectorAll('[hidden], template, script, style, noscript').forEach((node) => node.remove());
            const attributes = [...copy.querySelectorAll('[placeholder], [title], [aria-label]')].map((node) =>
                [node.getAttribute('placeholder'), node.getAttribute('title'), node.getAttribute('aria-label')]
                .filter(Boolean).join(' '));
            return [copy.innerText, ...attributes, document.title].join('\\n');
        }""",
        USER_CONTENT,
    )
    flat = " ".join(text.split())
    left = [sentence for sentence in ENGLISH_SENTENCES if sentence in flat]
    for match in re.finditer(r"[^\W\d_]+", flat):  # whole words, accents included ("días" is not "as")
        if match.group(0).lower() in ENGLISH_WORDS:  # the word, and where it stands
            left.append(f"{match.group(0)}: …{flat[max(0, match.start() - 40) : match.end() + 40]}…")
    return left


def test_a_spanish_speaker_walks_the_pages_and_finds_no_english(live_server, transactional_db, browser, settings):
    settings.RAG_DEFAULT_FROM_EMAIL = "ragsite@acme.example"
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    url = live_server.url
    page = browser.new_context(locale="es-ES").new_page()  # the browser asks for Spanish (Accept-Language)

    page.goto(f"{url}/accounts/login/")
    assert page.locator("html").get_attribute("lang") == "es"
    assert page.inner_text("h1") == "Iniciar sesión" and english_left(page) == []
    page.fill("#id_username", "ada")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    assert "no coinciden" in page.inner_text("[role=alert]") and english_left(page) == []
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    assert page.inner_text("h1") == "Sus espacios de trabajo" and english_left(page) == []

    page.goto(f"{url}/t/acme/sources/")
    assert page.inner_text("h1") == "Fuentes" and english_left(page) == []
    page.fill("#name", "Manuales")
    page.click("#new-source button.primary")
    assert "Se creó" in page.inner_text(".flash") and english_left(page) == []

    page.goto(f"{url}/t/acme/upload/")
    assert page.inner_text("h1") == "Subir" and english_left(page) == []
    page.set_input_files("#files", [
        {"name": "guide.md", "mimeType": "text/markdown", "buffer": b"# Guide\n\nThe router goes into port 4.\n"},
        {"name": "empty.md", "mimeType": "text/markdown", "buffer": b""},
    ])  # fmt: skip
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector(".progress[aria-valuenow='100']", timeout=120_000)
    assert "2 de 2 archivos" in page.inner_text("#files-count")
    assert "1 añadidos" in page.inner_text(".summary")
    # The reason a file was skipped is the ingester's own words, recorded with the job: shown as they were written.
    left = [w for w in english_left(page) if "is empty" not in w]
    assert left == [], left

    page.goto(f"{url}/t/acme/chat/")
    assert page.get_attribute("#question", "placeholder") == "Haga una pregunta…" and english_left(page) == []
    page.fill("#question", "¿En qué puerto va el router?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector("article.message.assistant footer.meta", timeout=120_000)
    page.wait_for_selector("#sources-status")
    left = english_left(page)
    assert left == [], "\n".join(left)

    page.goto(f"{url}/t/acme/chat/answers/{AnswerRecord.objects.latest('created_at').public_id}/receipt/")
    assert page.inner_text("h1") == "Recibo"
    left = english_left(page)
    assert left == [], "\n".join(left)
    for path, title in (("chat/recalled/", "Respuestas cuya base cambió"), ("chat/digest/", "Resumen"),
                        ("retention/", "Conservación")):  # fmt: skip
        page.goto(f"{url}/t/acme/{path}")
        assert page.inner_text("h1") == title and english_left(page) == [], path

    page.goto(f"{url}/t/acme/members/")
    assert page.inner_text("h1") == "Miembros de Acme" and english_left(page) == []
    page.fill("#who", "sam@acme.example")
    page.click("#invite-form button[type=submit]")
    assert "Se envió una invitación a sam@acme.example como personal" in page.inner_text(".flash")
    assert english_left(page) == []

    # The switch on every page: English now, and remembered on the next page, whatever the browser asks for.
    page.click(".language-switch a[lang=en]")
    page.wait_for_selector("h1:text-is('Members of Acme')")
    assert page.locator("html").get_attribute("lang") == "en"
    page.goto(f"{url}/t/acme/sources/")
    assert page.inner_text("h1") == "Sources"
    page.click(".language-switch a[lang=es]")
    page.wait_for_selector("h1:text-is('Fuentes')")
    assert page.locator("html").get_attribute("lang") == "es"


def test_the_switch_remembers_the_choice_and_goes_back_only_to_this_sites_pages(client, db):
    back = client.get("/language/es/", headers={"referer": "http://testserver/accounts/login/"})
    assert back.status_code == 302 and back["Location"] == "http://testserver/accounts/login/"
    assert back.cookies[settings.LANGUAGE_COOKIE_NAME].value == "es"
    assert "Iniciar sesión" in client.get("/accounts/login/", headers={"accept-language": "en"}).text  # remembered
    away = client.get("/language/en/", headers={"referer": "https://evil.example/phish"})
    assert away["Location"] == "/" and "Sign in" in client.get("/accounts/login/").text
    unknown = client.get("/language/xx/")
    assert unknown.status_code == 302 and settings.LANGUAGE_COOKIE_NAME not in unknown.cookies


def test_the_language_follows_the_browser_and_english_stays_the_default(client, db):
    """Accept-Language picks the language of every page; without one (or with a language not offered), English."""
    assert "Iniciar sesión" in client.get("/accounts/login/", headers={"accept-language": "es-ES,es;q=0.9"}).text
    assert "Sign in" in client.get("/accounts/login/", headers={"accept-language": "de-DE"}).text
    assert "Sign in" in client.get("/accounts/login/").text
    missing = client.get("/t/nowhere/sources/", headers={"accept-language": "es"})
    assert missing.status_code in (302, 404)
    page = client.get("/no-such-page/", headers={"accept-language": "es"})
    assert page.status_code == 404 and "No encontrado" in page.text


def _interface_text(html: str) -> str:
    """A page's interface text: its markup without the code, the document texts, the scripts and what is marked as
    written in English (the server's diagnostics)."""
    html = re.sub(r"(?s)<(script|style|pre|code|blockquote)\b.*?</\1>", " ", html)
    html = re.sub(r'(?s)<span[^>]*lang="en"[^>]*>.*?</span>', " ", html)
    html = re.sub(r'(?s)<div class="document-text">.*?</div>', " ", html)  # the document itself, as written
    html = re.sub(r"(?s)<[^>]+>", " ", html)
    return " ".join(html.split())


def test_every_other_page_of_an_admin_and_an_operator_is_spanish_too(client, tenant_a, tmp_path):
    """The pages the browser walk does not open (documents, a document, search, the curation queue, review, the
    evaluation, keys, new workspace, allowed locations), read in Spanish: no English word of the interface."""
    from knowledge.models import Document
    from tests.factories import make_folder_source

    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"faq.md": "# FAQ\n\nOpen the page.\n"})
    document = Document.objects.get(tenant=tenant_a)
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ana")
    operator = User.objects.create_superuser("root", password="pw-for-tests-123")
    pages = {admin: [f"/t/{tenant_a.slug}/{path}" for path in (
        "documents/", f"documents/{document.public_id}/", "search/?q=page", "curation/", "review/", "evaluation/",
        "keys/", "keys/scim/", "sources/", "members/", f"read/{document.public_id}/", "identity/", "identity/new/",
        "see-as/?as=user:ana&q=page")],
        operator: ["/tenants/new/", "/operator/locations/"]}  # fmt: skip
    for user, urls in pages.items():
        client.force_login(user)
        for url in urls:
            response = client.get(url, headers={"accept-language": "es"})
            assert response.status_code == 200, url
            words = re.findall(r"[^\W\d_]+", _interface_text(response.text))
            english = sorted({w for w in words if w.lower() in ENGLISH_WORDS})
            assert english == [], (url, english)
