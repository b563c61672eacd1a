"""OpenID Connect sign-in (authorization code flow with PKCE). Authlib's OAuth2 client builds the authorization URL
(state, nonce, S256 code challenge) and exchanges the code (client secret, code verifier); joserfc — the JOSE
library Authlib itself is built on — checks the ID token: its signature against a key the provider publishes (its
JWKS), an asymmetric algorithm the provider announces (never `none`, never a key the provider does not publish),
then issuer, audience (and `azp`), expiry, issue time and nonce. Discovery and keys are read from the issuer and
cached for ten minutes (the keys again at once when a token names a key not yet seen: the provider rotated).
Chosen over mozilla-django-oidc (one provider, from settings) and django-allauth (its own accounts and pages):
providers here are rows a tenant admin edits, several per tenant, and membership follows identity/people.py."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import OAuth2Client
from django.core.cache import cache
from django.utils.translation import gettext as _
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidClaimError, JoseError, MissingClaimError
from joserfc.jwk import KeySet

from core.sealed import unseal
from identity.models import SECRET_PURPOSE, Provider
from identity.people import Person

CACHE_S = 600
TIMEOUT_S = 10
MAX_BYTES = 1024 * 1024  # a discovery document, a key set or UserInfo: a few KiB in practice
LEEWAY_S = 60
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
PENDING_MAX_AGE_S = 600


class OidcFailed(Exception):
    """A sign-in that cannot go on; the message is for the person signing in."""


def _issuer(provider: Provider) -> str:
    return provider.issuer.rstrip("/")


def _fetch_json(url: str, headers: dict[str, str] | None = None) -> Any:
    """A provider's JSON document (discovery, keys, UserInfo), read within TIMEOUT_S in all and MAX_BYTES: a slow or
    endless answer never holds a web worker that every tenant shares. OidcFailed when it cannot be read."""
    deadline = time.monotonic() + TIMEOUT_S
    body = bytearray()
    try:
        with httpx.stream("GET", url, headers=headers, timeout=TIMEOUT_S, follow_redirects=False) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_BYTES or time.monotonic() > deadline:
                    raise OidcFailed(_("The identity provider answered too slowly or too much."))
        return json.loads(body)
    except (httpx.HTTPError, ValueError) as exc:
        raise OidcFailed(
            _("The identity provider cannot be reached (%(error)s).") % {"error": type(exc).__name__}
        ) from exc


def _get_json(url: str) -> dict[str, Any]:
    body = _fetch_json(url)
    if not isinstance(body, dict):
        raise OidcFailed(_("The identity provider answered something that is not JSON."))
    return body


def discovery(provider: Provider) -> dict[str, Any]:
    """The provider's OpenID configuration; its `issuer` must be the one configured, exactly."""
    key = f"identity:oidc:discovery:{provider.pk}:{_issuer(provider)}"
    document = cache.get(key)
    if document is None:
        document = _get_json(_issuer(provider) + "/.well-known/openid-configuration")
        if str(document.get("issuer", "")).rstrip("/") != _issuer(provider):
            raise OidcFailed(_("The provider's discovery document names another issuer."))
        missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(k)]
        if missing:
            raise OidcFailed(_("The provider's discovery document lacks %(fields)s.") % {"fields": ", ".join(missing)})
        cache.set(key, document, CACHE_S)
    return document


def _keys(provider: Provider, document: dict[str, Any], *, fresh: bool = False) -> KeySet:
    key = f"identity:oidc:jwks:{provider.pk}:{document['jwks_uri']}"
    published = None if fresh else cache.get(key)
    if published is None:
        published = _get_json(document["jwks_uri"])
        cache.set(key, published, CACHE_S)
    try:
        return KeySet.import_key_set(published)  # type: ignore[arg-type]
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise OidcFailed(_("The provider publishes keys that cannot be read.")) from exc


def algorithms(document: dict[str, Any]) -> list[str]:
    announced = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    return [a for a in SIGNING_ALGORITHMS if a in announced] or ["RS256"]


def begin(provider: Provider, redirect_uri: str) -> tuple[str, dict[str, Any]]:
    """The provider's authorization URL, and what the callback must find in the session to accept its answer."""
    document = discovery(provider)
    pending = {
        "provider": provider.pk,
        "state": generate_token(32),
        "nonce": generate_token(32),
        "verifier": generate_token(64),
        "at": time.time(),
    }
    client = OAuth2Client(
        client_id=provider.client_id,
        scope=provider.scopes or "openid",
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
    )
    url, _state = client.create_authorization_url(
        document["authorization_endpoint"],
        state=pending["state"],
        nonce=pending["nonce"],
        code_verifier=pending["verifier"],
    )
    return url, pending


def id_token_claims(
    raw: str, keys: KeySet, *, issuer: str, audience: str, nonce: str, allowed: list[str]
) -> dict[str, Any]:
    """The ID token's claims once its signature, issuer, audience, expiry, issue time and nonce are right."""
    try:
        token = jwt.decode(raw, keys, algorithms=allowed)
    except JoseError as exc:
        raise OidcFailed(_("The ID token's signature does not check out (%(error)s).") % {"error": exc.error}) from exc
    except ValueError as exc:
        raise OidcFailed(_("The ID token cannot be read.")) from exc
    registry = jwt.JWTClaimsRegistry(
        leeway=LEEWAY_S,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": audience},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": nonce},
    )
    claims = dict(token.claims)
    if isinstance(claims.get("iss"), str):
        claims["iss"] = claims["iss"].rstrip("/")
    try:
        registry.validate(claims)
    except ExpiredTokenError as exc:
        raise OidcFailed(_("The ID token has expired.")) from exc
    except (InvalidClaimError, MissingClaimError) as exc:
        raise OidcFailed(_("The ID token is not for this sign-in (%(error)s).") % {"error": exc.description}) from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != audience:
        raise OidcFailed(_("The ID token was issued to another client (azp)."))
    return claims


def complete(provider: Provider, pending: dict[str, Any] | None, params: Any, redirect_uri: str) -> Person:
    """The person the provider's answer names, once every check passes."""
    if params.get("error"):
        raise OidcFailed(
            _("The identity provider refused: %(error)s.")
            % {"error": (params.get("error_description") or params.get("error"))[:200]}
        )
    if (
        not pending
        or pending.get("provider") != provider.pk
        or not params.get("state")
        or params.get("state") != pending.get("state")
    ):
        raise OidcFailed(_("This sign-in was not started here, or was already used: start again."))
    if time.time() - float(pending.get("at", 0)) > PENDING_MAX_AGE_S:
        raise OidcFailed(_("This sign-in took too long: start again."))
    if params.get("iss") and str(params["iss"]).rstrip("/") != _issuer(provider):  # RFC 9207: mix-up attacks
        raise OidcFailed(_("The answer comes from another issuer."))
    if not params.get("code"):
        raise OidcFailed(_("The identity provider sent no authorization code."))
    document = discovery(provider)
    client = OAuth2Client(
        client_id=provider.client_id,
        client_secret=unseal(provider.secret_sealed, purpose=SECRET_PURPOSE),
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        timeout=TIMEOUT_S,
    )
    try:
        with client:
            token = client.fetch_token(
                document["token_endpoint"],
                grant_type="authorization_code",
                code=params["code"],
                code_verifier=pending["verifier"],
            )
    except Exception as exc:  # Authlib raises OAuthError, httpx its own; either way the sign-in stops here
        raise OidcFailed(
            _("The code could not be exchanged at the provider (%(error)s).") % {"error": str(exc)[:200]}
        ) from exc
    raw = token.get("id_token")
    if not raw:
        raise OidcFailed(_("The provider sent no ID token (is the scope `openid` asked for?)."))
    check = {
        "issuer": _issuer(provider),
        "audience": provider.client_id,
        "nonce": pending["nonce"],
        "allowed": algorithms(document),
    }
    try:
        claims = id_token_claims(raw, _keys(provider, document), **check)
    except OidcFailed:
        claims = id_token_claims(raw, _keys(provider, document, fresh=True), **check)  # the provider rotated its keys
    if document.get("userinfo_endpoint") and token.get("access_token"):
        claims = {**_userinfo(document["userinfo_endpoint"], token["access_token"], claims["sub"]), **claims}
    return person_of(provider, claims)


def _userinfo(url: str, access_token: str, subject: str) -> dict[str, Any]:
    """The UserInfo claims (many providers put e-mail and groups only there); ignored unless for the same subject."""
    try:
        info = _fetch_json(url, headers={"Authorization": f"Bearer {access_token}"})
    except OidcFailed:
        return {}
    return info if isinstance(info, dict) and info.get("sub") == subject else {}


def _claim(claims: dict[str, Any], name: str) -> Any:
    value: Any = claims
    for part in (name or "").split("."):  # a dotted name reaches into a nested claim (Keycloak's realm_access.roles)
        value = value.get(part) if isinstance(value, dict) else None
    return value


def person_of(provider: Provider, claims: dict[str, Any]) -> Person:
    groups = _claim(claims, provider.groups_claim)
    groups = [groups] if isinstance(groups, str) else groups if isinstance(groups, list) else []
    email = _claim(claims, provider.email_claim)
    verified = claims.get("email_verified")
    return Person(
        subject=str(claims.get("sub") or ""),  # OpenID Connect: `sub`, never another claim
        username=str(_claim(claims, provider.username_claim) or ""),
        email=str(email or "")[:254],
        email_verified=verified if isinstance(verified, bool) else None,
        groups=[str(g) for g in groups][:500],
        display_name=str(claims.get("name") or "")[:300],
    )
