"""A Redmine source's producers: its issues through its REST API, each with its journal, and the issue tracker's own
visibility as each issue's access list.

- Issues: each issue is a document (`<project>/<id>.md`): its subject, fields, description and journal (comments and
  status changes, in words), its project, tracker and open/closed state as tags, its start date as `valid_from`.
  Its versions follow the journal: the first sync stores the issue as it stood after each entry (up to
  `history_depth`), each served over its own time; a later sync reads only the issues updated since, with every
  entry made since. An issue moved to another project keeps its document and history under its new key; an issue
  deleted is retired. Private notes are kept out of the issue's document: an issue that has them gets a second one,
  `<project>/<id>-private-notes.md`, open only to those Redmine shows them to.
- Visibility: who may read an issue is what Redmine itself shows each member of the tenant — the issues it lists for
  them (the administrator's key asks as each of them, `X-Redmine-Switch-User`), so private projects, private issues,
  roles that see only their own issues, trackers a role may not see and closed projects are decided by Redmine, not
  here. A member is the Redmine user the source's `people` option names, else the one with their user name, else the
  one with their e-mail address; a member who is none of them reads what an anonymous visitor reads
  (knowledge/ingest/connector.py). Redmine users who are none of the members are listed on the job with how many
  issues they may read (their access is not carried: fail closed). Visibility is synced with every sync and, on its
  own, by the permission sync (every `permission_minutes`, default 5): payload changes only.
- The key: Redmine lets only an administrator's key ask as someone else, so the source holds one; the connector
  sends nothing but GET requests with it. Faults (Redmine unreachable, a refused or non-administrator key, an answer
  that is not JSON) fail the sync with the reason and change nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import urlencode

import httpx
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from knowledge.ingest.connector import ConnectorConfig, access_list, api_location_check, identities
from knowledge.ingest.producer import (
    Access,
    Activity,
    Done,
    Event,
    Failed,
    Item,
    Past,
    Planned,
    Reading,
    SourceProblem,
    Unchanged,
    option,
)
from knowledge.ingest.website import Reader, WebProblem
from knowledge.models import Document, Status

PAGE = 100  # Redmine's largest page
MAX_UNMAPPED_ASKED = 100  # project members who are no one here, counted on a job
redmine_location_check = api_location_check  # Redmine's base URL with the administrator's key: https://KEY@host/


class RedmineProblem(SourceProblem):
    """Redmine cannot be read at all; the message says why."""


class NotThere(Exception):
    """Redmine will not give one thing (an issue gone meanwhile, a user it does not know)."""


@dataclass(frozen=True)
class RedmineConfig(ConnectorConfig):
    """A Redmine source's options: the connectors' own, and the projects read."""

    projects: str = option(
        _("Projects (Redmine; empty: all)"),
        _("Identifiers of the projects read, comma separated (their subprojects are separate projects)."),
        max_length=2000,
    )

    @property
    def wanted(self) -> set[str]:
        return self.listed(self.projects)


class RedmineClient:
    """Redmine's REST API over one Reader, GET only: each request checked, capped and timed like a website's page."""

    def __init__(self, base: str, credential: str) -> None:
        self.base = base if base.endswith("/") else base + "/"
        self.key = credential.split(":", 1)[0]
        self.reader = Reader(
            budget=settings.RAG_WIKI_MAX_BYTES,
            deadline_s=settings.RAG_WIKI_SYNC_DEADLINE_S,
            answer_cap=settings.RAG_WIKI_MAX_ANSWER_BYTES,
        )

    def get(
        self, path: str, params: dict[str, Any] | None = None, *, as_user: str | None = None, anonymous: bool = False
    ) -> Any:
        url = self.base + path + ("?" + urlencode(params) if params else "")
        headers = {"Accept": "application/json"}
        if not anonymous:
            headers["X-Redmine-API-Key"] = self.key
        if as_user:
            headers["X-Redmine-Switch-User"] = as_user
        try:
            fetched = self.reader.get(url, headers)
        except httpx.HTTPError as exc:
            raise RedmineProblem(f"Redmine at {self.base} cannot be reached ({type(exc).__name__}).") from exc
        except WebProblem as exc:
            raise RedmineProblem(f"Redmine at {self.base}: {exc}") from exc
        if fetched.status == 401 and not anonymous:
            raise RedmineProblem(f"Redmine at {self.base} refused the connector's key (is its REST API on?).")
        if fetched.status in (401, 403) and anonymous:
            return None  # an anonymous visitor may read nothing
        if fetched.status == 412 and as_user:
            raise NotThere(as_user)  # a user it does not know, or a locked one
        if fetched.status == 403:
            raise RedmineProblem(
                f"Redmine at {self.base} refused {path} to the connector's key (an administrator's "
                "key is needed to ask what each person may read)."
            )
        if fetched.status == 404:
            raise NotThere(path)
        if fetched.status != 200:
            raise RedmineProblem(f"Redmine at {self.base} answered HTTP {fetched.status} to {path}.")
        try:
            return json.loads(fetched.body)
        except ValueError:
            raise RedmineProblem(f"Redmine at {self.base} did not answer {path} with JSON.") from None

    def pages(self, path: str, name: str, params: dict[str, Any] | None = None, **how: Any) -> list[dict[str, Any]]:
        """Every item of a paged list (`name`: its key in the answer); [] when an anonymous visitor may read none."""
        found: list[dict[str, Any]] = []
        while True:
            answer = self.get(path, {**(params or {}), "limit": PAGE, "offset": len(found)}, **how)
            if answer is None:
                return []
            if not isinstance(answer, dict) or not isinstance(answer.get(name), list):
                raise RedmineProblem(f"Redmine at {self.base} answered {path} in a shape it does not have.")
            found += [item for item in answer[name] if isinstance(item, dict)]
            if not answer[name] or len(found) >= int(answer.get("total_count", 0)):
                return found

    def close(self) -> None:
        self.reader.close()


def _when(text: str) -> datetime:
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _name(value: Any) -> str:
    return str(value.get("name", "")) if isinstance(value, dict) else ""


@dataclass
class Tracker:
    """What one sync or permission sync knows of the Redmine it reads."""

    client: RedmineClient
    projects: dict[int, dict[str, Any]]
    people: dict[str, str | None]
    logins: dict[str, str]
    statuses: dict[str, str]
    admins: set[str]  # Redmine's administrators, who see everything there: not listed as unmapped
    by_id: dict[int, str]  # a user's id → login (memberships name users by id)

    def key(self, issue: dict[str, Any], private: bool = False) -> str:
        project = self.projects.get(int(issue["project"]["id"]), {}).get("identifier", str(issue["project"]["id"]))
        return f"{project}/{issue['id']}{'-private-notes' if private else ''}.md"

    def issues(self) -> list[dict[str, Any]]:
        """Every issue of the projects read, as the administrator sees them (all, open and closed)."""
        listed = self.client.pages("issues.json", "issues", {"status_id": "*", "sort": "id"})
        return [issue for issue in listed if int(issue.get("project", {}).get("id", 0)) in self.projects]

    def visible(self) -> tuple[dict[str, set[int]], set[int]]:
        """The issue ids Redmine lists for each member (as the user they are, or an anonymous visitor), and for an
        anonymous visitor."""
        anonymous = {
            int(i["id"]) for i in self.client.pages("issues.json", "issues", {"status_id": "*"}, anonymous=True)
        }
        seen: dict[str, set[int]] = {}
        for member, login in self.people.items():
            seen[member] = self._as(login) if login else anonymous
        return seen, anonymous

    def access(
        self, issue_id: int, seen: dict[str, set[int]], anonymous: set[int]
    ) -> tuple[list[str], tuple[str, ...]]:
        """The members Redmine lists an issue for, and its access list."""
        readers = [member for member, ids in seen.items() if issue_id in ids]
        return readers, access_list(readers, len(self.people), issue_id in anonymous)

    def _as(self, login: str) -> set[int]:
        try:
            listed = self.client.pages("issues.json", "issues", {"status_id": "*"}, as_user=login)
        except NotThere:  # a user Redmine no longer knows, or a locked one, reads nothing
            return set()
        return {int(i["id"]) for i in listed}

    def unmapped(self, issues: set[int]) -> list[dict[str, Any]]:
        """The members of the projects read who are none of the tenant's members, with how many of these issues each
        may read. Only project members (a user of the whole Redmine sees what any visitor does), and at most
        MAX_UNMAPPED_ASKED of them: each costs a listing, and a permission sync runs every few minutes."""
        taken = {login for login in self.people.values() if login} | self.admins
        members: set[str] = set()
        for project in self.projects:
            listed = self.client.pages(f"projects/{project}/memberships.json", "memberships")
            members |= {
                self.by_id[int(m["user"]["id"])] for m in listed if int(m.get("user", {}).get("id", 0)) in self.by_id
            }
        rows = []
        for login in sorted(members - taken)[:MAX_UNMAPPED_ASKED]:
            count = len(self._as(login) & issues)
            if count:
                rows.append({"principal": login, "documents": count})
        return rows[:200]

    def private_readers(self, issue_id: int, readers: list[str]) -> list[str]:
        """Of the members who see an issue, those Redmine shows its private notes to."""
        shown = []
        for member in readers:
            login = self.people.get(member)
            if not login:
                continue
            try:
                detail = self.client.get(f"issues/{issue_id}.json", {"include": "journals"}, as_user=login)
            except NotThere:
                continue
            if any(j.get("private_notes") and j.get("notes") for j in detail["issue"].get("journals", [])):
                shown.append(member)
        return shown


def _tracker(reading: Reading, client: RedmineClient) -> Tracker:
    wanted = reading.config.wanted
    projects = {
        int(p["id"]): p
        for p in client.pages("projects.json", "projects")
        if not wanted or p.get("identifier") in wanted
    }
    users = client.pages("users.json", "users", {"status": 1})
    logins = {str(u["login"]): str(u.get("mail", "")) for u in users}
    admins = {str(u["login"]) for u in users if u.get("admin")}
    by_id = {int(u["id"]): str(u["login"]) for u in users}
    statuses = {str(s["id"]): str(s["name"]) for s in client.get("issue_statuses.json").get("issue_statuses", [])}
    people = identities(reading.source, reading.config.people, logins)
    return Tracker(client, projects, people, logins, statuses, admins, by_id)


def _client(reading: Reading) -> RedmineClient:
    return RedmineClient(reading.location, reading.credential)


def produce_redmine(reading: Reading) -> Iterator[Event]:
    """The issues of the projects read, their journals since the last sync and who may read them (see the module)."""
    client = _client(reading)
    try:
        yield Activity(f"Reading the projects and people of Redmine at {client.base}")
        tracker = _tracker(reading, client)
        issues = tracker.issues()
        yield Activity(f"Asking Redmine which of {len(issues)} issues each of {len(tracker.people)} members may read")
        seen, anonymous = tracker.visible()
        known: dict[str, dict[str, Any]] = dict(reading.state.get("issues", {}))
        held = set(
            Document.objects.filter(source=reading.source)
            .exclude(status=Status.RETIRED)
            .values_list("document_key", flat=True)
        )
        depth = reading.config.depth
        yield Planned(len(issues))
        state: dict[str, dict[str, Any]] = {}
        for number, issue in enumerate(issues):
            issue_id, key = int(issue["id"]), tracker.key(issue)
            readers, access = tracker.access(issue_id, seen, anonymous)
            last = known.get(str(issue_id), {})
            if number % 20 == 0:
                yield Activity(f"Issue {number + 1} of {len(issues)}: #{issue_id}")
            if last.get("updated_on") == issue.get("updated_on") and last.get("key") == key and key in held:
                state[str(issue_id)] = last
                yield Unchanged(key)
                yield Access(key, access)
                if last.get("private"):
                    private = tracker.key(issue, private=True)
                    yield Unchanged(private, counted=False)
                    yield Access(private, access_list(tracker.private_readers(issue_id, readers), -1, False))
                continue
            try:
                detail = client.get(f"issues/{issue_id}.json", {"include": "journals"})["issue"]
            except NotThere:
                yield Failed(key, "Redmine no longer gives this issue", keep=False, position=number)
                continue
            journal = [j for j in detail.get("journals", []) if isinstance(j, dict)]
            public = [j for j in journal if not j.get("private_notes")]
            yield _issue(
                tracker,
                detail,
                public,
                number,
                access,
                moved_from=last.get("key", ""),
                since=int(last.get("entries", 0)) if last else None,
                depth=depth,
            )
            private_notes = [j for j in journal if j.get("private_notes") and j.get("notes")]
            if private_notes:
                readers_of_notes = tracker.private_readers(issue_id, readers)
                yield Item(
                    tracker.key(issue, private=True),
                    data=_private_text(detail, private_notes).encode(),
                    position=number,
                    location=f"{client.base}issues/{issue_id}",
                    tags=_tags(tracker, detail),
                    access=access_list(readers_of_notes, -1, False),
                )
            state[str(issue_id)] = {
                "updated_on": issue.get("updated_on"),
                "key": key,
                "entries": len(public),
                "private": bool(private_notes),
            }
        unmapped = tracker.unmapped({int(i["id"]) for i in issues})
        report = {"redmine": {"issues": len(issues), "members": len(tracker.people)}, "unmapped": unmapped}
        yield Done(state={"issues": state}, report=report)
    finally:
        client.close()


def _tags(tracker: Tracker, issue: dict[str, Any]) -> tuple[str, ...]:
    project = tracker.projects.get(int(issue["project"]["id"]), {}).get("identifier", "")
    closed = bool(issue.get("closed_on"))
    return tuple(t for t in (project, _name(issue.get("tracker")).lower(), "closed" if closed else "open") if t)


def _issue(
    tracker: Tracker,
    issue: dict[str, Any],
    journal: list[dict[str, Any]],
    number: int,
    access: tuple[str, ...],
    *,
    moved_from: str,
    since: int | None,
    depth: int,
) -> Item:
    """The issue as it stands, with the journal entries made since the last sync (the first: up to `depth`) as its
    earlier versions: the issue as it stood before each of them."""
    issue_id = int(issue["id"])
    first = max(len(journal) - depth, 0) if since is None else since + 1
    times = [_when(issue["created_on"])] + [_when(entry["created_on"]) for entry in journal]
    past = [
        Past(
            partial(_text_bytes, tracker, issue, journal[:shown]),
            times[shown].timestamp(),
            _entry(issue_id, journal[shown - 1] if shown else None, issue),
            (times[shown], times[shown + 1]),
        )
        for shown in range(first, len(journal))
    ]
    key = tracker.key(issue)
    return Item(
        key,
        data=_text(tracker, issue, journal).encode(),
        position=number,
        mtime=_when(issue["updated_on"]).timestamp(),
        location=f"{tracker.client.base}issues/{issue_id}",
        commit=_entry(issue_id, journal[-1] if journal else None, issue),
        history=tuple(past),
        moved_from=moved_from if moved_from and moved_from != key else "",
        tags=_tags(tracker, issue),
        access=access,
    )


def _entry(issue_id: int, entry: dict[str, Any] | None, issue: dict[str, Any]) -> dict[str, Any]:
    """A journal entry as a version's commit (the issue's creation for its first version)."""
    if entry is None:
        return {
            "sha": f"#{issue_id}",
            "author": _name(issue.get("author")),
            "date": issue["created_on"],
            "message": "created",
        }
    return {
        "sha": f"#{issue_id}.{entry['id']}",
        "author": _name(entry.get("user")),
        "date": entry["created_on"],
        "message": (entry.get("notes") or "").strip().splitlines()[0][:200]
        if entry.get("notes")
        else "changed " + ", ".join(str(d.get("name", "")) for d in entry.get("details", [])),
    }


def _detail(tracker: Tracker, detail: dict[str, Any]) -> str:
    name, old, new = str(detail.get("name", "")), detail.get("old_value"), detail.get("new_value")
    if name == "status_id":
        return f"Status: {tracker.statuses.get(str(old), old) or '—'} → {tracker.statuses.get(str(new), new)}."
    if name == "description":
        return "The description was changed."
    return f"{name.removesuffix('_id').replace('_', ' ').capitalize()}: {old or '—'} → {new or '—'}."


def _text(tracker: Tracker, issue: dict[str, Any], journal: list[dict[str, Any]]) -> str:
    """The issue as Markdown: a header with its dates for validity, its fields, its description, its journal."""
    lines = ["---"]
    if issue.get("start_date"):
        lines.append(f"valid_from: {issue['start_date']}")
    lines += ["---", f"# #{issue['id']} {issue.get('subject', '')}", ""]
    status = _name(issue.get("status")) + (" (closed)" if issue.get("closed_on") else "")
    lines.append(
        f"Project: {_name(issue.get('project'))} · Tracker: {_name(issue.get('tracker'))} · "
        f"Status: {status} · Priority: {_name(issue.get('priority'))}"
    )
    lines.append(
        f"Reported by {_name(issue.get('author'))} on {str(issue.get('created_on', ''))[:10]}"
        + (f"; assigned to {_name(issue.get('assigned_to'))}" if issue.get("assigned_to") else "")
        + (f"; closed on {str(issue['closed_on'])[:10]}" if issue.get("closed_on") else "")
        + "."
    )
    lines += ["", str(issue.get("description") or "").strip(), ""]
    if journal:
        lines += ["## Journal", ""]
    for entry in journal:
        lines.append(f"### {str(entry.get('created_on', ''))[:10]} — {_name(entry.get('user'))}")
        lines += [_detail(tracker, d) for d in entry.get("details", []) if isinstance(d, dict)]
        if entry.get("notes"):
            lines += ["", str(entry["notes"]).strip()]
        lines.append("")
    return "\n".join(lines).strip() + "\n"


def _text_bytes(tracker: Tracker, issue: dict[str, Any], journal: list[dict[str, Any]]) -> bytes:
    return _text(tracker, issue, journal).encode()


def _private_text(issue: dict[str, Any], notes: list[dict[str, Any]]) -> str:
    lines = [f"# #{issue['id']} {issue.get('subject', '')}: private notes", ""]
    for entry in notes:
        lines += [
            f"### {str(entry.get('created_on', ''))[:10]} — {_name(entry.get('user'))}",
            "",
            str(entry["notes"]).strip(),
            "",
        ]
    return "\n".join(lines).strip() + "\n"


def redmine_permissions(reading: Reading) -> Iterator[Event]:
    """The permission sync: who Redmine shows each issue (and its private notes) to now, nothing else read."""
    client = _client(reading)
    try:
        yield Activity(f"Reading who may read what in Redmine at {client.base}")
        tracker = _tracker(reading, client)
        issues = tracker.issues()
        seen, anonymous = tracker.visible()
        private = {key for key, last in reading.state.get("issues", {}).items() if last.get("private")}
        for issue in issues:
            issue_id = int(issue["id"])
            readers, access = tracker.access(issue_id, seen, anonymous)
            yield Access(tracker.key(issue), access)
            if str(issue_id) in private:
                shown = tracker.private_readers(issue_id, readers)
                yield Access(tracker.key(issue, private=True), access_list(shown, -1, False))
        yield Done(report={"unmapped": tracker.unmapped({int(i["id"]) for i in issues})})
    finally:
        client.close()
