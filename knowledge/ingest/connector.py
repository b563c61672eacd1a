"""What the connectors to systems with people of their own share (a wiki, an issue tracker: dokuwiki.py, redmine.py):
the address check, who each member of the tenant is in the system, and one access list from what the
system says each of them may read.

Who a member is there: the user an admin names in the source's `people` option (`member=login` pairs), else the user
of the same name (one directory behind both), else — where the system tells its users' e-mail addresses — the user
with the member's e-mail address. A member who is no one there reads what the system shows an anonymous visitor.

An item every member and an anonymous visitor may read is open to the tenant (`tenant`); otherwise it is open to
exactly the members the system admits (`user:<name>`), and an item it admits none of them to is open to the tenant's
admins only (fail closed): a job lists those."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_lazy as _

from knowledge.ingest.producer import KindConfig, option
from knowledge.locations import web_location_check
from knowledge.sealed import split_credential
from tenants.models import Membership
from tenants.principals import TENANT

PAIR_RE = re.compile(r"^\s*([^=\s,]+)\s*=\s*([^=\s,]+)\s*$")
PERMISSION_MINUTES = 5  # a permission sync's default interval: how long someone the system locked out still reads
HISTORY_DEPTH = 50  # versions of each item a first sync keeps


@dataclass(frozen=True)
class ConnectorConfig(KindConfig):
    """The options every connector has (each kind adds its own: a namespace, projects, folders)."""

    people: str = option(
        _("People (user names there)"),
        _(
            "member=login pairs, comma separated, for members who are someone else there than their user name or "
            "e-mail address here says; everyone else is matched by user name, then by e-mail address."
        ),
        max_length=4000,
    )
    permission_minutes: int | None = option(
        _("Minutes between permission syncs"),
        _("How often the system's read rights are read again on their own (blank: 5)."),
        default=None,
    )
    history_depth: int | None = option(
        _("History depth"),
        _("Revisions, journal entries or messages of each item the first sync keeps as versions (blank: 50)."),
        default=None,
    )

    def check(self) -> None:
        people_map(self.people)
        if self.permission_minutes is not None and not 1 <= int(self.permission_minutes) <= 1440:
            raise ValueError("A permission sync runs every 1 to 1,440 minutes.")
        if self.history_depth is not None and not 1 <= int(self.history_depth) <= 1000:
            raise ValueError("The history depth is a number of versions from 1 to 1,000.")

    @property
    def every(self) -> int:
        return int(self.permission_minutes or PERMISSION_MINUTES)

    @property
    def depth(self) -> int:
        return int(self.history_depth or HISTORY_DEPTH)

    @staticmethod
    def listed(text: str) -> set[str]:
        return {part.strip() for part in (text or "").split(",") if part.strip()}


def people_map(text: str) -> dict[str, str]:
    """The `people` option as {member's user name: the system's user name}; ValueError names a pair it cannot read."""
    pairs: dict[str, str] = {}
    for part in filter(str.strip, (text or "").replace("\n", ",").split(",")):
        match = PAIR_RE.match(part)
        if match is None:
            raise ValueError(f"{part.strip()[:60]!r} is not a member=login pair.")
        pairs[match.group(1)] = match.group(2)
    return pairs


def api_location_check(location: str, tenant_slug: str | None = None) -> str:
    """A system's address (its base URL) with the connector's credential in it (`user:password@` or `key@`): the
    address is checked as a website's start URL is (RAG_ALLOWED_WEB_PREFIXES), the credential is kept apart, sealed."""
    bare, credential = split_credential(location)
    checked = web_location_check(bare, tenant_slug)
    if not checked.endswith("/"):
        checked += "/"
    if not credential:
        return checked
    scheme, rest = checked.split("://", 1)
    return f"{scheme}://{credential}@{rest}"


def tenant_members(source: Any) -> list[tuple[str, str]]:
    """The tenant's active members: (user name, e-mail address)."""
    rows = Membership.objects.filter(tenant_id=source.tenant_id, user__is_active=True)
    return list(rows.values_list("user__username", "user__email"))


def identities(source: Any, people: str, logins: dict[str, str] | None = None) -> dict[str, str | None]:
    """Each active member (their user name here) → the system's user they are, or None (an anonymous visitor).
    `logins`: the system's users, login → e-mail address, when it tells them (matched by name, then by address);
    without it every member is looked up under the mapped name or their own."""
    mapped = people_map(people)
    by_mail = {mail.lower(): login for login, mail in (logins or {}).items() if mail}
    found: dict[str, str | None] = {}
    for name, mail in tenant_members(source):
        if name in mapped:
            found[name] = mapped[name]
        elif logins is None or name in logins:
            found[name] = name
        else:
            found[name] = by_mail.get((mail or "").lower())
    return found


def access_list(readers: Iterable[str], members: int, anonymous: bool) -> tuple[str, ...]:
    """The access list of an item the system admits these members to (of `members` in all), and an anonymous visitor
    or not: the tenant when everyone is, else exactly them (none: admins only)."""
    admitted = sorted(set(readers))
    if anonymous and len(admitted) == members:
        return (TENANT,)
    return tuple(f"user:{name}" for name in admitted)
