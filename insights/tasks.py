"""django-q2 entry point of the insights: the content gaps of every tenant, refreshed every five minutes (the schedule
is made by migration insights 0001)."""

from __future__ import annotations

from insights import gaps
from tenants.models import Tenant


def gaps_task() -> dict[str, int]:
    done: dict[str, int] = {}
    for tenant in Tenant.objects.all():
        found = gaps.refresh(tenant)
        if found.questions or found.gaps_made:
            done[tenant.slug] = found.gaps_made
    return done
