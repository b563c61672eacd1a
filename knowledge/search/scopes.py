"""A read's scope in the vector query: the viewer's principals, the filters, and the validity rules (in force at the
read's instant, or as of an earlier one) as payload conditions."""

from __future__ import annotations

from knowledge.index.vectorstore import Scope
from knowledge.models import Status
from knowledge.search.hits import RetrieveFilters
from knowledge.selectors import query_principals
from knowledge.validity import Clock
from tenants.principals import Viewer


def viewer_scope(viewer: Viewer, filters: RetrieveFilters, clock: Clock | None = None) -> Scope:
    """The vector query's scope for this viewer: the filters, within the tenant, within the viewer's principals, in
    force at the read's instant."""
    scope = filters.scope(viewer.tenant)
    scope.principals = query_principals(viewer)
    return in_force(scope, filters, clock or Clock.for_read(viewer.tenant, filters.as_of))


def served_in_force(filters: RetrieveFilters, clock: Clock) -> bool:
    """A read now that asked for nothing else serves only documents in force: none of its hits is superseded."""
    return not filters.include_expired and not clock.as_of


def in_force(scope: Scope, filters: RetrieveFilters, clock: Clock) -> Scope:
    """The validity rules as payload conditions: points whose window covers the instant, of documents not superseded
    then; as of an instant, each document's version served then (superseded and retired versions included)."""
    if clock.as_of:
        scope.statuses = sorted({*(scope.statuses or []), Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED})
        scope.served_at = clock.at.timestamp()
    if filters.include_expired:
        return scope
    if filters.in_force_at is not None and not clock.as_of:  # the stated windows and links, at that instant
        scope.valid_at = scope.superseded_at = filters.in_force_at.timestamp()
        return scope
    scope.valid_at = clock.at.timestamp()
    if clock.as_of:  # who superseded whom then: from SQL, as a (short) list of document ids
        scope.excluded_document_ids = clock.superseded_ids() or None
    elif not clock.rules_apply():  # no document has a window or a link: nothing to leave out, no condition sent
        scope.valid_at = None
    else:  # now: the points carry their successor's window; only a change not yet in the payloads goes by id
        scope.superseded_at = clock.at.timestamp()
        scope.excluded_document_ids = clock.unsynced_out_of_force_ids() or None
    return scope
