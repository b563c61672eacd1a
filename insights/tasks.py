"""django-q2 entry point of the insights: the content gaps of every tenant, refreshed every five minutes (the schedule
is made by migration insights 0001); the written gaps whose text is now indexed asked again; each open gap e-mailed
to whoever closes it."""

from __future__ import annotations

from insights import gaps, owners
from tenants.models import Tenant


def gaps_task() -> dict[str, int]:
    done: dict[str, int] = {}
    for tenant in Tenant.objects.all():
        found = gaps.refresh(tenant)
        closed = owners.check_written(tenant)
        owners.tell_owners(tenant)
        if found.questions or found.gaps_made or closed:
            done[tenant.slug] = found.gaps_made
    return done
