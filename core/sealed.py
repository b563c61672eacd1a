"""Secrets the server needs and nobody should read back (a git URL's credential, an identity provider's client
secret, a directory's bind password): sealed at rest with a key derived from SECRET_KEY and the secret's purpose
(Fernet: AES-128-CBC with an HMAC-SHA256 tag, from `cryptography`), opened only by the code that uses them, right
before it connects. Pages, the API, the admin, logs and exports see that a secret is set, never the secret."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class SecretUnreadable(ValueError):
    """The sealed secret cannot be opened (SECRET_KEY changed since it was sealed): it must be given again."""


def _fernet(purpose: str) -> Fernet:
    key = hashlib.sha256(f"ragsite:{purpose}:".encode() + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(secret: str, *, purpose: str) -> str:
    return _fernet(purpose).encrypt(secret.encode()).decode() if secret else ""


def unseal(sealed: str, *, purpose: str) -> str:
    if not sealed:
        return ""
    try:
        return _fernet(purpose).decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnreadable(
            f"The {purpose} cannot be read (the server's secret key changed): give it again."
        ) from exc
