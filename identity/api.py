"""SCIM 2.0 under /api/v1/tenants/<tenant>/scim/v2/ (identity/scim.py says what a User and a Group are here).

Who may call: only a SCIM bearer token of that tenant (made on the keys page or by `manage.py create_scim_token`).
A member's session, an API key (read or write) or another tenant's SCIM token is a 401 in SCIM's error shape; wrong
tokens are counted against the address like wrong API keys (429 past the limit). Every error is SCIM's
`urn:ietf:params:scim:api:messages:2.0:Error` with its status and scimType; malformed JSON is a 400 invalidSyntax."""

from __future__ import annotations

from typing import Any, cast

from pydantic import ValidationError
from rest_framework import authentication, exceptions, parsers, renderers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from scim2_models import (
    Context,
    Error,
    Group,
    ListResponse,
    PatchOp,
    ResourceType,
    ResponseParameters,
    Schema,
    SCIMException,
    SearchRequest,
    ServiceProviderConfig,
    User,
)
from scim2_models import InvalidValueException as InvalidValue

from identity import scim
from identity.models import ScimToken
from tenants.keys import KeyRefused, presented, wrong_key

SCIM_JSON = "application/scim+json"
WRONG_TOKEN = "Invalid or revoked SCIM token."


class ScimParser(parsers.JSONParser):
    media_type = SCIM_JSON


class ScimRenderer(renderers.JSONRenderer):
    media_type = SCIM_JSON
    format = "scim"


class ScimTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <SCIM token>`: the token, which names the tenant; anything else is a 401."""

    def authenticate(self, request: Request) -> tuple[None, ScimToken]:
        raw = presented(request.META.get("HTTP_AUTHORIZATION", ""), ("Bearer",))
        token = scim.token_open(raw) if raw else None
        if token is None:
            if not raw:
                raise exceptions.NotAuthenticated("A SCIM bearer token is required.")
            try:
                refused = wrong_key(request, raw, WRONG_TOKEN, what="SCIM token")
            except KeyRefused as throttled:  # this address sent too many wrong keys or tokens
                raise exceptions.Throttled(wait=throttled.retry_after, detail=throttled.message) from None
            raise exceptions.AuthenticationFailed(refused.message)
        return None, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="SCIM"'


class ScimView(APIView):
    """A SCIM endpoint of the token's tenant; the URL's tenant must be the token's (else 401: never confirm a
    tenant exists)."""

    authentication_classes = [ScimTokenAuthentication]
    permission_classes: list = []
    parser_classes = [ScimParser, parsers.JSONParser]
    renderer_classes = [ScimRenderer, renderers.JSONRenderer]
    throttle_classes: list = []
    schema = None  # not in the OpenAPI document: SCIM describes itself (ServiceProviderConfig, Schemas, ResourceTypes)
    scim_role = "scim token"  # tests/identity/test_scim.py: nobody else gets in

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        token = cast(ScimToken, request.auth)
        if token.tenant.slug != kwargs.get("tenant_slug"):
            raise exceptions.AuthenticationFailed(WRONG_TOKEN)
        self.tenant = token.tenant
        self.location = request.build_absolute_uri(f"/api/v1/tenants/{token.tenant.slug}/scim/v2/")

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, SCIMException):
            return _error(int(exc.status), exc.detail, exc.scim_type)
        if isinstance(exc, ValidationError):
            return _error(400, _plain(exc), "invalidValue")
        if isinstance(exc, exceptions.ParseError):
            return _error(400, "The body is not valid JSON.", "invalidSyntax")
        if isinstance(exc, exceptions.AuthenticationFailed | exceptions.NotAuthenticated):
            response = _error(401, str(exc.detail))
            response["WWW-Authenticate"] = 'Bearer realm="SCIM"'
            return response
        if isinstance(exc, exceptions.APIException):
            response = _error(exc.status_code, str(exc.detail))
            wait = getattr(exc, "wait", None)
            if wait:
                response["Retry-After"] = str(int(wait))
            return response
        return super().handle_exception(exc)

    def body(self, request: Request) -> dict[str, Any]:
        data = request.data
        if not isinstance(data, dict):
            raise InvalidValue(detail="The body must be a JSON object.")
        return data


def _error(status: int, detail: str, scim_type: str | None = None) -> Response:
    return Response(Error(status=status, detail=detail, scim_type=scim_type).model_dump(), status=status)


def _plain(exc: ValidationError) -> str:
    first: dict[str, Any] = dict(exc.errors()[0]) if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid value"))


def _shown(request: Request, model: type) -> ResponseParameters | None:
    """The `attributes` / `excludedAttributes` a query asks for (RFC 7644 §3.9), or None."""
    asked = {k: [a.strip() for a in request.query_params[k].split(",") if a.strip()]
             for k in ("attributes", "excludedAttributes") if request.query_params.get(k)}  # fmt: skip
    return scim.of(ResponseParameters, model).model_validate(asked) if asked else None


def _dump(resource: Any, context: Context, shown: ResponseParameters | None) -> dict[str, Any]:
    return resource.model_dump(scim_ctx=context, response_parameters=shown)


def _page(resources: list[Any], model: type, *, filter_text: str | None, start: int, count: int,
          shown: ResponseParameters | None) -> dict[str, Any]:  # fmt: skip
    kept = scim.listed(resources, model, filter_text)
    page = kept[start - 1 : start - 1 + count]
    listing = scim.of(ListResponse, model)(total_results=len(kept), start_index=start, items_per_page=len(page),
                                           resources=page)  # fmt: skip
    return listing.model_dump(scim_ctx=Context.SEARCH_RESPONSE, response_parameters=shown)


def _query_page(request: Request, kind: scim.Kind, links: Any, location: str) -> dict[str, Any]:
    """A page of `links` as the query asks (filter, startIndex, count, attributes). Without a filter only the page's
    resources are built (a page of 500 of 5,000 users reads 500)."""
    try:
        start = max(1, int(request.query_params.get("startIndex", 1)))
        count = min(scim.MAX_RESULTS, max(0, int(request.query_params.get("count", scim.MAX_RESULTS))))
    except ValueError:
        raise InvalidValue(detail="startIndex and count are integers.") from None
    filter_text, shown = request.query_params.get("filter"), _shown(request, kind.model)
    if filter_text:
        return _page(kind.resources(links, location), kind.model, filter_text=filter_text, start=start, count=count,
                     shown=shown)  # fmt: skip
    total = links.count()
    ordered = links.select_related(*kind.related).order_by("pk")
    page = kind.resources(ordered[start - 1 : start - 1 + count], location) if count else []
    listing = scim.of(ListResponse, kind.model)(total_results=total, start_index=start, items_per_page=len(page),
                                                resources=page)  # fmt: skip
    return listing.model_dump(scim_ctx=Context.SEARCH_RESPONSE, response_parameters=shown)


def _search_page(body: dict[str, Any], resources: list[Any], model: type) -> dict[str, Any]:
    """POST …/.search (RFC 7644 §3.4.3): the same listing, asked in the body."""
    search = scim.of(SearchRequest, model).model_validate(body, scim_ctx=Context.SEARCH_REQUEST)
    shown = None
    if search.attributes or search.excluded_attributes:
        shown = scim.of(ResponseParameters, model)(attributes=search.attributes,
                                                   excludedAttributes=search.excluded_attributes)  # fmt: skip
    start = max(1, search.start_index or 1)
    count = min(scim.MAX_RESULTS, max(0, search.count if search.count is not None else scim.MAX_RESULTS))
    return _page(resources, model, filter_text=str(search.filter) if search.filter else None, start=start,
                 count=count, shown=shown)  # fmt: skip


class ResourcesApi(ScimView):
    """`Users` or `Groups` (the `kind`): list (filter, page, attributes) and create."""

    kind: scim.Kind = scim.USERS

    def get(self, request: Request, tenant_slug: str) -> Response:
        links = scim.narrowed(self.kind.links(self.tenant), request.query_params.get("filter"))
        return Response(_query_page(request, self.kind, links, self.location))

    def post(self, request: Request, tenant_slug: str) -> Response:
        resource = self.kind.model.model_validate(self.body(request), scim_ctx=Context.RESOURCE_CREATION_REQUEST)
        shown = self.kind.resource(self.kind.create(self.tenant, resource), self.location)
        response = Response(shown.model_dump(scim_ctx=Context.RESOURCE_CREATION_RESPONSE), status=201)
        response["Location"] = str(shown.meta.location) if shown.meta else ""
        return response


class ResourceApi(ScimView):
    """One User or Group: read, replace, patch, delete."""

    kind: scim.Kind = scim.USERS

    def get(self, request: Request, tenant_slug: str, scim_id: str) -> Response:
        shown = self.kind.resource(self.kind.get(self.tenant, scim_id), self.location)
        return Response(_dump(shown, Context.RESOURCE_QUERY_RESPONSE, _shown(request, self.kind.model)))

    def put(self, request: Request, tenant_slug: str, scim_id: str) -> Response:
        link = self.kind.get(self.tenant, scim_id)
        resource = self.kind.model.model_validate(self.body(request), scim_ctx=Context.RESOURCE_REPLACEMENT_REQUEST)
        shown = self.kind.resource(self.kind.replace(link, resource), self.location)
        return Response(shown.model_dump(scim_ctx=Context.RESOURCE_REPLACEMENT_RESPONSE))

    def patch(self, request: Request, tenant_slug: str, scim_id: str) -> Response:
        link = self.kind.get(self.tenant, scim_id)
        patch = scim.of(PatchOp, self.kind.model).model_validate(self.body(request),
                                                                 scim_ctx=Context.RESOURCE_PATCH_REQUEST)  # fmt: skip
        shown = self.kind.resource(self.kind.patch(link, patch, self.location), self.location)
        return Response(shown.model_dump(scim_ctx=Context.RESOURCE_PATCH_RESPONSE))

    def delete(self, request: Request, tenant_slug: str, scim_id: str) -> Response:
        self.kind.delete(self.kind.get(self.tenant, scim_id))
        return Response(status=204)


class SearchApi(ScimView):
    """`Users/.search` or `Groups/.search`: the listing, asked in the body."""

    kind: scim.Kind = scim.USERS
    reads_with_post = True

    def post(self, request: Request, tenant_slug: str) -> Response:
        body = self.body(request)
        links = scim.narrowed(self.kind.links(self.tenant), body.get("filter"))
        return Response(_search_page(body, self.kind.resources(links, self.location), self.kind.model))


class RootSearchApi(ScimView):
    """POST <base>/.search: Users and Groups together (RFC 7644 §3.4.3), each read with its own schema; an attribute
    one type lacks matches none of that type."""

    reads_with_post = True

    def post(self, request: Request, tenant_slug: str) -> Response:
        body = self.body(request)
        found: list[Any] = []
        for kind in (scim.USERS, scim.GROUPS):
            resources = kind.resources(kind.links(self.tenant), self.location)
            listing = _search_page({**body, "startIndex": 1, "count": scim.MAX_RESULTS}, resources, kind.model)
            found += listing.get("Resources", [])
        asked: Any = body.get("count")
        start = max(1, int(body.get("startIndex") or 1))
        count = min(scim.MAX_RESULTS, max(0, int(asked if asked is not None else scim.MAX_RESULTS)))
        page = found[start - 1 : start - 1 + count]
        return Response({"schemas": ["urn:ietf:params:scim:api:messages:2.0:ListResponse"],
                         "totalResults": len(found), "startIndex": start, "itemsPerPage": len(page),
                         "Resources": page})  # fmt: skip


class NotFoundApi(ScimView):
    """Any other path under the SCIM base URL: 404 in SCIM's shape (to the tenant's token; 401 to anyone else)."""

    def _missing(self, request: Request, tenant_slug: str, rest: str = "") -> Response:
        return _error(404, f"No SCIM endpoint {rest or '/'}.")

    get = post = put = patch = delete = _missing


class ServiceProviderConfigApi(ScimView):
    def get(self, request: Request, tenant_slug: str) -> Response:
        config = ServiceProviderConfig.model_validate({
            "patch": {"supported": True}, "bulk": {"supported": False, "maxOperations": 0, "maxPayloadSize": 0},
            "filter": {"supported": True, "maxResults": scim.MAX_RESULTS}, "changePassword": {"supported": False},
            "sort": {"supported": False}, "etag": {"supported": False},
            "authenticationSchemes": [{"type": "oauthbearertoken", "name": "SCIM bearer token", "primary": True,
                                       "description": "A token made on the tenant's keys page"}],
            "meta": {"resourceType": "ServiceProviderConfig", "location": f"{self.location}ServiceProviderConfig"},
        })  # fmt: skip
        return Response(config.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))


def _described(items: list[Any], model: Any, wanted: str | None, what: str) -> Response:
    """The whole list of what the server describes (resource types, schemas), or the one `wanted` (404 if none)."""
    if wanted is not None:
        found = next((item for item in items if item.id == wanted), None)
        if found is None:
            return _error(404, f"No {what} {wanted}.")
        return Response(found.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))
    listing = scim.of(ListResponse, model)(total_results=len(items), start_index=1, items_per_page=len(items),
                                           resources=items)  # fmt: skip
    return Response(listing.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE))


class ResourceTypesApi(ScimView):
    def get(self, request: Request, tenant_slug: str, name: str | None = None) -> Response:
        types = [ResourceType.from_resource(model) for model in (User, Group)]
        return _described(types, ResourceType, name, "resource type")


class SchemasApi(ScimView):
    def get(self, request: Request, tenant_slug: str, urn: str | None = None) -> Response:
        return _described([User.to_schema(), Group.to_schema()], Schema, urn, "schema")
