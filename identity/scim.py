"""SCIM 2.0 provisioning of one tenant (RFC 7643/7644): what the company's identity provider creates, changes and
removes becomes members, groups and memberships, through tenants/services.py. Payloads are read and written by
scim2-models (pydantic models of the RFCs: validation per operation, filters, PATCH, errors), so this module only
says what a SCIM User and Group are here.

- A User is a ScimUser link and the account it made: `userName` is the member's username, `id` the link's
  public_id; `active: false` or DELETE deprovisions at once (tenants.services.member_deprovision: membership,
  groups, keys, agent sessions, browser sessions); `active: true` provisions again. DELETE also deletes the account
  (tenants.services.user_forget drops `user:<name>` from every list, so a username used again inherits nothing).
- A Group is a ScimGroup link and the tenant's Group: its ragsite name is its `displayName` (lower-cased, spaces as
  `-`, as a principal's must be); members are Users of this tenant's SCIM.
- A username the server already holds for anyone else is refused (409 uniqueness): a provider never takes over an
  account it did not make, and nothing links a person by e-mail."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User as Account
from django.db import transaction
from django.utils import timezone
from scim2_models import (
    Context,
    Group,
    GroupMember,
    GroupMembership,
    Meta,
    Name,
    NotFoundException,
    PatchOp,
    ScimFilter,
    UniquenessException,
    User,
)
from scim2_models import InvalidValueException as InvalidValue

from identity.models import ScimGroup, ScimToken, ScimUser
from tenants import services as tenant_services
from tenants.models import GROUP_NAME_VALIDATOR, Membership, Tenant
from tenants.models import Group as TenantGroup

BY = "SCIM"
MAX_RESULTS = 500  # a page's most resources (ServiceProviderConfig's filter.maxResults)


def hash_token(raw: str) -> str:
    import hashlib

    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def token_issue(*, tenant: Tenant, name: str = "", created_by: Account | None = None) -> tuple[ScimToken, str]:
    """A new SCIM bearer token for the tenant: (the row, the token, shown once)."""
    raw = f"scim_{secrets.token_urlsafe(32)}"
    token = ScimToken.objects.create(tenant=tenant, name=name[:100], prefix=raw[:12], token_hash=hash_token(raw),
                                     created_by=created_by)  # fmt: skip
    return token, raw


def token_open(raw: str) -> ScimToken | None:
    """The live token this raw one is, or None."""
    token = ScimToken.objects.select_related("tenant").filter(token_hash=hash_token(raw), revoked_at=None).first()
    if token is not None:
        ScimToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token


def token_revoke(token: ScimToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


# --- Users ---------------------------------------------------------------------------------------------------------
STORED = {"id", "meta", "groups", "schemas"}  # what a stored payload never decides


def _stored(resource: Any) -> dict[str, Any]:
    """A resource as it is kept: what the provider sent, less what the server decides."""
    return {k: v for k, v in resource.model_dump(scim_ctx=Context.DEFAULT, mode="json").items() if k not in STORED}


def user_resources(links: Any, location: str) -> list[User]:
    """Many Users at once: their groups read in one query, not one per user."""
    links = list(links if links.query.is_sliced else links.select_related("user", "tenant").order_by("pk"))
    if not links:
        return []
    groups: dict[int, list[ScimGroup]] = {}
    through = TenantGroup.members.through
    scim_groups = {g.group_id: g for g in ScimGroup.objects.for_tenant(links[0].tenant)}
    for row in through.objects.filter(group_id__in=list(scim_groups), user_id__in=[k.user_id for k in links]):
        groups.setdefault(row.user_id, []).append(scim_groups[row.group_id])
    return [user_resource(link, location, groups.get(link.user_id, [])) for link in links]


def user_resource(link: ScimUser, location: str, groups: list[ScimGroup] | None = None) -> User:
    """The User as the provider sent it, with what the server decides: id, userName, active, groups, meta."""
    if groups is None:
        groups = list(ScimGroup.objects.for_tenant(link.tenant).filter(group__members=link.user)) if link.user else []
    user: Any = User.model_validate({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], **link.resource})
    user.id, user.user_name = str(link.public_id), link.user_name
    if user.active is not None or not link.active:
        user.active = link.active
    user.groups = [GroupMembership.model_validate({"value": str(g.public_id), "display": g.display_name,
                                                   "type": "direct", "$ref": f"{location}Groups/{g.public_id}"})
                   for g in groups] or None  # fmt: skip
    user.meta = Meta(resource_type="User", created=link.created_at, last_modified=link.updated_at,
                     location=f"{location}Users/{link.public_id}")  # fmt: skip
    return user


def _user_fields(resource: User) -> dict[str, Any]:
    name = resource.name or Name()
    emails = resource.emails or []
    primary = next((e for e in emails if e.primary), emails[0] if emails else None)
    return {
        "user_name": str(resource.user_name or "").strip(), "external_id": resource.external_id or "",
        "given_name": (name.given_name or "")[:150], "family_name": (name.family_name or "")[:150],
        "display_name": (resource.display_name or "")[:300], "email": str(primary.value if primary else "" or "")[:254],
        "active": resource.active is not False, "resource": _stored(resource),
    }  # fmt: skip


def _valid_username(name: str) -> str:
    if not name or len(name) > 150 or not re.fullmatch(r"[\w.@+-]+", name):
        raise InvalidValue(detail="userName must be 1-150 letters, digits or @.+-_ (it is the member's username).")
    return name


def user_create(tenant: Tenant, resource: User) -> ScimUser:
    fields = _user_fields(resource)
    name = _valid_username(fields["user_name"])
    with transaction.atomic():
        if ScimUser.objects.for_tenant(tenant).filter(user_name__iexact=name).exists():
            raise UniquenessException(detail=f"The user {name} is already provisioned in this tenant.")
        if Account.objects.filter(username__iexact=name).exists():
            raise UniquenessException(detail=f"The username {name} is taken on this server by another account.")
        account = Account.objects.create_user(username=name, email=fields["email"], first_name=fields["given_name"],
                                              last_name=fields["family_name"])  # fmt: skip
        account.set_unusable_password()  # signs in through the provider, never with a password of ours
        account.save()
        link = ScimUser.objects.create(tenant=tenant, user=account, **fields)
        if link.active:
            tenant_services.member_provision(tenant=tenant, user=account, by=BY)
        else:
            account.is_active = False
            account.save(update_fields=["is_active"])
    return link


def user_replace(link: ScimUser, resource: User) -> ScimUser:
    fields = _user_fields(resource)
    if fields["user_name"].lower() != link.user_name.lower():
        raise InvalidValue(detail="userName cannot change here: it is the member's username (delete and provision).")
    fields["user_name"] = link.user_name
    return _user_save(link, fields)


def user_patch(link: ScimUser, patch: PatchOp[User], location: str) -> ScimUser:
    resource = user_resource(link, location)
    patch.patch(resource)
    return user_replace(link, resource)


def _user_save(link: ScimUser, fields: dict[str, Any]) -> ScimUser:
    with transaction.atomic():
        was_active = link.active
        for key, value in fields.items():
            setattr(link, key, value)
        link.save()
        account = link.user
        if account is not None:
            account.email, account.first_name, account.last_name = link.email, link.given_name, link.family_name
            account.save(update_fields=["email", "first_name", "last_name"])
            if was_active and not link.active:
                tenant_services.member_deprovision(tenant=link.tenant, user=account, by=BY)
            elif link.active and not was_active:
                tenant_services.member_provision(tenant=link.tenant, user=account, by=BY)
    return link


def user_delete(link: ScimUser) -> None:
    """Deprovisioned, then the account deleted (its name leaves every access list and key: tenants.apps)."""
    with transaction.atomic():
        account = link.user
        if account is not None:
            tenant_services.member_deprovision(tenant=link.tenant, user=account, by=BY)
            if not Membership.objects.filter(user=account).exists():
                account.delete()
        link.delete()


def user_get(tenant: Tenant, scim_id: str) -> ScimUser:
    link = ScimUser.objects.for_tenant(tenant).select_related("user").filter(public_id=_uuid(scim_id)).first()
    if link is None:
        raise NotFoundException(detail=f"No user {scim_id}.")
    return link


# --- Groups --------------------------------------------------------------------------------------------------------
def group_resource(link: ScimGroup, location: str) -> Group:
    """The Group as the provider sent it, with what the server decides: id, displayName, members, meta."""
    members = ScimUser.objects.for_tenant(link.tenant).filter(user__in=link.group.members.all())
    group: Any = Group.model_validate({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], **link.resource})
    group.id, group.display_name = str(link.public_id), link.display_name
    group.external_id = link.external_id or None
    group.members = [GroupMember.model_validate({"value": str(m.public_id), "display": m.user_name, "type": "User",
                                                 "$ref": f"{location}Users/{m.public_id}"})
                     for m in members] or None  # fmt: skip
    group.meta = Meta(resource_type="Group", created=link.created_at, last_modified=link.updated_at,
                      location=f"{location}Groups/{link.public_id}")  # fmt: skip
    return group


def group_name_of(display_name: str) -> str:
    """A ragsite group's name for a provider's display name: "Engineering Team" → engineering-team."""
    name = re.sub(r"[^a-z0-9_-]+", "-", display_name.strip().lower()).strip("-_")[:50].strip("-_")
    try:
        GROUP_NAME_VALIDATOR(name)
    except Exception:
        raise InvalidValue(detail="displayName must hold letters or digits (it names a group).") from None
    return name


def group_create(tenant: Tenant, resource: Group) -> ScimGroup:
    display = str(resource.display_name or "").strip()
    name = group_name_of(display)
    with transaction.atomic():
        if ScimGroup.objects.for_tenant(tenant).filter(display_name__iexact=display).exists():
            raise UniquenessException(detail=f"The group {display} is already provisioned in this tenant.")
        if TenantGroup.objects.for_tenant(tenant).filter(name=name).exists():
            raise UniquenessException(detail=f"The tenant already has a group named {name}, made by hand.")
        group = tenant_services.group_create(tenant=tenant, name=name)
        link = ScimGroup.objects.create(
            tenant=tenant,
            group=group,
            display_name=display[:300],
            external_id=resource.external_id or "",
            resource=_group_stored(resource),
        )
        _members_set(link, resource.members or [])
    return link


def group_replace(link: ScimGroup, resource: Group) -> ScimGroup:
    """The group as the provider says it is now: a new display name is shown (its ragsite name, in access lists,
    stays), its members are exactly those given."""
    display = str(resource.display_name or "").strip()
    with transaction.atomic():
        if display and display.lower() != link.display_name.lower():
            group_name_of(display)  # a name that could not name a group is refused
            if ScimGroup.objects.for_tenant(link.tenant).filter(display_name__iexact=display).exists():
                raise UniquenessException(detail=f"The group {display} is already provisioned in this tenant.")
        link.display_name = (display or link.display_name)[:300]
        link.external_id = resource.external_id or ""
        link.resource = _group_stored(resource)
        link.save()
        _members_set(link, resource.members or [])
    return link


def _group_stored(resource: Group) -> dict[str, Any]:
    return {k: v for k, v in _stored(resource).items() if k != "members"}


def group_patch(link: ScimGroup, patch: PatchOp[Group], location: str) -> ScimGroup:
    resource = group_resource(link, location)
    patch.patch(resource)
    return group_replace(link, resource)


def group_delete(link: ScimGroup) -> None:
    with transaction.atomic():
        tenant_services.group_delete(tenant=link.tenant, actor=None, group=link.group)  # its link goes with it


def group_get(tenant: Tenant, scim_id: str) -> ScimGroup:
    link = ScimGroup.objects.for_tenant(tenant).select_related("group").filter(public_id=_uuid(scim_id)).first()
    if link is None:
        raise NotFoundException(detail=f"No group {scim_id}.")
    return link


def _members_set(link: ScimGroup, members: Iterable[GroupMember]) -> None:
    """The group's members are exactly these SCIM users (active ones: an inactive person is in no group)."""
    wanted_ids = [_uuid(str(m.value)) for m in members if m.value]
    found = {str(u.public_id): u for u in ScimUser.objects.for_tenant(link.tenant).filter(public_id__in=wanted_ids)}
    missing = [str(i) for i in wanted_ids if str(i) not in found]
    if missing:
        raise InvalidValue(detail=f"No user {missing[0]} in this tenant.")
    wanted = {u.user_id for u in found.values() if u.active and u.user_id}
    group = link.group
    current = set(group.members.values_list("pk", flat=True))
    for account in Account.objects.filter(pk__in=current - wanted):
        tenant_services.group_member_remove(tenant=link.tenant, actor=None, group=group, user=account)
    for account in Account.objects.filter(pk__in=wanted - current):
        tenant_services.group_member_add(tenant=link.tenant, actor=None, group=group, user=account)


# --- listing -------------------------------------------------------------------------------------------------------
def of(generic: Any, model: Any) -> Any:
    """A scim2-models generic for one resource type (`ListResponse[User]`), as mypy cannot follow a variable's."""
    return generic[model]


# `userName eq "ana"`: what a provider asks before each create (Okta, Entra ID), answered from the index, not by
# reading every user; any other filter reads them all (the filter is still applied to what is read)
EQUALS = re.compile(r'^\s*(userName|externalId|id|displayName)\s+eq\s+"((?:[^"\\]|\\.)*)"\s*$', re.IGNORECASE)


def narrowed(links: Any, filter_text: str | None) -> Any:
    """The links a simple equality filter can only be among (the whole set for any other filter)."""
    found = EQUALS.match(filter_text or "")
    if found is None:
        return links
    attribute, value = found.group(1).lower(), found.group(2).replace('\\"', '"')
    fields = {"username": "user_name__iexact", "externalid": "external_id", "displayname": "display_name__iexact"}
    if attribute == "id":
        try:
            return links.filter(public_id=_uuid(value))
        except NotFoundException:
            return links.none()
    field = fields[attribute]
    if field.split("__")[0] not in {f.name for f in links.model._meta.fields}:
        return links
    return links.filter(**{field: value})


def listed(resources: list[Any], model: Any, filter_text: str | None) -> list[Any]:
    """The resources a filter keeps (scim2-models evaluates it on each, as the RFC reads it)."""
    if not filter_text:
        return resources
    bound = of(ScimFilter, model)(filter_text)  # InvalidFilterException: 400 invalidFilter
    return [r for r in resources if bound.match(r)]


def _uuid(value: str) -> Any:
    import uuid

    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFoundException(detail=f"No resource {value}.") from None


def group_resources(links: Any, location: str) -> list[Group]:
    links = links if links.query.is_sliced else links.select_related("group", "tenant").order_by("pk")
    return [group_resource(link, location) for link in links]


@dataclass(frozen=True)
class Kind:
    """One SCIM resource type as the endpoints serve it: its model, its links, and what each operation does."""

    model: Any
    links: Callable[[Tenant], Any]
    resources: Callable[[Any, str], list[Any]]
    resource: Callable[[Any, str], Any]
    get: Callable[[Tenant, str], Any]
    create: Callable[[Tenant, Any], Any]
    replace: Callable[[Any, Any], Any]
    patch: Callable[[Any, Any, str], Any]
    delete: Callable[[Any], None]
    related: tuple[str, ...]  # what each link's resource reads besides it


USERS = Kind(User, lambda t: ScimUser.objects.for_tenant(t), user_resources, user_resource, user_get, user_create,
             user_replace, user_patch, user_delete, ("user", "tenant"))  # fmt: skip
GROUPS = Kind(Group, lambda t: ScimGroup.objects.for_tenant(t), group_resources, group_resource, group_get,
              group_create, group_replace, group_patch, group_delete, ("group", "tenant"))  # fmt: skip
