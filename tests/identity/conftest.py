"""The identity providers the identity tests sign in through, each a real server started here: panva's
oidc-provider (OpenID Certified) under Debian's node, Debian's OpenLDAP slapd, and a SAML IdP built on pysaml2's
own IdP (saml2.server) behind a small login page (tests/identity/saml_idp.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).parent
OIDC_DIR = HERE / "oidc_provider"
CLIENT_ID, CLIENT_SECRET = "ragsite-acme", "a-client-secret-for-tests"
OIDC_ACCOUNTS = {
    "alice": {
        "preferred_username": "alice",
        "email": "alice@acme.example",
        "email_verified": True,
        "name": "Alice Liddell",
        "groups": ["engineering", "ragsite-admins"],
    },
    "bob": {
        "preferred_username": "bob",
        "email": "bob@acme.example",
        "email_verified": True,
        "name": "Bob Stone",
        "groups": ["support"],
    },
    "mallory": {
        "preferred_username": "mallory",
        "email": "mallory@evil.example",
        "email_verified": True,
        "groups": ["support"],
    },
}


@pytest.fixture(autouse=True)
def in_english():  # type: ignore[no-untyped-def]
    """Refusals are said in the asker's language; these tests read the English ones, whatever a test before them
    left active in this thread."""
    from django.utils import translation

    with translation.override("en"):
        yield


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited: {process.stdout.read().decode() if process.stdout else ''}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not start")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def oidc_provider(live_server) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    """A real OpenID Provider; its client's redirect URIs are the live server's callbacks of providers `okta` and
    `keycloak` of tenant `acme`."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("the OpenID Connect tests need Debian's nodejs and npm (scripts/test.sh installs them)")
    if not (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=OIDC_DIR, check=True, capture_output=True)
    port = free_port()
    callbacks = [f"{live_server.url}/sso/acme/{slug}/callback/" for slug in ("okta", "keycloak")]
    env = {
        **os.environ,
        "PORT": str(port),
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "REDIRECT_URIS": ",".join(callbacks),
        "ACCOUNTS": json.dumps(OIDC_ACCOUNTS),
    }
    process = subprocess.Popen(
        ["node", "provider.mjs"], cwd=OIDC_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        _wait(f"{issuer}/.well-known/openid-configuration", process, "oidc-provider")
        yield {"issuer": issuer, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    finally:
        _stop(process)


SLAPD_CONF = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {root}/slapd.pid
database mdb
maxsize 10485760
suffix "dc=acme,dc=example"
rootdn "cn=admin,dc=acme,dc=example"
rootpw {root_password}
directory {root}/data
access to attrs=userPassword by anonymous auth by * none
access to * by users read by * none
"""


class Directory:
    """A running slapd and its administrator's connection (ldap3): the test writes the company's directory."""

    suffix = "dc=acme,dc=example"

    def __init__(self, url: str, root_password: str) -> None:
        import ldap3

        self.url = url
        self.admin = ldap3.Connection(ldap3.Server(url), f"cn=admin,{self.suffix}", root_password, auto_bind=True)

    def add(self, dn: str, classes: list[str], attributes: dict[str, object]) -> None:
        assert self.admin.add(dn, classes, attributes), self.admin.result

    def delete(self, dn: str) -> None:
        assert self.admin.delete(dn), self.admin.result

    def person(self, uid: str, *, password: str = "") -> str:
        dn = f"uid={uid},ou=people,{self.suffix}"
        attributes = {"uid": uid, "cn": uid.title(), "sn": "Example", "mail": f"{uid}@acme.example"}
        if password:
            attributes["userPassword"] = password
        self.add(dn, ["inetOrgPerson"], attributes)
        return dn

    def group(self, name: str, members: list[str]) -> None:
        self.add(f"cn={name},ou=groups,{self.suffix}", ["groupOfNames"], {"cn": name, "member": members})


@pytest.fixture
def slapd(tmp_path) -> Iterator[Directory]:  # type: ignore[no-untyped-def]
    """Debian's OpenLDAP, with an organisation, `ou=people`, `ou=groups` and a read-only service account."""
    binary = shutil.which("slapd") or "/usr/sbin/slapd"
    if not Path(binary).exists():
        pytest.fail("the directory tests need Debian's slapd (scripts/test.sh installs it)")
    (tmp_path / "data").mkdir()
    conf = tmp_path / "slapd.conf"
    conf.write_text(SLAPD_CONF.format(root=tmp_path, root_password="root-secret"))
    port = free_port()
    url = f"ldap://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "-f", str(conf), "-h", f"{url}/", "-d", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("slapd did not start") from None
                time.sleep(0.1)
        directory = Directory(url, "root-secret")
        directory.add(directory.suffix, ["dcObject", "organization"], {"o": "Acme", "dc": "acme"})
        for unit in ("people", "groups", "services"):
            directory.add(f"ou={unit},{directory.suffix}", ["organizationalUnit"], {"ou": unit})
        directory.add(
            f"cn=ragsite,ou=services,{directory.suffix}",
            ["organizationalRole", "simpleSecurityObject"],
            {"cn": "ragsite", "userPassword": "reader-secret"},
        )
        yield directory
    finally:
        _stop(process)


SAML_PEOPLE = {
    "dana": (
        "dana-password",
        "f7a1c2d3-dana",
        {"uid": ["dana"], "mail": ["dana@acme.example"], "groups": ["engineering", "ragsite-admins"]},
    ),
    "erik": ("erik-password", "0b9e4d5c-erik", {"uid": ["erik"], "mail": ["erik@acme.example"], "groups": ["support"]}),
}


@pytest.fixture
def saml_idp(tmp_path) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """pysaml2's IdP behind a login page, on its own port (tests/identity/saml_idp.py)."""
    if shutil.which("xmlsec1") is None:
        pytest.fail("SAML needs Debian's xmlsec1 (scripts/_identity.sh installs it)")
    from tests.identity.saml_idp import TestIdP

    idp = TestIdP(tmp_path, SAML_PEOPLE)
    try:
        yield idp
    finally:
        idp.close()
