"""The three connectors against their real servers (the tests' DokuWiki, Redmine and Dovecot, tests/*_server.py):
a first sync of PAGES wiki pages, ISSUES issues and MAILS mails, an incremental sync after 10 changes, and a
permission sync after one rule, membership or ACL change — through the real pipeline and embedder.

    python bench/connectors.py [wiki|redmine|mailbox ...]   (all three by default)

Each line prints seconds and what the sync did. "Locked out after" is how long a person the system has just locked
out can still read here: at most the permission-sync interval (default 5 minutes, PERMISSION_MINUTES) plus the
permission sync's own time, printed beside it. Sizes: BENCH_PAGES (1,000), BENCH_ISSUES (1,000), BENCH_MAILS (2,000),
BENCH_MEMBERS (5 members mapped to people there)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from _django import setup

PAGES = int(os.environ.get("BENCH_PAGES", 1000))
ISSUES = int(os.environ.get("BENCH_ISSUES", 1000))
MAILS = int(os.environ.get("BENCH_MAILS", 2000))
MEMBERS = int(os.environ.get("BENCH_MEMBERS", 5))
TEXT = ("This page explains how the team handles request {n}: who approves it, which form to use, and the "
        "deadline of {d} working days. Escalate anything unusual to the area lead of group {g}.")  # fmt: skip


def _tenant(slug: str):  # type: ignore[no-untyped-def]
    """A tenant whose members member0… are the people of the same names in the system (one directory behind both)."""
    from django.contrib.auth import get_user_model

    from tenants.models import Tenant
    from tenants.services import membership_add

    tenant = Tenant.objects.create(slug=slug, name=slug)
    for n in range(MEMBERS):
        user, _made = get_user_model().objects.get_or_create(username=f"member{n}")
        membership_add(tenant=tenant, user=user)
    return tenant


def _report(label: str, seconds: float, job) -> None:  # type: ignore[no-untyped-def]
    access = (job.params or {}).get("access", {})
    print(f"{label:<44} {seconds:8.1f} s   added {job.added} updated {job.updated} unchanged {job.unchanged} "
          f"retired {job.retired} failed {job.failed}; rights of {access.get('documents', 0)} documents: "
          f"{access.get('opened', 0)} opened, {access.get('closed', 0)} closed")  # fmt: skip


def _timed(label: str, run):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    job = run()
    seconds = time.perf_counter() - started
    _report(label, seconds, job)
    return seconds


def _lockout(kind: str, permission_seconds: float) -> None:
    from knowledge.ingest.connector import PERMISSION_MINUTES

    print(f"{kind}: locked out after at most {PERMISSION_MINUTES * 60 + permission_seconds:,.0f} s "
          f"(the {PERMISSION_MINUTES}-minute interval + {permission_seconds:.1f} s of permission sync)")  # fmt: skip


def wiki(folder: Path) -> None:
    from knowledge.ingest import sources
    from knowledge.options import IngestOptions
    from knowledge.services import source_create_for
    from tests.wiki_server import CONNECTOR, DokuWiki

    users = {f"member{n}": (f"pw-{n}", ["user", f"g{n % 3}"]) for n in range(MEMBERS)}
    rules = [("*", "@ALL", 1), ("*", "@user", 8)]
    for area in range(10):
        rules += [(f"area{area}:*", "@ALL", 0), (f"area{area}:*", f"@g{area % 3}", 1), (f"area{area}:*", "@reader", 1)]
    served = DokuWiki(folder, users, rules).start()
    try:
        api = served.api()
        started = time.perf_counter()
        for n in range(PAGES):
            text = f"====== Page {n} ======\n{TEXT.format(n=n, d=n % 9 + 1, g=n % 3)}\n"
            api.wiki.putPage(f"area{n % 10}:page{n}", text, {"sum": "written"})
        print(f"wiki: {PAGES} pages written in {time.perf_counter() - started:.1f} s")
        from django.conf import settings

        settings.RAG_ALLOWED_WEB_PREFIXES = [served.base]  # every API call is checked like a web page
        tenant = _tenant("wikibench")
        location = served.base.replace("http://", f"http://{CONNECTOR[0]}:{CONNECTOR[1]}@")
        source = source_create_for(tenant=tenant, kind="dokuwiki", name="wiki", location=location, operator=True)
        options = IngestOptions()
        _timed(f"wiki: first sync of {PAGES} pages", lambda: sources.sync(source, location, options))
        time.sleep(1.05)
        for n in range(10):
            text = f"====== Page {n} ======\nRevised: {TEXT.format(n=n, d=2, g=1)}\n"
            api.wiki.putPage(f"area{n % 10}:page{n}", text, {"sum": "revised"})
        _timed("wiki: incremental sync after 10 edits", lambda: sources.sync(source, location, options))
        served.grant("area0:*", "@g1", 1)  # one rule: another group reads an area
        seconds = _timed("wiki: permission sync after one rule", lambda: sources.permission_sync(source, location))
        _lockout("wiki", seconds)
    finally:
        served.stop()


def redmine(folder: Path) -> None:
    from knowledge.ingest import sources
    from knowledge.options import IngestOptions
    from knowledge.services import source_create_for
    from tests import redmine_server
    from tests.redmine_server import Redmine, _instance, _run

    made = redmine_server.template(folder / "template")
    served = Redmine(made, folder / "redmine")
    script = folder / "issues.rb"
    script.write_text(f"""
tracker = Tracker.first
status = IssueStatus.first
priority = IssuePriority.first
admin = User.find_by_login('admin')
projects = (0..4).map {{ |p| Project.create!(identifier: "area#{{p}}", name: "Area #{{p}}", is_public: p == 0,
                                            tracker_ids: Tracker.pluck(:id)) }}
{ISSUES}.times do |n|
  Issue.create!(project: projects[n % 5], tracker: tracker, author: admin, status: status, priority: priority,
                subject: "Request #{{n}}", description: "{TEXT.format(n="#{n}", d=3, g=1)}")
end
""")
    started = time.perf_counter()
    _run(_instance(served.folder), "bin/rails", "runner", str(script))
    print(f"redmine: {ISSUES} issues written in {time.perf_counter() - started:.1f} s")
    served.start()
    try:
        roles = {r["name"]: r["id"] for r in served.admin("GET", "roles.json")["roles"]}
        for n in range(MEMBERS):
            user = served.user(f"member{n}", f"member{n}@bench.test")
            served.admin("POST", f"projects/area{1 + n % 4}/memberships.json",
                         {"membership": {"user_id": user, "role_ids": [roles["Reporter"]]}})  # fmt: skip
        from django.conf import settings

        settings.RAG_ALLOWED_WEB_PREFIXES = [served.base]
        tenant = _tenant("redminebench")
        location = served.base.replace("http://", f"http://{served.key}@")
        source = source_create_for(tenant=tenant, kind="redmine", name="tracker", location=location, operator=True)
        options = IngestOptions()
        _timed(f"redmine: first sync of {ISSUES} issues", lambda: sources.sync(source, location, options))
        for n in range(1, 11):
            served.admin("PUT", f"issues/{n}.json", {"issue": {"notes": f"Follow-up {n}: approved."}})
        _timed("redmine: incremental sync after 10 notes", lambda: sources.sync(source, location, options))
        member = served.admin("GET", "users.json?name=member0")["users"][0]["id"]
        served.admin("POST", "projects/area3/memberships.json",
                     {"membership": {"user_id": member, "role_ids": [roles["Reporter"]]}})  # fmt: skip
        seconds = _timed("redmine: permission sync after one membership",
                         lambda: sources.permission_sync(source, location))  # fmt: skip
        _lockout("redmine", seconds)
    finally:
        served.stop()


def mailbox(folder: Path) -> None:
    from knowledge.ingest import sources
    from knowledge.options import IngestOptions
    from knowledge.services import source_create_for
    from tests.mail_server import Dovecot

    users = {f"member{n}": (f"pw-{n}", [f"g{n % 3}"]) for n in range(MEMBERS)}
    served = Dovecot(users, ("support", "support-pw")).start()
    try:
        from django.conf import settings

        client = served.session("support")
        folders = ["INBOX", "Billing", "Escalations", "Partners"]
        for name in folders[1:]:
            client.create_folder(name)
        started = time.perf_counter()
        for n in range(MAILS):
            thread = n // 2  # conversations of two messages
            reply = n % 2 == 1
            answered = f"In-Reply-To: <m{n - 1}@bench.test>\r\nReferences: <m{n - 1}@bench.test>\r\n"
            headers = (f"From: customer{thread}@example.com\r\nSubject: {'Re: ' if reply else ''}Question {thread}\r\n"
                       f"Message-ID: <m{n}@bench.test>\r\nDate: Mon, 07 Dec 2026 09:00:00 +0000\r\n"
                       + (answered if reply else ""))  # fmt: skip
            body = TEXT.format(n=thread, d=n % 9 + 1, g=n % 3)
            client.append(folders[thread % 4], (headers + "\r\n" + body + "\r\n").encode())
        client.setacl("INBOX", "anyone", "lr")
        for number, name in enumerate(folders[1:]):
            client.setacl(name, f"$g{number % 3}", "lr")
        print(f"mailbox: {MAILS} mails written in {time.perf_counter() - started:.1f} s")
        tenant = _tenant("mailbench")
        from django.contrib.auth import get_user_model

        from tenants.models import Group

        for n in range(3):  # the same groups as the mail server's (one directory behind both)
            group = Group.objects.create(tenant=tenant, name=f"g{n}")
            names = [f"member{k}" for k in range(MEMBERS) if k % 3 == n]
            group.members.set(get_user_model().objects.filter(username__in=names))
        settings.RAG_ALLOWED_MAIL_SERVERS = [f"127.0.0.1:{served.port}"]
        location = f"imap://support:support-pw@127.0.0.1:{served.port}/"
        source = source_create_for(tenant=tenant, kind="mailbox", name="support", location=location, operator=True)
        options = IngestOptions()
        _timed(f"mailbox: first sync of {MAILS} mails", lambda: sources.sync(source, location, options))
        for n in range(10):
            late = (f"From: customer{n}@example.com\r\nSubject: Re: Question {n * 4}\r\n"
                    f"Message-ID: <late{n}@bench.test>\r\nIn-Reply-To: <m{n * 8}@bench.test>\r\n"
                    f"References: <m{n * 8}@bench.test>\r\n\r\nThanks, solved.\r\n")  # fmt: skip
            client.append("INBOX", late.encode())
        _timed("mailbox: incremental sync after 10 mails", lambda: sources.sync(source, location, options))
        client.setacl("Billing", "$g1", "lr")
        seconds = _timed("mailbox: permission sync after one ACL", lambda: sources.permission_sync(source, location))
        _lockout("mailbox", seconds)
        client.logout()
    finally:
        served.remove()


def main() -> None:
    setup()
    chosen = sys.argv[1:] or ["wiki", "redmine", "mailbox"]
    folder = Path(tempfile.mkdtemp(prefix="ragsite-connectors-"))
    for name in chosen:
        {"wiki": wiki, "redmine": redmine, "mailbox": mailbox}[name](folder / name)


if __name__ == "__main__":
    main()
