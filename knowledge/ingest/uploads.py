"""Uploaded files and zip archives → (key, bytes) pairs to ingest, with every refusal explained.

Zip archives are expanded in memory with limits that stop zip bombs: member count, total
uncompressed size, per-member size and compression ratio are checked from the central directory
*and* while reading (a lying header cannot get past the byte count). Member paths are normalised
like any document key: absolute paths and '..' are refused, symlinks and nested archives skipped.
"""

from __future__ import annotations

import io
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.conf import settings

from knowledge import ids
from knowledge.ingest.walker import Skip, content_skip_reason, name_skip_reason, size_limit

MAX_ZIP_MEMBERS = 10_000
MAX_COMPRESSION_RATIO = 200


class UploadRejected(ValueError):
    """The upload as a whole is refused; the message says why."""


def request_too_large(meta: dict) -> str | None:
    """Check a request's declared size before Django reads (and spools) its files."""
    try:
        length = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return "The request has an invalid Content-Length."
    if length > settings.RAG_MAX_REQUEST_BYTES:
        limit = settings.RAG_MAX_REQUEST_BYTES
        return f"The upload is {length / 2**20:.1f} MiB; one request may carry at most {limit / 2**20:.1f} MiB."
    return None


@dataclass
class Expanded:
    files: list[tuple[str, bytes]] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    renamed: str = ""  # why a single file is stored under another name than the one sent ("" when it is not)


def max_unzipped_bytes() -> int:
    return getattr(settings, "RAG_MAX_UNZIPPED_BYTES", 20 * settings.RAG_MAX_UPLOAD_BYTES)


def _accept(out: Expanded, key: str, data: bytes) -> None:
    reason = name_skip_reason(PurePosixPath(key).name) or content_skip_reason(
        key, data, max_bytes=settings.RAG_MAX_FILE_BYTES
    )
    if reason:
        out.skips.append(Skip(key, reason))
    else:
        out.files.append((key, data))


def expand_upload(name: str, data: bytes) -> Expanded:
    """One uploaded file: itself, or the members of a zip archive."""
    if len(data) > settings.RAG_MAX_UPLOAD_BYTES:
        raise UploadRejected(f"{name} is larger than the upload limit ({settings.RAG_MAX_UPLOAD_BYTES // 2**20} MiB).")
    try:
        key = ids.display_name(ids.normalise_document_key(PurePosixPath(name.replace("\\", "/")).name))
    except ids.InvalidIdentifier as exc:
        raise UploadRejected(str(exc)) from exc
    out = Expanded()
    if key != name:
        folders = "/" in name or "\\" in name
        out.renamed = (
            f"stored as {key}: the name had folder parts"
            if folders
            else f"stored as {key}: the name "
            "was normalised (Unicode form, spaces or characters a file name cannot hold)"
        )
    if name.lower().endswith(".zip"):
        _expand_zip(out, key, data)
    else:
        _accept(out, key, data)
    return out


def _expand_zip(out: Expanded, archive: str, data: bytes) -> None:
    try:
        bundle = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError) as exc:
        raise UploadRejected(f"{archive} is not a readable zip archive ({exc}).") from exc
    members = bundle.infolist()
    if len(members) > MAX_ZIP_MEMBERS:
        raise UploadRejected(f"{archive} has {len(members)} entries; the limit is {MAX_ZIP_MEMBERS}.")
    declared = sum(m.file_size for m in members)
    if declared > max_unzipped_bytes():
        raise UploadRejected(
            f"{archive} would expand to {declared // 2**20} MiB; the limit is {max_unzipped_bytes() // 2**20} MiB."
        )
    budget = max_unzipped_bytes()
    for member in members:
        if member.is_dir():
            continue
        raw_name = member.filename
        if stat.S_ISLNK(member.external_attr >> 16):
            out.skips.append(Skip(raw_name, "symbolic link in the archive (not followed)"))
            continue
        try:
            key = ids.display_name(ids.normalise_document_key(raw_name))
        except ids.InvalidIdentifier as exc:
            out.skips.append(Skip(raw_name, f"unsafe path in the archive: {exc}"))
            continue
        if any(part in {"__MACOSX", ".git", "node_modules"} for part in PurePosixPath(key).parts):
            out.skips.append(Skip(key, "excluded folder"))
            continue
        if key.lower().endswith(".zip"):
            out.skips.append(Skip(key, "nested archive (not expanded)"))
            continue
        if member.compress_size and member.file_size / member.compress_size > MAX_COMPRESSION_RATIO:
            out.skips.append(Skip(key, f"compression ratio above {MAX_COMPRESSION_RATIO}:1 (possible zip bomb)"))
            continue
        limit = size_limit(key, settings.RAG_MAX_FILE_BYTES)
        if member.file_size > limit:
            out.skips.append(Skip(key, f"larger than the {limit // 1024} KiB limit"))
            continue
        try:
            with bundle.open(member) as handle:
                content = handle.read(limit + 1)  # never trust the declared size
        except (zipfile.BadZipFile, RuntimeError, OSError, NotImplementedError) as exc:
            out.skips.append(Skip(key, f"unreadable archive member ({exc})"))
            continue
        budget -= len(content)
        if budget < 0:
            raise UploadRejected(f"{archive} expands beyond {max_unzipped_bytes() // 2**20} MiB.")
        _accept(out, key, content)
