"""Secrets a source needs and nobody should read back: a git URL's credential (`https://user:token@host/…`) is kept
apart from the source's path, sealed with a key derived from SECRET_KEY (Fernet: AES-128-CBC with an HMAC-SHA256
tag, from `cryptography`). Pages, the API, the admin's search, job records, logs and exports see the URL without it;
only the git reader unseals it, right before it connects, and hands it to libgit2 as a credential (never in the
clone's own configuration)."""

from __future__ import annotations

import base64
import hashlib
import re

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

USERINFO_RE = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^/@]+)@", re.I)


class CredentialUnreadable(ValueError):
    """The sealed credential cannot be opened (SECRET_KEY changed since it was sealed): give the URL again."""


def _fernet() -> Fernet:
    key = hashlib.sha256(b"ragsite:source-credential:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def split_credential(location: str) -> tuple[str, str]:
    """(the location without its credential, the credential `user:token` or "")."""
    match = USERINFO_RE.match(location.strip())
    if match is None:
        return location.strip(), ""
    return match.group("scheme") + location.strip()[match.end() :], match.group("userinfo")


def seal(credential: str) -> str:
    return _fernet().encrypt(credential.encode()).decode() if credential else ""


def unseal(sealed: str) -> str:
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise CredentialUnreadable(
            "The repository's credential cannot be read (the server's secret key changed): give the URL with its "
            "credential again."
        ) from exc
