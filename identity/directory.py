"""Directory sync: a tenant's people and groups read from LDAP or Active Directory with ldap3 (pure Python, the
well-kept LDAP v3 client), on the worker's schedule (a django-q2 Schedule per directory, every `sync_minutes`) or
on request. Each person found is admitted like a sign-in (identity/people.py: linked by a stable attribute —
`entryUUID` for OpenLDAP, `objectGUID` for Active Directory — role and groups from their groups); a linked person
no longer found is deprovisioned at once (tenants.services.member_deprovision: membership, groups, keys, agent and
browser sessions). A search that finds nobody deprovisions nobody: a wrong base or filter is not everyone leaving."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import ldap3
from django.utils import timezone
from django_q.models import Schedule
from ldap3.core.exceptions import LDAPException
from ldap3.utils.dn import parse_dn

from core.audit import audit
from core.sealed import SecretUnreadable, unseal
from identity import people
from identity.models import SECRET_PURPOSE, Provider, ProviderLink
from tenants.models import Membership
from tenants.services import member_deprovision

logger = logging.getLogger(__name__)
TASK = "identity.directory.scheduled_sync"
TIMEOUT_S = 30
PAGE = 500


@dataclass
class Report:
    ok: bool
    summary: str
    found: int = 0
    admitted: int = 0
    deprovisioned: int = 0
    refused: list[str] = field(default_factory=list)


def _text(value: object) -> str:
    """An attribute's value as text; a 16-byte binary one (Active Directory's objectGUID, read without the server's
    schema) as the GUID AD itself shows, other binary ones as hex."""
    if isinstance(value, bytes):
        return str(uuid.UUID(bytes_le=value)) if len(value) == 16 else value.hex()
    return str(value)


def _first(entry: dict[str, list[object]], name: str) -> str:
    for key, values in entry.items():
        if key.lower() == name.lower() and values:
            return _text(values[0] if isinstance(values, list) else values)
    return ""


def _all(entry: dict[str, list[object]], *names: str) -> list[str]:
    wanted = {n.lower() for n in names}
    return [
        str(v)
        for key, values in entry.items()
        if key.lower() in wanted
        for v in (values if isinstance(values, list) else [values])
    ]


def _cn(dn: str) -> str:
    """A group's name from its DN: the value of its first RDN (cn=engineering,ou=groups,… → engineering)."""
    try:
        return str(parse_dn(dn)[0][1])
    except (LDAPException, IndexError, ValueError):
        return ""


def _subject_attribute(provider: Provider) -> str:
    return provider.subject_claim if provider.subject_claim not in ("", "sub", "NameID") else "entryUUID"


def _read(provider: Provider) -> tuple[list[dict[str, list[object]]], dict[str, list[str]]]:
    """(the people entries, each person's DN → the names of the groups that list them)."""
    server = ldap3.Server(provider.ldap_url, connect_timeout=TIMEOUT_S, get_info=ldap3.NONE)
    connection = ldap3.Connection(
        server,
        user=provider.bind_dn or None,
        password=unseal(provider.secret_sealed, purpose=SECRET_PURPOSE) or None,
        read_only=True,
        receive_timeout=TIMEOUT_S,
        raise_exceptions=True,
    )
    with connection:
        people_attrs = [_subject_attribute(provider), provider.username_claim, provider.email_claim, "memberOf"]
        found = [
            dict(e["attributes"]) | {"dn": [e["dn"]]}
            for e in connection.extend.standard.paged_search(
                provider.user_base,
                provider.user_filter or "(objectClass=person)",
                attributes=people_attrs,
                paged_size=PAGE,
                generator=True,
            )
            if e.get("type") == "searchResEntry"
        ]
        groups_of: dict[str, list[str]] = {}
        if provider.group_base:
            for e in connection.extend.standard.paged_search(
                provider.group_base,
                provider.group_filter or "(objectClass=groupOfNames)",
                attributes=["cn", "member", "uniqueMember"],
                paged_size=PAGE,
                generator=True,
            ):
                if e.get("type") != "searchResEntry":
                    continue
                name = _first(e["attributes"], "cn") or _cn(e["dn"])
                for member in _all(e["attributes"], "member", "uniqueMember"):
                    groups_of.setdefault(member.lower(), []).append(name)
    return found, groups_of


def sync(provider: Provider) -> Report:
    """Read the directory and bring the tenant's members and managed groups in line with it."""
    try:
        entries, groups_of = _read(provider)
    except (LDAPException, SecretUnreadable, OSError) as exc:
        report = Report(False, f"The directory could not be read: {type(exc).__name__}: {str(exc)[:200]}")
        return _stamp(provider, report)
    subject_attribute = _subject_attribute(provider)
    report = Report(True, "", found=len(entries))
    seen: set[str] = set()
    for entry in entries:
        dn = str(entry["dn"][0])
        groups = sorted(set(groups_of.get(dn.lower(), []) + [_cn(g) for g in _all(entry, "memberOf")]) - {""})
        person = people.Person(
            subject=_first(entry, subject_attribute),
            username=_first(entry, provider.username_claim),
            email=_first(entry, provider.email_claim)[:254],
            groups=groups,
        )
        if not person.subject:
            report.refused.append(f"{dn}: no {subject_attribute}")
            continue
        seen.add(person.subject)
        try:
            people.admit(provider, person, record_refusal=False)
            report.admitted += 1
        except people.Refused as refusal:
            report.refused.append(f"{person.username or dn}: {refusal}")
    if entries:
        gone = ProviderLink.objects.filter(provider=provider).exclude(subject__in=seen).select_related("user")
        for link in gone:
            if Membership.objects.for_tenant(provider.tenant).filter(user=link.user).exists():
                member_deprovision(tenant=provider.tenant, user=link.user, by=f"ldap {provider.slug}")
                report.deprovisioned += 1
    report.summary = (
        f"{report.found} found, {report.admitted} in the workspace, {report.deprovisioned} "
        f"deprovisioned, {len(report.refused)} refused"
        + (f" (first: {report.refused[0]})" if report.refused else "")
        + ("" if entries else "; nobody found, so nobody was deprovisioned: check the base and filter")
    )
    return _stamp(provider, report)


def _stamp(provider: Provider, report: Report) -> Report:
    Provider.objects.filter(pk=provider.pk).update(last_sync_at=timezone.now(), last_sync_report=report.summary[:500])
    audit(
        "directory.synced",
        tenant=provider.tenant.slug,
        outcome="ok" if report.ok else "failed",
        provider=provider.slug,
        found=report.found,
        admitted=report.admitted,
        deprovisioned=report.deprovisioned,
        refused=len(report.refused),
        detail=report.summary[:500],
    )
    if not report.ok:
        logger.warning("Directory %s of %s: %s", provider.slug, provider.tenant.slug, report.summary)
    return report


def schedule_name(provider: Provider) -> str:
    return f"identity-directory-{provider.public_id}"


def schedule_set(provider: Provider) -> None:
    """One django-q2 Schedule per enabled directory, every `sync_minutes`; none for anything else."""
    name = schedule_name(provider)
    if provider.kind != Provider.Kind.LDAP or not provider.enabled or not provider.sync_minutes:
        Schedule.objects.filter(name=name).delete()
        return
    Schedule.objects.update_or_create(
        name=name,
        defaults={
            "func": TASK,
            "args": repr(provider.pk),
            "schedule_type": Schedule.MINUTES,
            "minutes": provider.sync_minutes,
            "repeats": -1,
            "next_run": timezone.now() + timedelta(minutes=1),
        },
    )


def scheduled_sync(provider_pk: int) -> str:
    provider = Provider.objects.select_related("tenant").filter(pk=provider_pk, kind=Provider.Kind.LDAP).first()
    if provider is None or not provider.enabled:
        return "gone"
    return sync(provider).summary
