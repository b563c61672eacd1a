"""The agent doors of the REST API: retrieve and bootstrap (in a session when the call names one), and the sessions
themselves (start, list, ledger, end, changes). Every view derives from TenantApiView: the tenant comes from the URL
slug checked against the API key (or the signed-in member); a session of another caller is a 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from agent_sessions import changes, reads, services
from agent_sessions.models import AgentSession
from agent_sessions.shapes import SessionInput, read_payload, retrieve_asked
from knowledge.shapes import BootstrapInput, RetrieveInput, RetrieveOutput, run_retrieval, scope_filters
from tenants.access import TenantApiView
from tenants.models import ApiKey

MAX_OFFSET = 10**9  # beyond any real table; larger offsets overflow the database's integer


def _owner(view: TenantApiView) -> dict[str, Any]:
    """Who a session belongs to: the API key, else the signed-in user."""
    key = view.request.auth
    return {"api_key": key} if isinstance(key, ApiKey) else {"user": view.request.user}


def _session(view: TenantApiView, public_id: Any) -> AgentSession | None:
    """The caller's own live session, or the 404 / 410 the caller may read; None when none is named."""
    if public_id is None:
        return None
    return run_retrieval(services.session_get, tenant=view.tenant, public_id=public_id, **_owner(view))


class RetrieveApi(TenantApiView):
    reads_with_post = True

    InputSerializer = RetrieveInput

    @extend_schema(request=InputSerializer, responses={200: RetrieveOutput})
    def post(self, request: Request, tenant_slug: str) -> Response:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        read = run_retrieval(retrieve_asked, self.viewer, _session(self, data.get("session")), data)
        return Response(read_payload(data["query"], read))


class BootstrapApi(TenantApiView):
    reads_with_post = True

    InputSerializer = BootstrapInput

    @extend_schema(request=InputSerializer, responses={200: dict})
    def post(self, request: Request, tenant_slug: str) -> Response:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        filters = scope_filters(data.get("scope"), when=data)
        pack = run_retrieval(reads.session_bootstrap, viewer=self.viewer, session=_session(self, data.get("session")),
                             intent=data["intent"], filters=filters, max_tokens=data.get("max_tokens"))  # fmt: skip
        return Response(pack)


# --- agent sessions (docs/sessions.md) -------------------------------------------------------
class SessionListApi(TenantApiView):
    """Start a session (any key or member that may read: a session is the caller's own state, not the tenant's
    knowledge), or list the caller's live sessions."""

    reads_with_post = True

    InputSerializer = SessionInput

    @extend_schema(request=InputSerializer, responses={201: dict})
    def post(self, request: Request, tenant_slug: str) -> Response:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        session = run_retrieval(services.session_create, tenant=self.tenant, purpose=data["purpose"],
                                scope=data.get("scope"), ttl_hours=data.get("ttl"), **_owner(self))  # fmt: skip
        return Response(reads.session_shape(session), status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="sessions_list", responses={200: dict})
    def get(self, request: Request, tenant_slug: str) -> Response:
        return Response({"sessions": [reads.session_shape(s)
                                      for s in services.sessions_of(tenant=self.tenant, **_owner(self))]})  # fmt: skip


class SessionDetailApi(TenantApiView):
    """A session's ledger (GET: every chunk delivered, by which call, the base pack, tokens); DELETE ends it."""

    reads_with_post = True  # DELETE ends the caller's own session: a read-only key may end what it started

    @extend_schema(parameters=[OpenApiParameter("offset", int, description="Page through a long ledger.")],
                   operation_id="sessions_ledger", responses={200: dict})  # fmt: skip
    def get(self, request: Request, tenant_slug: str, session_id: str) -> Response:
        session = _session(self, session_id)
        assert session is not None
        offset = _offset(request)
        return Response(run_retrieval(reads.ledger, session, self.viewer, offset=offset))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant_slug: str, session_id: str) -> Response:
        session = _session(self, session_id)
        assert session is not None
        services.session_end(session)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionChangesApi(TenantApiView):
    """What changed in what the session was given: changed, superseded, expired, retired, no_longer_available."""

    @extend_schema(parameters=[OpenApiParameter("cursor", str, description="From a previous page's next_cursor; "
                                                "none: the changes not read yet."),
                               OpenApiParameter("limit", int)], responses={200: dict})  # fmt: skip
    def get(self, request: Request, tenant_slug: str, session_id: str) -> Response:
        session = _session(self, session_id)
        assert session is not None
        limit = request.query_params.get("limit", "100")
        if not limit.isdigit():
            raise exceptions.ValidationError({"limit": ["Give a whole number from 1 to 500."]})
        return Response(run_retrieval(changes.changes_page, session, self.viewer,
                                      cursor=request.query_params.get("cursor", ""), limit=int(limit)))  # fmt: skip


def _offset(request: Request) -> int:
    raw = request.query_params.get("offset", "0")
    if not raw.isdigit() or int(raw) > MAX_OFFSET:
        raise exceptions.ValidationError({"offset": ["Give a whole number, 0 or more."]})
    return int(raw)
