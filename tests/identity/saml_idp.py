"""A SAML 2.0 identity provider for the tests: pysaml2's own IdP (saml2.server.Server: parses the AuthnRequest,
makes and signs the assertion with xmlsec1) behind a login page, served over HTTP from a thread. Its key and
certificate are made here; `trust()` gives it the service provider's published metadata."""

from __future__ import annotations

import datetime
import html
import secrets
import shutil
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.config import IdPConfig
from saml2.metadata import entity_descriptor
from saml2.saml import AUTHN_PASSWORD_PROTECTED, NAME_FORMAT_BASIC, NAMEID_FORMAT_PERSISTENT, NameID
from saml2.server import Server


def key_pair(folder: Path, name: str) -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_file, cert_file = folder / f"{name}.key", folder / f"{name}.crt"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(key_file), str(cert_file)


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class TestIdP:
    """`people`: login → (password, NameID, attributes). `issued`: every SAMLResponse it sent, for replays."""

    def __init__(self, folder: Path, people: dict[str, tuple[str, str, dict[str, list[str]]]]) -> None:
        self.people, self.issued, self.pending = people, [], {}  # type: ignore[var-annotated]
        self.key_file, self.cert_file = key_pair(folder, "idp")
        self.http: WSGIServer = make_server("127.0.0.1", 0, self.app, handler_class=_Quiet)
        self.base = f"http://127.0.0.1:{self.http.server_port}"
        self.server = self._server([])
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def _server(self, sp_metadata: list[str]) -> Server:
        config = IdPConfig()
        config.load(
            {
                "entityid": f"{self.base}/metadata",
                "xmlsec_binary": shutil.which("xmlsec1"),
                "service": {
                    "idp": {
                        "name": "Test IdP",
                        "endpoints": {"single_sign_on_service": [(f"{self.base}/sso/redirect", BINDING_HTTP_REDIRECT)]},
                        "policy": {
                            "default": {
                                "lifetime": {"minutes": 5},
                                "attribute_restrictions": None,
                                "name_form": NAME_FORMAT_BASIC,
                            }
                        },
                        "name_id_format": [NAMEID_FORMAT_PERSISTENT],
                    }
                },
                "key_file": self.key_file,
                "cert_file": self.cert_file,
                "metadata": {"inline": sp_metadata} if sp_metadata else {},
            }
        )
        return Server(config=config)

    def metadata(self) -> str:
        return str(entity_descriptor(self.server.config))

    def trust(self, sp_metadata: str) -> None:
        self.server = self._server([sp_metadata])

    def answer(self, saml_request: str, login: str, **changes: Any) -> tuple[str, str]:
        """(the ACS URL, a base64 SAMLResponse) for this AuthnRequest, signed unless `sign_assertion=False`."""
        request = self.server.parse_authn_request(saml_request, BINDING_HTTP_REDIRECT)
        args = self.server.response_args(request.message, [BINDING_HTTP_POST])
        args.pop("binding", None)
        _password, subject, attributes = self.people[login]
        args.update({k: changes.pop(k) for k in ("sp_entity_id", "in_response_to") if k in changes})
        response = self.server.create_authn_response(
            identity=attributes,
            userid=subject,
            name_id=NameID(format=NAMEID_FORMAT_PERSISTENT, text=subject),
            authn={"class_ref": AUTHN_PASSWORD_PROTECTED, "authn_auth": self.base},
            sign_assertion=changes.pop("sign_assertion", True),
            sign_response=False,
            **args,
        )
        import base64

        encoded = base64.b64encode(str(response).encode()).decode()
        self.issued.append(encoded)
        return args["destination"], encoded

    def app(self, environ: dict[str, Any], start: Any) -> list[bytes]:
        path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
        if path == "/metadata":
            start("200 OK", [("Content-Type", "application/samlmetadata+xml")])
            return [self.metadata().encode()]
        if path == "/sso/redirect" and method == "GET":
            query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
            handle = secrets.token_urlsafe(8)
            self.pending[handle] = (query["SAMLRequest"], query.get("RelayState", ""))
            return self._page(start, self._form(handle, ""))
        if path == "/login" and method == "POST":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            form = {k: v[0] for k, v in parse_qs(environ["wsgi.input"].read(size).decode()).items()}
            saml_request, relay = self.pending[form["handle"]]
            person = self.people.get(form.get("username", ""))
            if person is None or person[0] != form.get("password"):
                return self._page(start, self._form(form["handle"], "Wrong username or password."))
            acs, encoded = self.answer(saml_request, form["username"])
            fields = f'<input type="hidden" name="SAMLResponse" value="{encoded}">'
            if relay:
                fields += f'<input type="hidden" name="RelayState" value="{html.escape(relay)}">'
            return self._page(
                start,
                f'<form id="post" method="post" action="{html.escape(acs)}">{fields}'
                f'<button type="submit">Continue</button></form>'
                '<script>document.getElementById("post").submit()</script>',
            )
        start("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]

    @staticmethod
    def _form(handle: str, error: str) -> str:
        return (
            f"<h1>Test IdP</h1><p id='error'>{error}</p><form method='post' action='/login'>"
            f"<input type='hidden' name='handle' value='{handle}'><input name='username' id='username'>"
            "<input type='password' name='password' id='password'><button type='submit'>Sign in</button></form>"
        )

    @staticmethod
    def _page(start: Any, body: str) -> list[bytes]:
        start("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return [f"<!doctype html><html><body>{body}</body></html>".encode()]

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
