"""Regenerate docs/screenshots/*.png: a demo tenant over ragsite's own docs, pages captured in Chromium.

.venv/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
PORT = 8791
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def main() -> None:
    data = Path(tempfile.mkdtemp(prefix="ragsite-shots-"))
    env = {**os.environ, "RAG_DATA_DIR": str(data), "RAG_DEBUG": "true", "PORT": str(PORT),
           "RAG_MODELS_DIR": os.environ.get("RAG_MODELS_DIR", str(ROOT / "var" / "models"))}  # fmt: skip
    manage = [sys.executable, str(ROOT / "manage.py")]
    run = lambda *args: subprocess.run([*manage, *args], env=env, check=True, cwd=ROOT, capture_output=True)  # noqa: E731
    run("migrate", "-v0")
    run("create_tenant", "demo", "--name", "Demo company")
    run("ingest", "demo", str(ROOT / "docs"), "--source", "ragsite-docs", "--tags", "manual")
    setup = (
        "from django.contrib.auth import get_user_model; from tenants.models import Tenant; "
        "from tenants.services import membership_add; t = Tenant.objects.get(slug='demo'); "
        "u = get_user_model().objects.create_user('staff', password='screenshots-pw-1'); "
        "membership_add(tenant=t, user=u, role='staff'); "
        "a = get_user_model().objects.create_user('admin', password='screenshots-pw-1'); "
        "membership_add(tenant=t, user=a, role='admin')"
    )
    run("shell", "-c", setup)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config", "ragsite/gunicorn_conf.py"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    worker = subprocess.Popen(
        [*manage, "worker"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    model = subprocess.Popen(  # the chat model's own process, so the chat shot shows a verified answer
        [*manage, "llm_serve"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{PORT}"
    try:
        for _ in range(60):
            try:
                urllib.request.urlopen(f"{base}/accounts/login/", timeout=2)
                break
            except OSError:
                time.sleep(1)
        for _ in range(180):
            if b'"ready"' in urllib.request.urlopen(f"{base}/healthz", timeout=5).read():
                break
            time.sleep(1)
        from playwright.sync_api import sync_playwright

        OUT.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = browser.new_page(viewport={"width": 1366, "height": 820})
            page.goto(f"{base}/accounts/login/")
            page.screenshot(path=str(OUT / "login.png"))
            page.fill("#id_username", "staff")
            page.fill("#id_password", "screenshots-pw-1")
            page.click("button[type=submit]")
            page.goto(f"{base}/t/demo/chat/")
            page.fill("#question", "Which variable switches the database to PostgreSQL?")
            page.click("#ask button[type=submit]")
            page.wait_for_selector(".message.assistant .meta", timeout=300_000)
            page.screenshot(path=str(OUT / "chat.png"))
            page.click(".message.assistant .verdict-up button")  # staff: this one was right
            # A question whose answer staff mark wrong, naming the page that holds it: the curation queue's item.
            page.goto(f"{base}/t/demo/chat/")
            page.fill("#question", "Who may close an item of the curation queue, and what does it become?")
            page.click("#ask button[type=submit]")
            page.wait_for_selector(".message.assistant .verdict-down summary", timeout=300_000)
            page.click(".message.assistant .verdict-down summary")
            page.select_option(".verdict select[name=reason]", "wrong_citation")
            page.fill(".verdict textarea[name=correct_answer]", "the tenant's evaluation set")
            holds = page.locator(".verdict select[name=document_id] option", has_text="feedback.md").first
            page.select_option(".verdict select[name=document_id]", holds.get_attribute("value"))
            page.screenshot(path=str(OUT / "verdict.png"))
            page.click(".verdict button:has-text('Send to the admins')")
            page.wait_for_selector(".verdict-given")
            page.goto(f"{base}/t/demo/chat/")
            page.fill("#question", "Can ragsite send answers by SMS?")
            page.click("#ask button[type=submit]")
            page.wait_for_selector(".message.assistant .verdict-down summary", timeout=300_000)
            page.click(".message.assistant .verdict-down summary")
            page.select_option(".verdict select[name=reason]", "should_refuse")
            page.click(".verdict button:has-text('Send to the admins')")
            page.wait_for_selector(".verdict-given")
            admin = browser.new_page(viewport={"width": 1366, "height": 820})
            admin.goto(f"{base}/accounts/login/")
            admin.fill("#id_username", "admin")
            admin.fill("#id_password", "screenshots-pw-1")
            admin.click("button[type=submit]")
            admin.goto(f"{base}/t/demo/sources/")
            admin.screenshot(path=str(OUT / "sources.png"))
            admin.goto(f"{base}/t/demo/upload/")
            admin.set_input_files(
                "#files", [str(ROOT / "tests" / "fixtures" / "handbook.pdf"), str(ROOT / "README.md")]
            )
            admin.screenshot(path=str(OUT / "upload.png"))
            admin.click("#upload-form button[type=submit]")
            admin.wait_for_selector(".progress[aria-valuenow='100']", timeout=120_000)
            admin.screenshot(path=str(OUT / "job-progress.png"))
            admin.goto(f"{base}/t/demo/documents/")
            admin.screenshot(path=str(OUT / "documents.png"))
            admin.click("text=ingestion.md")
            admin.locator(".chunk button.mark").nth(1).click()
            admin.wait_for_selector(".chunk.critical")
            admin.evaluate("window.scrollTo(0, 0)")
            admin.screenshot(path=str(OUT / "document.png"))
            admin.goto(f"{base}/t/demo/search/?q=single+owner+vector+store")
            admin.screenshot(path=str(OUT / "search-preview.png"))
            admin.goto(f"{base}/t/demo/members/")
            admin.fill("#who", "sam@demo.example")
            admin.click("#invite-form button[type=submit]")
            admin.wait_for_selector("tr[data-username='sam']")
            admin.screenshot(path=str(OUT / "members.png"))
            admin.goto(f"{base}/t/demo/curation/")
            admin.screenshot(path=str(OUT / "curation-queue.png"))
            admin.click("#queue a:has-text('Who may close')")
            admin.screenshot(path=str(OUT / "curation-item.png"), full_page=True)
            admin.locator("#fixes button:has-text('critical')").first.click()
            admin.wait_for_selector(".flash li")
            for fix in (None, "not_in_knowledge"):  # a run, a curation, a run: the plot marks the change
                if fix:
                    admin.goto(f"{base}/t/demo/curation/")
                    admin.click("#queue a:has-text('SMS')")
                    admin.click(f"#fixes button[value={fix}]")
                    admin.wait_for_selector(".flash li")
                admin.goto(f"{base}/t/demo/evaluation/")
                done = admin.locator("#runs tr.state-done").count()
                admin.click("button:has-text('Run the evaluation')")
                for _ in range(300):  # the page's own script may not be eval'd (CSP): poll from here
                    admin.goto(f"{base}/t/demo/evaluation/")
                    if admin.locator("#runs tr.state-done").count() > done:
                        break
                    time.sleep(2)
            admin.screenshot(path=str(OUT / "evaluation.png"), full_page=True)
            admin.goto(f"{base}/api/v1/docs/")
            admin.wait_for_timeout(1500)
            admin.screenshot(path=str(OUT / "api-docs.png"))
            browser.close()
    finally:
        for process in (server, worker, model):
            process.terminate()
            process.wait(timeout=30)
    print(f"screenshots written to {OUT}")


if __name__ == "__main__":
    main()
