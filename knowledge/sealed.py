"""Secrets a source needs and nobody should read back: a git URL's credential (`https://user:token@host/…`) is kept
apart from the source's path, sealed with a key derived from SECRET_KEY (Fernet: AES-128-CBC with an HMAC-SHA256
tag, from `cryptography`). Pages, the API, the admin's search, job records, logs and exports see the URL without it;
only the git reader unseals it, right before it connects, and hands it to libgit2 as a credential (never in the
clone's own configuration)."""

from __future__ import annotations

import re

from core.sealed import SecretUnreadable
from core.sealed import seal as _seal
from core.sealed import unseal as _unseal

USERINFO_RE = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^/@]+)@", re.I)


class CredentialUnreadable(ValueError):
    """The sealed credential cannot be opened (SECRET_KEY changed since it was sealed): give the URL again."""


def split_credential(location: str) -> tuple[str, str]:
    """(the location without its credential, the credential `user:token` or "")."""
    match = USERINFO_RE.match(location.strip())
    if match is None:
        return location.strip(), ""
    return match.group("scheme") + location.strip()[match.end() :], match.group("userinfo")


def seal(credential: str) -> str:
    return _seal(credential, purpose="source-credential")


def unseal(sealed: str) -> str:
    try:
        return _unseal(sealed, purpose="source-credential")
    except SecretUnreadable as exc:
        raise CredentialUnreadable(
            "The repository's credential cannot be read (the server's secret key changed): give the URL with its "
            "credential again."
        ) from exc
