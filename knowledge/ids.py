"""The identity scheme, built and parsed in this one place.

    source_id   = src:<tenant>:<source_kind>:<source_name>
    document_id = doc:<source_id>:<document_key>
    chunk_id    = chk:<document_id>:<chunk_mode>:<chunk_index>

Every component is normalised (Unicode NFC, whitespace tidied) and then escaped so that it
never contains ':' — '%' and ':' (and control characters) are percent-encoded. So an id splits
on ':' into exactly one reading, and two different names never produce the same id. Anything
that would still be ambiguous (empty names, '..' path segments, absolute paths) is rejected.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import PurePosixPath

KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,19}$")  # a source kind's name; which kinds exist: knowledge/ingest/sources.py
CHUNK_MODES = ("documental", "code", "summary", "card")
DEFAULT_SOURCE_KIND = "upload"
DEFAULT_SOURCE_NAME = "default"
MAX_NAME_LENGTH = 200
MAX_KEY_LENGTH = 1000

_TENANT_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$")
_WHITESPACE_RE = re.compile(r"\s+")
_CONTROL_CHARS = {chr(c) for c in range(32)} | {"\x7f"}
# Text-direction controls make a name display as another ("invoice\u202efdp.exe" reads "invoiceexe.pdf").
BIDI_CONTROLS = set("\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# Tesseract language codes joined by "+" (eng, spa, chi_sim …): a source's OCR languages.
OCR_LANGUAGES_RE = re.compile(r"^[a-z_]{3,10}(\+[a-z_]{3,10}){0,5}$")


class InvalidIdentifier(ValueError):
    """A name, key or id that cannot be part of the identity scheme."""


def _escape(text: str) -> str:
    out = []
    for char in text:
        if char in ("%", ":") or char in _CONTROL_CHARS:
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
        else:
            out.append(char)
    return "".join(out)


def _unescape(text: str) -> str:
    return re.sub(r"(?:%[0-9A-F]{2})+", lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode("utf-8"), text)


def normalise_source_name(name: str) -> str:
    """`"  Product  Docs/2024 "` → `product-docs/2024`: NFC, trimmed, lowercased, spaces as '-'."""
    text = unicodedata.normalize("NFC", name).strip().lower()
    text = _WHITESPACE_RE.sub("-", text)
    if not text:
        raise InvalidIdentifier("A source name cannot be empty.")
    if len(text) > MAX_NAME_LENGTH:
        raise InvalidIdentifier(f"A source name is limited to {MAX_NAME_LENGTH} characters.")
    return _escape(text)


def normalise_document_key(key: str) -> str:
    """A relative POSIX path, NFC, without '.' segments; never absolute, never climbing with '..'."""
    text = unicodedata.normalize("NFC", key).strip().replace("\\", "/")
    if not text:
        raise InvalidIdentifier("A document key cannot be empty.")
    if BIDI_CONTROLS & set(text):
        raise InvalidIdentifier(f"A document key cannot contain text-direction control characters: {key!r}.")
    if text.startswith("/") or re.match(r"^[A-Za-z]:/", text):
        raise InvalidIdentifier(f"A document key must be relative to its source, not {key!r}.")
    parts = [part for part in PurePosixPath(text).parts if part not in ("", ".")]
    if not parts:
        raise InvalidIdentifier(f"{key!r} names no document.")
    if ".." in parts:
        raise InvalidIdentifier(f"A document key cannot contain '..': {key!r}.")
    normalised = "/".join(parts)
    if len(normalised) > MAX_KEY_LENGTH:
        raise InvalidIdentifier(f"A document key is limited to {MAX_KEY_LENGTH} characters.")
    return _escape(normalised)


def _check_tenant(tenant_slug: str) -> str:
    if not _TENANT_RE.match(tenant_slug):
        raise InvalidIdentifier(f"{tenant_slug!r} is not a valid tenant slug.")
    return tenant_slug


def _check_kind(kind: str) -> str:
    """A kind's name as an id holds it (lowercase letters, digits, underscores); the registry knows which exist."""
    if not isinstance(kind, str) or not KIND_RE.match(kind):
        raise InvalidIdentifier(f"{kind!r} is not a source kind's name.")
    return kind


def source_id(tenant_slug: str, kind: str, name: str) -> str:
    return f"src:{_check_tenant(tenant_slug)}:{_check_kind(kind)}:{normalise_source_name(name)}"


def document_id(source_id_: str, document_key: str) -> str:
    parse_source_id(source_id_)
    return f"doc:{source_id_}:{normalise_document_key(document_key)}"


def chunk_id(document_id_: str, mode: str, index: int) -> str:
    parse_document_id(document_id_)
    if mode not in CHUNK_MODES:
        raise InvalidIdentifier(f"Unknown chunk mode {mode!r}; use one of {', '.join(CHUNK_MODES)}.")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise InvalidIdentifier(f"A chunk index is a non-negative integer, not {index!r}.")
    return f"chk:{document_id_}:{mode}:{index}"


@dataclass(frozen=True)
class ParsedId:
    tenant: str
    source_kind: str
    source_name: str  # as escaped in the id
    document_key: str | None = None  # unescaped: the relative path as the user knows it
    chunk_mode: str | None = None
    chunk_index: int | None = None

    @property
    def source_id(self) -> str:
        return f"src:{self.tenant}:{self.source_kind}:{self.source_name}"


def parse_source_id(value: str) -> ParsedId:
    parts = value.split(":")
    if len(parts) != 4 or parts[0] != "src" or not parts[3]:
        raise InvalidIdentifier(f"{value!r} is not a source id (src:<tenant>:<kind>:<name>).")
    _check_tenant(parts[1])
    _check_kind(parts[2])
    return ParsedId(tenant=parts[1], source_kind=parts[2], source_name=parts[3])


def parse_document_id(value: str) -> ParsedId:
    parts = value.split(":")
    if len(parts) != 6 or parts[0] != "doc" or not parts[5]:
        raise InvalidIdentifier(f"{value!r} is not a document id (doc:<source_id>:<document_key>).")
    source = parse_source_id(":".join(parts[1:5]))
    return ParsedId(source.tenant, source.source_kind, source.source_name, document_key=_unescape(parts[5]))


def parse_chunk_id(value: str) -> ParsedId:
    parts = value.split(":")
    if len(parts) != 9 or parts[0] != "chk" or parts[7] not in CHUNK_MODES or not re.fullmatch(r"[0-9]+", parts[8]):
        raise InvalidIdentifier(f"{value!r} is not a chunk id (chk:<document_id>:<mode>:<index>).")
    document = parse_document_id(":".join(parts[1:7]))
    return ParsedId(
        document.tenant,
        document.source_kind,
        document.source_name,
        document_key=document.document_key,
        chunk_mode=parts[7],
        chunk_index=int(parts[8]),
    )


def is_uuid(value: str) -> bool:
    """Whether a string is a UUID (public ids in URLs and API bodies); guards lookups on UUID columns."""
    import uuid

    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def display_name(escaped: str) -> str:
    """The readable form of an escaped id component."""
    return _unescape(escaped)


def public_url(url: str) -> str:
    """A URL as pages, jobs and errors may show it: without the password or token it may carry."""
    return re.sub(r"(://)[^/@]+@", r"\1", url)
