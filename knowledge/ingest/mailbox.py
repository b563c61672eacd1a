"""A shared mailbox's producers: its folders over IMAP (IMAPClient), read-only, each conversation a document, and the
folders' ACLs (RFC 4314, as Dovecot applies them) as their access lists.

- Threads: the messages of a folder are grouped into conversations by their References and In-Reply-To headers
  (the first message a reply refers to is the thread's root); each conversation is a document
  (`<folder>/<subject>-<id>.md`): its subject, then each message's sender, date and own words — quoted history
  ("On … wrote:", "> …", a forwarded original) and signatures ("-- ") left out. Attachments are documents of their own
  (`<folder>/<subject>-<id>/<file name>`), read by the normal extraction, with the conversation's access. The folder
  is a tag. Each message added to a conversation is a version: the first sync stores the conversation as it stood
  after each message (up to `history_depth`), each served over its own time.
- Incremental: a folder's UIDVALIDITY and UIDs are kept; a sync fetches only the messages it has not seen (a changed
  UIDVALIDITY reads the folder again), re-renders the conversations they join or left, and retires conversations
  whose messages are all gone (a conversation moved to another folder comes in there).
- Rights: each folder's ACL (GETACL: the connector's account must hold the `a` right, as the mailbox's owner does)
  decides who reads its conversations. A member is the mail user the source's `people` option names, else the one
  with their user name or their e-mail address; their groups are the tenant's groups (the directory behind both).
  Rights are applied in Dovecot's precedence — group-override, user, group, authenticated, anyone: the first kind of
  identifier with an entry that matches decides, negative entries (`-name`) take rights away — and a member reads
  when `r` is left. A folder whose ACL cannot be read is not indexed (fail closed). Rights are synced with every
  sync and, on their own, by the permission sync (every `permission_minutes`, default 5): payload changes only.
- Where: `imaps://user:password@host:993/` (or `imap://`), only a server the operator names in
  RAG_ALLOWED_MAIL_SERVERS. Faults (the server unreachable, a refused login, a broken answer) fail the sync with the
  reason and change nothing more; a message too large, or an attachment over RAG_MAX_FILE_BYTES, is listed skipped.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import re
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError, LoginError

from knowledge.ingest.connector import ConnectorConfig, access_list, identities, people_map, tenant_members
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
    Skipped,
    SourceProblem,
    Unchanged,
    option,
)
from knowledge.locations import FolderNotAllowed
from knowledge.models import Document, Status
from knowledge.sealed import split_credential
from tenants.models import Group

MAX_MESSAGE_BYTES = 25 * 1024 * 1024  # a message larger than this is listed skipped, never fetched
FETCH_BATCH = 100  # UIDs a fetch of sizes or headers asks for at once
BODY_BATCH = 10  # whole messages a fetch asks for at once (each at most MAX_MESSAGE_BYTES)
QUOTE_START = re.compile(
    r"^(On .{3,200} wrote:|El .{3,200} escribió:|-{2,} ?(Original Message|Forwarded message|Mensaje original) ?-{2,}"
    r"|From: .+ Sent: .+)\s*$",
    re.IGNORECASE,
)
SLUG_RE = re.compile(r"[^a-z0-9]+")
IDENTIFIER_ORDER = ("group-override", "user", "group", "authenticated", "anyone")


class MailProblem(SourceProblem):
    """The mailbox cannot be read at all; the message says why."""


@dataclass(frozen=True)
class MailConfig(ConnectorConfig):
    """A shared mailbox's options: the connectors' own, and the folders read."""

    folders: str = option(
        _("Folders (IMAP; empty: all)"),
        _("The folders read, comma separated, such as INBOX, Support/Solved."),
        max_length=2000,
    )

    @property
    def wanted(self) -> set[str]:
        return self.listed(self.folders)


def mail_location_check(location: str, tenant_slug: str | None = None) -> str:
    """`imaps://user:password@host:port/`: a server the operator names in RAG_ALLOWED_MAIL_SERVERS (host:port, or the
    host alone for the scheme's port). Returns it as given, the login in it kept for the source to seal apart."""
    bare, credential = split_credential(location.strip())
    parts = urlsplit(bare)
    if parts.scheme not in ("imap", "imaps") or not parts.hostname:
        raise FolderNotAllowed("A mailbox's address is imaps://user:password@host:993/ (or imap://).")
    port = parts.port or (993 if parts.scheme == "imaps" else 143)
    allowed = {entry.strip().lower() for entry in settings.RAG_ALLOWED_MAIL_SERVERS}
    if f"{parts.hostname.lower()}:{port}" not in allowed and parts.hostname.lower() not in allowed:
        raise FolderNotAllowed(
            f"{parts.scheme}://{parts.hostname}:{port} is not a mail server this server allows "
            "(RAG_ALLOWED_MAIL_SERVERS)."
        )
    return location.strip()


class Mailbox:
    """One IMAP session, read-only (folders are examined, messages fetched with BODY.PEEK: nothing marked read)."""

    def __init__(self, location: str, credential: str) -> None:
        parts = urlsplit(location)
        self.deadline = time.monotonic() + settings.RAG_WIKI_SYNC_DEADLINE_S
        self.where = f"{parts.scheme}://{parts.hostname}:{parts.port or (993 if parts.scheme == 'imaps' else 143)}"
        user, _sep, password = credential.partition(":")
        self.login = unquote(user)
        if not user:
            raise MailProblem(
                f"The mailbox's address names no login to read {self.where} with: give it as "
                "imaps://user:password@host/."
            )
        try:
            context = ssl.create_default_context() if parts.scheme == "imaps" else None
            self.client = IMAPClient(
                parts.hostname,
                port=parts.port or (993 if context else 143),
                ssl=bool(context),
                ssl_context=context,
                timeout=settings.RAG_WEB_TIMEOUT_S,
            )
        except (TimeoutError, OSError, ssl.SSLError, IMAPClientError) as exc:
            raise MailProblem(f"The mail server {self.where} cannot be reached ({type(exc).__name__}).") from exc
        try:
            self.client.login(self.login, unquote(password))
        except LoginError:
            self.close()
            raise MailProblem(f"The mail server {self.where} refused the connector's login {self.login}.") from None
        except (OSError, IMAPClientError) as exc:
            self.close()
            raise MailProblem(f"The mail server {self.where} failed during login ({type(exc).__name__}).") from exc

    def folders(self, wanted: set[str]) -> list[str]:
        names = []
        for flags, _delimiter, name in self._guard(self.client.list_folders):
            if b"\\Noselect" in flags or b"\\NonExistent" in flags:
                continue
            text = name if isinstance(name, str) else name.decode()
            if text.startswith("shared/") or (wanted and text not in wanted):
                continue  # others' mailboxes shared with the connector are not this mailbox
            names.append(text)
        return sorted(names)

    def acl(self, folder: str) -> list[tuple[str, str]]:
        return [(_text(who), _text(rights)) for who, rights in self._guard(self.client.getacl, folder)]

    def examine(self, folder: str) -> tuple[int, list[int]]:
        status = self._guard(self.client.select_folder, folder, readonly=True)
        uids = sorted(int(uid) for uid in self._guard(self.client.search, ["ALL"]))
        return int(status[b"UIDVALIDITY"]), uids

    def sizes(self, uids: list[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        for start in range(0, len(uids), FETCH_BATCH):
            rows = self._guard(self.client.fetch, uids[start : start + FETCH_BATCH], ["RFC822.SIZE"])
            found.update({int(uid): int(row.get(b"RFC822.SIZE", 0)) for uid, row in rows.items()})
        return found

    def headers(self, uids: list[int]) -> dict[int, bytes]:
        """The messages' headers only: what threading needs, a few hundred bytes each."""
        found: dict[int, bytes] = {}
        for start in range(0, len(uids), FETCH_BATCH):
            rows = self._guard(self.client.fetch, uids[start : start + FETCH_BATCH], ["BODY.PEEK[HEADER]"])
            found.update({int(uid): bytes(row.get(b"BODY[HEADER]", b"")) for uid, row in rows.items()})
        return found

    def messages(self, uids: list[int]) -> dict[int, bytes]:
        """Whole messages, a few at a time (a conversation's, when it is written: never a folder's at once)."""
        found: dict[int, bytes] = {}
        for start in range(0, len(uids), BODY_BATCH):
            rows = self._guard(self.client.fetch, uids[start : start + BODY_BATCH], ["BODY.PEEK[]"])
            found.update({int(uid): bytes(row.get(b"BODY[]", b"")) for uid, row in rows.items()})
        return found

    def _guard(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() > self.deadline:  # a server that drips: each read has its timeout, the sync this
            raise MailProblem(
                f"The mail server {self.where}: over the sync's time limit "
                f"(RAG_WIKI_SYNC_DEADLINE_S = {settings.RAG_WIKI_SYNC_DEADLINE_S})"
            )
        try:
            return call(*args, **kwargs)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            raise MailProblem(f"The mail server {self.where} stopped answering ({type(exc).__name__}).") from exc
        except IMAPClientError as exc:
            raise MailFault(str(exc)[:300]) from exc

    def close(self) -> None:
        try:
            self.client.logout()
        except Exception:  # noqa: BLE001  (closing a session that is already gone)
            pass


class MailFault(Exception):
    """The server refused one command (a folder whose ACL it will not show); the message is the server's."""


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass
class Message:
    uid: int
    message_id: str
    root: str
    subject: str
    sender: str
    when: datetime
    words: str
    attachments: list[tuple[str, bytes]] = field(default_factory=list)


def parse(uid: int, raw: bytes) -> Message:
    """One message: its thread root (the first message it refers to), its sender, date and own words, attachments."""
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    own = str(parsed.get("Message-ID", "") or "").strip() or f"<uid-{uid}>"
    references = re.findall(r"<[^>]+>", str(parsed.get("References", "") or ""))
    reply_to = re.findall(r"<[^>]+>", str(parsed.get("In-Reply-To", "") or ""))
    root = references[0] if references else reply_to[0] if reply_to else own
    try:
        when = parsedate_to_datetime(str(parsed.get("Date", "")))
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
    except (TypeError, ValueError):
        when = datetime.fromtimestamp(0, UTC)
    body = parsed.get_body(preferencelist=("plain", "html"))
    text = ""
    if body is not None:
        try:
            text = body.get_content()
        except (LookupError, ValueError):  # an unknown charset: the bytes as UTF-8, what cannot be read replaced
            payload = body.get_payload(decode=True)
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
        if body.get_content_type() == "text/html":
            text = _html_text(text)
    attachments = []
    for part in parsed.iter_attachments():
        name = part.get_filename() or ""
        data = part.get_payload(decode=True)
        if name and isinstance(data, bytes):
            attachments.append((name, data))
    subject = re.sub(r"^\s*((re|fw|fwd|aw|rv)\s*:\s*)+", "", str(parsed.get("Subject", "") or ""), flags=re.I)
    return Message(
        uid,
        own,
        root,
        subject.strip() or "(no subject)",
        str(parsed.get("From", "") or ""),
        when,
        own_words(text),
        attachments,
    )


def _html_text(html: str) -> str:
    from lxml import html as lxml_html

    try:
        return lxml_html.fromstring(html).text_content()
    except (ValueError, TypeError):
        return ""


def own_words(text: str) -> str:
    """A message's own words: quoted history (an attribution line and what follows it, "> " lines, a forwarded
    original) and the signature ("-- " and what follows) left out."""
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.rstrip() == "--" or line == "-- " or QUOTE_START.match(line.strip()):
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept).strip()


def _slug(text: str) -> str:
    return SLUG_RE.sub("-", text.lower()).strip("-")[:60] or "conversation"


def thread_key(folder: str, root: str, subject: str) -> str:
    return f"{folder}/{_slug(subject)}-{hashlib.sha1(root.encode()).hexdigest()[:10]}.md"


def attachment_key(thread: str, name: str) -> str:
    safe = re.sub(r"[\x00-\x1f/\\:]+", "_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .") or "attachment"
    return f"{thread.removesuffix('.md')}/{safe[:120]}"


def render(folder: str, messages: list[Message]) -> str:
    first = messages[0]
    lines = [f"# {first.subject}", "", f"Folder: {folder} · {len(messages)} message(s)", ""]
    for message in messages:
        lines += [f"## {message.sender} — {message.when:%Y-%m-%d %H:%M}", "", message.words or "(no text)", ""]
        if message.attachments:
            lines.append("Attachments: " + ", ".join(name for name, _data in message.attachments))
            lines.append("")
    return "\n".join(lines).strip() + "\n"


def _render_bytes(folder: str, messages: list[Message]) -> bytes:
    return render(folder, messages).encode()


def member_groups(source: Any) -> dict[str, set[str]]:
    """Each member's groups in the tenant (their user name → group names): the groups a mail ACL names."""
    found: dict[str, set[str]] = {}
    rows = Group.objects.filter(tenant_id=source.tenant_id).values_list("name", "members__username")
    for group, username in rows:
        if username:
            found.setdefault(username, set()).add(group)
    return found


def rights_of(acl: list[tuple[str, str]], login: str | None, groups: set[str], owner: str) -> set[str]:
    """The rights a folder's ACL leaves a mail user (None: an anonymous visitor), in Dovecot's precedence."""
    positive: dict[str, list[str]] = {kind: [] for kind in IDENTIFIER_ORDER}
    negative: set[str] = set()
    for who, rights in acl:
        name = who[1:] if who.startswith("-") else who
        kind, matches = _match(name, login, groups, owner)
        if not matches:
            continue
        if who.startswith("-"):
            negative |= set(rights)
        elif kind in positive:
            positive[kind].append(rights)
    for kind in IDENTIFIER_ORDER:
        if positive[kind]:
            return set("".join(positive[kind])) - negative
    return set()


def _match(name: str, login: str | None, groups: set[str], owner: str) -> tuple[str, bool]:
    if name.startswith("$"):  # Dovecot's group identifier
        return "group", name[1:] in groups
    if name.startswith("group-override="):
        return "group-override", name.split("=", 1)[1] in groups
    if name.startswith("group="):
        return "group", name.split("=", 1)[1] in groups
    if name in ("anyone", "anonymous"):
        return "anyone", True
    if name == "authenticated":
        return "authenticated", login is not None
    if name == "owner" or name == owner:
        return "owner", False  # the mailbox's own account (the connector's): no member is it
    return "user", login is not None and name.removeprefix("user=") == login


@dataclass
class Rights:
    """Who each member is in the mail system, and the access list each folder's ACL gives."""

    people: dict[str, str | None]
    groups: dict[str, set[str]]
    owner: str

    unmapped: dict[str, int] = field(default_factory=dict)  # an ACL's people and groups who are no one here → items

    def folder(self, acl: list[tuple[str, str]], items: int = 0) -> tuple[str, ...]:
        """The folder's access list; the identifiers its ACL lets read that are no one here are counted, with the
        folder's `items`, in `unmapped` (their access is not carried: fail closed)."""
        readers = [
            m for m, login in self.people.items() if "r" in rights_of(acl, login, self.groups.get(m, set()), self.owner)
        ]
        logins = {login for login in self.people.values() if login}
        groups = set().union(*self.groups.values()) if self.groups else set()
        special = {"anyone", "anonymous", "authenticated", "owner", self.owner}
        for who, rights in acl:
            if who.startswith("$"):
                nobody = who[1:] not in groups
            else:
                nobody = not who.startswith("-") and "=" not in who and who not in special | logins
            if nobody and "r" in rights:
                self.unmapped[who] = self.unmapped.get(who, 0) + items
        return access_list(readers, len(self.people), "r" in rights_of(acl, None, set(), self.owner))

    def report(self) -> list[dict[str, Any]]:
        return [{"principal": who, "documents": count} for who, count in sorted(self.unmapped.items())][:200]


def _rights(reading: Reading, mailbox: Mailbox) -> Rights:
    people = identities(reading.source, reading.config.people)
    if "@" in mailbox.login:  # logins are e-mail addresses: a member no pair names is their address
        mails = dict(tenant_members(reading.source))
        mapped = people_map(reading.config.people)
        for name in people:
            if name not in mapped and mails.get(name):
                people[name] = mails[name]
    return Rights(people, member_groups(reading.source), mailbox.login)


def _open(reading: Reading) -> Mailbox:
    bare, _credential = split_credential(reading.location)
    return Mailbox(bare, reading.credential)


def produce_mailbox(reading: Reading) -> Iterator[Event]:
    """The mailbox's conversations, their messages since the last sync, their folders' rights (see the module)."""
    mailbox = _open(reading)
    try:
        rights = _rights(reading, mailbox)
        folders = mailbox.folders(reading.config.wanted)
        known: dict[str, Any] = dict(reading.state.get("folders", {}))
        held = set(
            Document.objects.filter(source=reading.source)
            .exclude(status=Status.RETIRED)
            .values_list("document_key", flat=True)
        )
        depth = reading.config.depth
        state: dict[str, Any] = {}
        position = 0
        for folder in folders:
            yield Activity(f"Reading the folder {folder}")
            try:
                acl = mailbox.acl(folder)
            except MailFault as fault:
                yield Failed(folder, f"its ACL cannot be read ({fault}): not indexed", keep=False)
                continue
            validity, uids = mailbox.examine(folder)
            last = known.get(folder, {})
            seen: dict[str, list] = dict(last.get("uids", {})) if last.get("validity") == validity else {}
            sizes = mailbox.sizes([uid for uid in uids if str(uid) not in seen])
            too_big = {uid for uid, size in sizes.items() if size > MAX_MESSAGE_BYTES}
            for uid in sorted(too_big):
                yield Skipped(f"{folder}/#{uid}", f"a message of {sizes[uid]:,} bytes: over {MAX_MESSAGE_BYTES:,}")
            new = sorted(uid for uid in sizes if uid not in too_big)
            fetched = {uid: parse(uid, raw) for uid, raw in mailbox.headers(new).items()}  # threads, subjects
            threads: dict[str, list[int]] = {}
            for uid in uids:
                if uid in too_big:
                    continue
                if uid in fetched:
                    threads.setdefault(fetched[uid].root, []).append(uid)
                elif str(uid) in seen:
                    threads.setdefault(seen[str(uid)][0], []).append(uid)
            access = rights.folder(acl, len(threads))
            changed = {fetched[uid].root for uid in fetched}
            before: dict[str, set[int]] = {}
            for uid, (root, _subject) in ((int(u), v) for u, v in seen.items()):
                before.setdefault(root, set()).add(uid)
            changed |= {root for root, old in before.items() if root in threads and old - set(threads[root])}
            yield Planned(position + len(threads))
            kept: dict[str, list] = {}
            for root, members in sorted(threads.items()):
                subject = fetched[members[0]].subject if members[0] in fetched else seen[str(members[0])][1]
                key = thread_key(folder, root, subject)
                for uid in members:
                    kept[str(uid)] = [root, subject]
                if root not in changed and key in held:
                    yield Unchanged(key)
                    yield Access(key, access)
                    for attached in last.get("attachments", {}).get(key, []):
                        yield Unchanged(attached, counted=False)
                        yield Access(attached, access)
                    carried = last.get("attachments", {}).get(key, [])
                    state.setdefault(folder, {}).setdefault("attachments", {})[key] = carried
                    position += 1
                    continue
                bodies = {uid: parse(uid, raw) for uid, raw in mailbox.messages(members).items()}  # this one's only
                messages = sorted(bodies.values(), key=lambda m: m.when)
                if not messages:  # all expunged since the folder was listed: not kept, so retired
                    continue
                yield from _thread(
                    folder,
                    key,
                    messages,
                    access,
                    position,
                    first=root not in before,
                    depth=depth,
                    old=len(before.get(root, ())),
                    state=state,
                )
                position += 1
            state.setdefault(folder, {}).update({"validity": validity, "uids": kept})
        report = {"mailbox": {"folders": len(folders), "members": len(rights.people)}, "unmapped": rights.report()}
        yield Done(state={"folders": state}, report=report)
    finally:
        mailbox.close()


def _thread(
    folder: str,
    key: str,
    messages: list[Message],
    access: tuple[str, ...],
    position: int,
    *,
    first: bool,
    depth: int,
    old: int,
    state: dict[str, Any],
) -> Iterator[Event]:
    """A conversation as it stands, the messages since the last sync as its earlier versions, and its attachments."""
    start = max(len(messages) - depth, 1) if first else max(old + 1, 1)
    times = [m.when for m in messages]
    past = tuple(
        Past(
            partial(_render_bytes, folder, messages[:shown]),
            times[shown - 1].timestamp(),
            _commit(messages[shown - 1]),
            (times[shown - 1], times[shown]),
        )
        for shown in range(start, len(messages))
    )
    yield Item(
        key,
        data=render(folder, messages).encode(),
        position=position,
        mtime=times[-1].timestamp(),
        location=f"{folder} — {messages[0].subject}",
        commit=_commit(messages[-1]),
        history=past,
        tags=(folder,),
        access=access,
    )
    attached = []
    for message in messages:
        for name, data in message.attachments:
            target = attachment_key(key, name)
            if len(data) > settings.RAG_MAX_FILE_BYTES:
                yield Skipped(target, f"an attachment of {len(data):,} bytes: over RAG_MAX_FILE_BYTES")
                continue
            attached.append(target)
            yield Item(
                target,
                data=data,
                position=position,
                mtime=message.when.timestamp(),
                tags=(folder,),
                location=f"{folder} — {messages[0].subject}: {name}",
                access=access,
            )
    state.setdefault(folder, {}).setdefault("attachments", {})[key] = attached


def _commit(message: Message) -> dict[str, Any]:
    return {
        "sha": message.message_id.strip("<>")[:60],
        "author": message.sender,
        "date": message.when.isoformat(),
        "message": message.words.splitlines()[0][:200] if message.words else message.subject,
    }


def mailbox_permissions(reading: Reading) -> Iterator[Event]:
    """The permission sync: each folder's ACL now, applied to the conversations (and attachments) the last sync kept."""
    mailbox = _open(reading)
    try:
        rights = _rights(reading, mailbox)
        folders = set(mailbox.folders(reading.config.wanted))
        for folder, last in reading.state.get("folders", {}).items():
            if folder not in folders:
                continue  # its documents close (the run closes what it is not told about)
            threads = {tuple(v) for v in last.get("uids", {}).values()}
            try:
                access = rights.folder(mailbox.acl(folder), len(threads))
            except MailFault:
                access = ()
            for root, subject in threads:
                key = thread_key(folder, root, subject)
                yield Access(key, access)
                for attached in last.get("attachments", {}).get(key, []):
                    yield Access(attached, access)
        yield Done(report={"unmapped": rights.report()})
    finally:
        mailbox.close()
