"""SAML 2.0 sign-in through pysaml2 (the SAML library Django's djangosaml2 is built on; used directly because a
tenant admin's IdP is a row, not a setting). The service provider is one per provider row: its metadata is
published at `…/saml/metadata/`, the IdP's metadata is imported from what the admin pastes. The SP asks with the
HTTP-Redirect binding and reads the answer with HTTP-POST; pysaml2 (with Debian's xmlsec1) checks the assertion's
signature against the IdP's certificate, the audience (this SP's entity id), the validity window and that it answers
the request this browser started (InResponseTo; unsolicited answers are refused); each assertion id is accepted
once (a replay is refused even within its validity)."""

from __future__ import annotations

import shutil
import time
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest
from django.urls import reverse
from django.utils.translation import gettext as _
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.metadata import entity_descriptor
from saml2.saml import NAMEID_FORMAT_TRANSIENT

from identity.models import Provider
from identity.people import Person

PENDING_MAX_AGE_S = 600
REPLAY_WINDOW_S = 24 * 3600


class SamlFailed(Exception):
    """A sign-in that cannot go on; the message is for the person signing in."""


def _urls(provider: Provider, request: HttpRequest) -> tuple[str, str]:
    args = [provider.tenant.slug, provider.slug]
    return (
        request.build_absolute_uri(reverse("sso:saml-metadata", args=args)),
        request.build_absolute_uri(reverse("sso:saml-acs", args=args)),
    )


def config(provider: Provider, request: HttpRequest, *, with_idp: bool = True) -> SPConfig:
    entity_id, acs = _urls(provider, request)
    settings: dict[str, Any] = {
        "entityid": entity_id,
        "xmlsec_binary": shutil.which("xmlsec1"),
        "allow_unknown_attributes": True,
        "service": {
            "sp": {
                "name": f"ragsite {provider.tenant.slug} {provider.name}",
                "endpoints": {"assertion_consumer_service": [(acs, BINDING_HTTP_POST)]},
                "want_assertions_signed": True,
                "want_response_signed": False,
                "allow_unsolicited": False,
                "authn_requests_signed": False,
            }
        },
    }
    if with_idp:
        settings["metadata"] = {"inline": [provider.idp_metadata]}
    sp = SPConfig()
    try:
        sp.load(settings)
    except Exception as exc:  # pysaml2 raises many types for unreadable metadata
        raise SamlFailed(
            _("The identity provider's SAML metadata cannot be read (%(error)s).") % {"error": type(exc).__name__}
        ) from exc
    return sp


def sp_metadata(provider: Provider, request: HttpRequest) -> str:
    return str(entity_descriptor(config(provider, request, with_idp=False)))


def idp_entity_id(sp: SPConfig) -> str:
    found = list(sp.metadata.identity_providers()) if sp.metadata else []
    if len(found) != 1:
        raise SamlFailed(_("The SAML metadata must describe exactly one identity provider."))
    return found[0]


def metadata_check(provider: Provider, request: HttpRequest) -> str:
    """The IdP entity id the pasted metadata describes (the provider form's check), or SamlFailed."""
    return idp_entity_id(config(provider, request))


def begin(provider: Provider, request: HttpRequest) -> tuple[str, dict[str, Any]]:
    sp = config(provider, request)
    client = Saml2Client(config=sp)
    try:
        request_id, info = client.prepare_for_authenticate(entityid=idp_entity_id(sp), binding=BINDING_HTTP_REDIRECT)
    except SamlFailed:
        raise
    except Exception as exc:
        raise SamlFailed(
            _("The identity provider offers no way to sign in here (%(error)s).") % {"error": type(exc).__name__}
        ) from exc
    location = dict(info["headers"])["Location"]
    return location, {"provider": provider.pk, "request_id": request_id, "at": time.time()}


def complete(provider: Provider, request: HttpRequest, pending: dict[str, Any] | None) -> Person:
    if not pending or pending.get("provider") != provider.pk or not pending.get("request_id"):
        raise SamlFailed(_("This sign-in was not started here, or was already used: start again."))
    if time.time() - float(pending.get("at", 0)) > PENDING_MAX_AGE_S:
        raise SamlFailed(_("This sign-in took too long: start again."))
    answer = request.POST.get("SAMLResponse", "")
    if not answer:
        raise SamlFailed(_("The identity provider sent no SAML response."))
    client = Saml2Client(config=config(provider, request))
    try:
        response = client.parse_authn_request_response(
            answer, BINDING_HTTP_POST, outstanding={pending["request_id"]: "/"}
        )
    except Exception as exc:  # signature, audience, lifetime, status, unsolicited: pysaml2 has a type for each
        reason = f"{type(exc).__name__}: {str(exc)[:120]}".rstrip(": ")
        raise SamlFailed(_("The SAML response was refused (%(error)s).") % {"error": reason}) from exc
    if response is None or response.assertion is None:
        raise SamlFailed(_("The SAML response was refused (no valid assertion for this service)."))
    if not cache.add(f"identity:saml:assertion:{provider.pk}:{response.assertion.id}", 1, REPLAY_WINDOW_S):
        raise SamlFailed(_("This SAML assertion was already used."))
    return person_of(provider, response)


def _attribute(ava: dict[str, list[Any]], name: str) -> list[str]:
    for key, values in ava.items():
        if key == name or key.lower() == name.lower():
            return [str(v) for v in values]
    return []


def person_of(provider: Provider, response: Any) -> Person:
    ava = response.ava or {}
    name_id = response.name_id
    by_attribute = provider.subject_claim not in ("", "sub", "NameID")
    if by_attribute:
        subject = (_attribute(ava, provider.subject_claim) or [""])[0]
    elif name_id is None or name_id.format == NAMEID_FORMAT_TRANSIENT:
        raise SamlFailed(_("The IdP sent a transient name: set a persistent NameID or a subject attribute."))
    else:
        subject = str(name_id.text or "").strip()
    username = (_attribute(ava, provider.username_claim) or [""])[0] or (subject if not by_attribute else "")
    email = (_attribute(ava, provider.email_claim) or [""])[0]
    return Person(
        subject=subject,
        username=username,
        email=email[:254],
        email_verified=None,
        groups=_attribute(ava, provider.groups_claim)[:500],
    )
