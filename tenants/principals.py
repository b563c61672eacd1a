"""Who a request reads as: the one function that turns a member or an API key into access principals.

An access list (a source's, or a document's own) names principals:
- `tenant`: every member and every key of the tenant (the default, and what existed before access lists);
- `group:<name>`: the members of one of the tenant's groups;
- `user:<username>`: one member.
A viewer sees a document when they hold one of the principals of its access list. A tenant admin, and a key
acting for `all`, see everything (`principals is None`). Everything else that decides visibility reads a Viewer
made here: knowledge/selectors.py applies it to SQL, knowledge/index/vectorstore.py to the vector query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.utils import timezone

from core.problems import DomainError
from tenants.models import ApiKey, Group, Membership, Tenant

TENANT = "tenant"
ALL = "all"  # only in a key's acts_for: every document of the tenant


class UnknownPrincipal(ValueError):
    """An access list or an acts-for list names something the tenant does not have (the message names it)."""


@dataclass(frozen=True)
class Viewer:
    """The tenant a request reads and the principals it holds there (None: it sees every document)."""

    tenant: Tenant
    principals: frozenset[str] | None

    @classmethod
    def everything(cls, tenant: Tenant) -> Viewer:
        """For work the tenant itself does (its admins' evaluation runs, reindexing, commands): no restriction."""
        return cls(tenant=tenant, principals=None)

    @property
    def sees_all(self) -> bool:
        return self.principals is None

    @property
    def principal_list(self) -> list[str] | None:
        """The principals, sorted (the vector filter's MatchAny values); None when nothing is filtered."""
        return None if self.principals is None else sorted(self.principals)

    def sees(self, access: Iterable[str]) -> bool:
        return self.principals is None or not self.principals.isdisjoint(access)


def admits_all_of(outer: Iterable[str], inner: Iterable[str]) -> bool:
    """Whether every viewer an `inner` access list admits is admitted by `outer` too, whatever groups they are in
    now or later: `outer` is open to the tenant, or names every principal `inner` names. (A viewer let in by both
    through different principals, say user:bob and group:hr, is not counted: membership changes.)"""
    wider = set(outer)
    return TENANT in wider or set(inner) <= wider


class _Directory:
    """What resolving principals reads about one tenant: its groups and, per username, the member's role and groups.
    Loaded for the names asked about only (a request), or for everyone (the list of who sees a document)."""

    def __init__(self, tenant: Tenant, usernames: Iterable[str] | None = None, *, groups: bool = True) -> None:
        members = Membership.objects.for_tenant(tenant).select_related("user")
        if usernames is not None:
            members = members.filter(user__username__in=list(usernames))
        self.admins: set[str] = set()
        self.member_groups: dict[str, set[str]] = {}
        for membership in members:
            name = membership.user.get_username()
            self.member_groups[name] = set()
            if membership.is_admin:
                self.admins.add(name)
        self.groups: set[str] = set()
        if groups:
            self.groups = set(Group.objects.for_tenant(tenant).values_list("name", flat=True))
            through = Group.members.through.objects.filter(group__tenant=tenant, user__username__in=self.member_groups)
            for username, group in through.values_list("user__username", "group__name"):
                self.member_groups[username].add(group)

    def member(self, username: str) -> frozenset[str] | None:
        """A member's principals (None: an admin, who sees everything); an empty set for someone not a member."""
        if username in self.admins:
            return None
        if username not in self.member_groups:
            return frozenset()
        return frozenset({TENANT, f"user:{username}", *(f"group:{g}" for g in self.member_groups[username])})

    def key(self, acts_for: list[str]) -> frozenset[str] | None:
        """A key's principals: `tenant` always (it is the tenant's key), plus what its acts-for principals hold."""
        if ALL in acts_for:
            return None
        held: set[str] = {TENANT}
        for principal in acts_for:
            if principal.startswith("user:"):
                theirs = self.member(principal[5:])
                if theirs is None:  # a key acting for an admin sees what the admin sees
                    return None
                held |= theirs
            elif principal.startswith("group:") and principal[6:] in self.groups:
                held.add(principal)  # a group deleted since the key was issued opens nothing
        return frozenset(held)


def _key_usernames(acts_for: list[str]) -> list[str]:
    return [p[5:] for p in acts_for if p.startswith("user:")]


def viewer_for(*, tenant: Tenant, membership: Membership | None = None, api_key: ApiKey | None = None) -> Viewer:
    """The one answer to "which principals does this request act for", evaluated now (a group or role change
    applies to the next request). A member: admins see everything, staff hold `tenant`, `user:<them>` and their
    groups. A key: `tenant` always, plus what its acts-for principals hold; a key acting for a user holds what that
    user holds today (nothing more than `tenant` once they leave)."""
    if membership is not None:
        if membership.tenant_id != tenant.pk:
            raise ValueError("A membership of another tenant.")
        if membership.is_admin:
            return Viewer(tenant, None)
        return Viewer(
            tenant, _Directory(tenant, [membership.user.get_username()]).member(membership.user.get_username())
        )
    if api_key is None or api_key.tenant_id != tenant.pk:
        raise ValueError("A request reads as a member or as a key of its tenant.")
    acts_for = list(api_key.acts_for or [TENANT])
    if acts_for == [TENANT]:  # most keys: nothing to look up
        return Viewer(tenant, frozenset({TENANT}))
    needs_groups = any(p.startswith(("group:", "user:")) for p in acts_for)
    return Viewer(tenant, _Directory(tenant, _key_usernames(acts_for), groups=needs_groups).key(acts_for))


def everyone(tenant: Tenant) -> tuple[list[tuple[Membership, Viewer]], list[tuple[ApiKey, Viewer]]]:
    """Every member and every active key of the tenant with what they see, resolved as viewer_for resolves them, in
    a few queries however many there are (the document page's "who sees it")."""
    directory = _Directory(tenant)
    members = [
        (m, Viewer(tenant, directory.member(m.user.get_username())))
        for m in Membership.objects.for_tenant(tenant).select_related("user").order_by("user__username")
    ]
    keys = [
        (k, Viewer(tenant, directory.key(list(k.acts_for or [TENANT]))))
        for k in ApiKey.objects.for_tenant(tenant).filter(revoked_at__isnull=True)
    ]
    return members, keys


def principals_check(*, tenant: Tenant, principals: Iterable[str], allow_all: bool = False) -> list[str]:
    """The principals, trimmed and without repeats, or UnknownPrincipal naming each one the tenant lacks: a group
    it has not created, a user who is not its member, anything else. `all` only where allow_all (acts-for)."""
    wanted: list[str] = []
    for raw in principals:
        principal = str(raw).strip()
        if principal and principal not in wanted:
            wanted.append(principal)
    groups = {f"group:{name}" for name in Group.objects.for_tenant(tenant).values_list("name", flat=True)}
    usernames = [p[5:] for p in wanted if p.startswith("user:")]
    members = {
        f"user:{name}"
        for name in Membership.objects.for_tenant(tenant)
        .filter(user__username__in=usernames)
        .values_list("user__username", flat=True)
    }
    known = {TENANT, *groups, *members, *([ALL] if allow_all else [])}
    unknown = [p for p in wanted if p not in known]
    if unknown:
        raise UnknownPrincipal(
            "Unknown " + ", ".join(_describe(p) for p in unknown) + f" in tenant {tenant.slug}"
            + (" (use tenant, group:<name>, user:<username> or all)." if allow_all
               else " (use tenant, group:<name> or user:<username>).")
        )  # fmt: skip
    if allow_all and ALL in wanted and len(wanted) > 1:
        raise UnknownPrincipal("A key acts for all, or for principals: not both.")
    return wanted


def _describe(principal: str) -> str:
    if principal.startswith("group:"):
        return f"group {principal[6:]!r}"
    if principal.startswith("user:"):
        return f"user {principal[5:]!r}"
    return f"principal {principal!r}"


def parse_principal_list(text: str) -> list[str]:
    """ "group:hr, user:bob" (a command-line or form value) → ["group:hr", "user:bob"]."""
    return [part.strip() for part in text.replace(";", ",").split(",") if part.strip()]


def principal_names(tenant: Tenant) -> list[str]:
    """What an access list or a key's acts-for may name in this tenant: tenant, its groups, its members."""
    groups = Group.objects.for_tenant(tenant).values_list("name", flat=True)
    users = Membership.objects.for_tenant(tenant).order_by("user__username").values_list("user__username", flat=True)
    return [TENANT, *(f"group:{g}" for g in groups), *(f"user:{u}" for u in users)]


def viewer_of(tenant: Tenant, who: str) -> Viewer:
    """What `who` reads, resolved as its own requests resolve it (the admin's "see as"): `user:<name>` (a member,
    as viewer_for reads their membership), `key:<prefix>` (an active key), or `group:<name>` (someone whose only
    principals are the tenant and that group). UnknownPrincipal for anything else."""
    kind, _, name = who.strip().partition(":")
    if kind == "user":
        membership = Membership.objects.for_tenant(tenant).filter(user__username=name).select_related("user").first()
        if membership is not None:
            return viewer_for(tenant=tenant, membership=membership)
    elif kind == "key":
        api_key = ApiKey.objects.for_tenant(tenant).filter(prefix=name, revoked_at__isnull=True).first()
        if api_key is not None:
            return viewer_for(tenant=tenant, api_key=api_key)
    elif kind == "group" and Group.objects.for_tenant(tenant).filter(name=name).exists():
        return Viewer(tenant, frozenset({TENANT, who.strip()}))
    raise UnknownPrincipal(f"{who!r} is no member, group or active key of {tenant.slug}.")


def access_change(tenant: Tenant, before: Iterable[str], after: Iterable[str]) -> tuple[list[str], list[str]]:
    """Who would gain and who would lose sight of what an access list governs if it changed from `before` to
    `after`: members by username, keys by prefix (admins, and keys acting for `all`, see everything either way)."""
    old, new = list(before), list(after)
    members, keys = everyone(tenant)
    gains, loses = [], []
    for label, viewer in [(m.user.get_username(), v) for m, v in members] + [(f"key {k.prefix}…", v) for k, v in keys]:
        if viewer.sees_all:
            continue
        saw, sees = viewer.sees(old), viewer.sees(new)
        if sees and not saw:
            gains.append(label)
        elif saw and not sees:
            loses.append(label)
    return gains, loses


class AccessEnded(DomainError, PermissionError):
    """The requester lost its access while a long request of theirs was running (an answer being streamed)."""

    status, code = 403, "access_ended"


def still_admitted(*, tenant: Tenant, user: object = None, api_key: ApiKey | None = None) -> bool:
    """Whether the person or key a running request acts for may still read the tenant: a key not revoked (nor
    expired), a person still an active member. Read afresh: a deprovisioning seconds ago counts."""
    if api_key is not None:
        live = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).values_list("expires_at", flat=True)
        found = list(live)
        return bool(found) and (found[0] is None or found[0] > timezone.now())
    if user is not None and getattr(user, "pk", None) is not None:
        return Membership.objects.for_tenant(tenant).filter(user_id=user.pk, user__is_active=True).exists()  # type: ignore[attr-defined]
    return True
