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

from django.contrib.auth.models import User

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
    label: str = ""  # for the page: "admin", "group:hr, user:bob"…

    @classmethod
    def everything(cls, tenant: Tenant) -> Viewer:
        """For work the tenant itself does (its admins' evaluation runs, reindexing, commands): no restriction."""
        return cls(tenant=tenant, principals=None, label="all")

    @property
    def sees_all(self) -> bool:
        return self.principals is None

    @property
    def principal_list(self) -> list[str] | None:
        """The principals, sorted (the vector filter's MatchAny values); None when nothing is filtered."""
        return None if self.principals is None else sorted(self.principals)

    def sees(self, access: Iterable[str]) -> bool:
        return self.principals is None or not self.principals.isdisjoint(access)


def _member_principals(membership: Membership) -> frozenset[str] | None:
    if membership.is_admin:
        return None
    user = membership.user
    groups = Group.objects.for_tenant(membership.tenant).filter(members=user).values_list("name", flat=True)
    return frozenset({TENANT, f"user:{user.get_username()}", *(f"group:{name}" for name in groups)})


def viewer_for(*, tenant: Tenant, membership: Membership | None = None, api_key: ApiKey | None = None) -> Viewer:
    """The one answer to "which principals does this request act for", evaluated now (a group or role change
    applies to the next request). A member: admins see everything, staff hold `tenant`, `user:<them>` and their
    groups. A key: `tenant` always (it is the tenant's key), plus what its acts-for principals hold; a key acting
    for a user holds what that user holds today (nothing more than `tenant` once they leave)."""
    if membership is not None:
        if membership.tenant_id != tenant.pk:
            raise ValueError("A membership of another tenant.")
        principals = _member_principals(membership)
        return Viewer(tenant, principals, "admin" if principals is None else "member")
    if api_key is None or api_key.tenant_id != tenant.pk:
        raise ValueError("A request reads as a member or as a key of its tenant.")
    acts_for = list(api_key.acts_for or [TENANT])
    if ALL in acts_for:
        return Viewer(tenant, None, ALL)
    held: set[str] = {TENANT}
    groups = {f"group:{name}" for name in Group.objects.for_tenant(tenant).values_list("name", flat=True)}
    for principal in acts_for:
        if principal.startswith("user:"):
            member = (
                Membership.objects.for_tenant(tenant).select_related("user", "tenant")
                .filter(user__username=principal[5:]).first()
            )  # fmt: skip
            if member is None:
                continue
            theirs = _member_principals(member)
            if theirs is None:  # a key acting for an admin sees what the admin sees
                return Viewer(tenant, None, ", ".join(acts_for))
            held |= theirs
        elif principal in groups:  # a group deleted since the key was issued opens nothing
            held.add(principal)
    return Viewer(tenant, frozenset(held), ", ".join(acts_for))


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


def user_groups(*, tenant: Tenant, user: User) -> list[str]:
    return list(Group.objects.for_tenant(tenant).filter(members=user).values_list("name", flat=True))
