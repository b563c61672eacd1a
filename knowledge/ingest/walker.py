"""Walk a folder: what to ingest, and every skip with its reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from knowledge.ingest.classify import IMAGE_SUFFIXES

SKIP_DIRS = {
    ".git", ".hg", ".svn", ".bzr", "node_modules", ".venv", "venv", "env", "__pycache__", "target", "build",
    "dist", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".idea", ".vscode", ".gradle",
    "bower_components", ".next", ".nuxt", "vendor", ".cache", "site-packages", ".eggs", "coverage", "htmlcov",
}  # fmt: skip
LOCK_FILES = {
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Pipfile.lock", "Cargo.lock",
    "composer.lock", "Gemfile.lock", "uv.lock", "go.sum", "bun.lockb", "npm-shrinkwrap.json",
}  # fmt: skip
BINARY_SUFFIXES = {
    # archives
    ".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".zst", ".jar", ".war", ".whl", ".egg",
    # media
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".svgz", ".psd", ".mp3", ".wav",
    ".ogg", ".flac", ".mp4", ".mkv", ".mov", ".avi", ".webm", ".ttf", ".otf", ".woff", ".woff2", ".eot",
    # model weights and data blobs
    ".gguf", ".ggml", ".safetensors", ".onnx", ".pt", ".pth", ".ckpt", ".bin", ".h5", ".pkl", ".npy", ".npz",
    ".parquet", ".sqlite", ".sqlite3", ".db",
    # compiled code and office binaries
    ".pyc", ".pyo", ".so", ".dll", ".dylib", ".exe", ".o", ".a", ".class", ".wasm",
}  # fmt: skip
# Binary formats an extractor reads (extraction.py, office.py); containers, so their size limit is
# RAG_MAX_PDF_BYTES rather than the text-file limit.
BINARY_OK_SUFFIXES = {".pdf", ".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp"}
LEGACY_OFFICE = {".doc": ".docx", ".xls": ".xlsx", ".ppt": ".pptx"}


@dataclass(frozen=True)
class WalkedFile:
    path: Path
    key: str  # path relative to the walked root, POSIX separators
    size: int
    mtime: float


@dataclass(frozen=True)
class Skip:
    key: str
    reason: str


def _gitignore(directory: Path) -> pathspec.GitIgnoreSpec | None:
    ignore = directory / ".gitignore"
    if not ignore.is_file():
        return None
    try:
        lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(specs: list[tuple[Path, pathspec.PathSpec]], path: Path, is_dir: bool) -> bool:
    """Apply every .gitignore from the root down; a deeper file's rules (and its `!` negations) win."""
    ignored = False
    for base, spec in specs:
        relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        result = spec.check_file(relative)
        if result.include is not None:
            ignored = bool(result.include)
    return ignored


def sniff_text(path: Path, size: int) -> str | None:
    """None if the file is UTF-8 text, else why it is not."""
    try:
        with path.open("rb") as handle:
            data = handle.read(size)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    return _text_reason(data)


def _text_reason(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return "binary file"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not valid UTF-8 text"
    return None


def walk(root: Path, *, max_bytes: int, images: bool = False) -> Iterator[WalkedFile | Skip]:
    """Yield every ingestible file under root, and a Skip for everything passed over (not for junk dirs' content).
    `images`: image files are attachments to read by OCR (a vault's), with the size limit of PDFs."""
    root = root.resolve()
    stack: list[tuple[Path, list[tuple[Path, pathspec.PathSpec]]]] = [(root, [])]
    while stack:
        directory, inherited = stack.pop()
        specs = list(inherited)
        own = _gitignore(directory)
        if own is not None:
            specs.append((directory, own))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            yield Skip(directory.relative_to(root).as_posix() or ".", f"unreadable folder: {exc.strerror}")
            continue
        subdirs = []
        for entry in entries:
            path = Path(entry.path)
            key = path.relative_to(root).as_posix()
            if entry.is_symlink():
                yield Skip(key, "symbolic link (not followed)")
                continue
            if entry.is_dir():
                if entry.name in SKIP_DIRS or (entry.name.startswith(".") and entry.name != ".github"):
                    yield Skip(key + "/", "excluded folder")
                elif _ignored(specs, path, True):
                    yield Skip(key + "/", "ignored by .gitignore")
                else:
                    subdirs.append(path)
                continue
            if not entry.is_file():
                yield Skip(key, "not a regular file")
                continue
            reason = _file_skip_reason(entry, path, specs, max_bytes, images=images)
            if reason:
                yield Skip(key, reason)
                continue
            stat = entry.stat()
            yield WalkedFile(path=path, key=key, size=stat.st_size, mtime=stat.st_mtime)
        stack.extend((subdir, specs) for subdir in reversed(subdirs))


def name_skip_reason(name: str) -> str | None:
    """Why a file is never ingested, judged from its name alone (None: it may be)."""
    suffix = Path(name).suffix.lower()
    if name in (".gitignore", ".DS_Store", ".gitattributes", ".gitmodules"):
        return "repository metadata"
    if name in LOCK_FILES or suffix == ".lock":
        return "lock file"
    if name.endswith((".min.js", ".min.css", ".map")):
        return "generated file"
    if suffix in LEGACY_OFFICE:
        return f"legacy binary Office format ({suffix}): save it as {LEGACY_OFFICE[suffix]} to ingest it"
    if suffix in BINARY_SUFFIXES:
        return f"binary or media file ({suffix})"
    return None


def size_limit(name: str, max_bytes: int) -> int:
    """PDFs are containers (fonts, images): their limit is RAG_MAX_PDF_BYTES, not the text-file limit."""
    from django.conf import settings

    if Path(name).suffix.lower() in BINARY_OK_SUFFIXES | IMAGE_SUFFIXES:
        return max(max_bytes, getattr(settings, "RAG_MAX_PDF_BYTES", max_bytes))
    return max_bytes


def content_skip_reason(name: str, data: bytes, *, max_bytes: int) -> str | None:
    """Why these bytes are not ingested (size, emptiness, binary, encoding), or None."""
    max_bytes = size_limit(name, max_bytes)
    if len(data) > max_bytes:
        return f"larger than the {max_bytes // 1024} KiB limit ({len(data) // 1024} KiB)"
    if not data:
        return "empty"
    if Path(name).suffix.lower() in BINARY_OK_SUFFIXES:
        return None
    return _text_reason(data)


def _file_skip_reason(
    entry: os.DirEntry, path: Path, specs: list[tuple[Path, pathspec.PathSpec]], max_bytes: int, *, images: bool
) -> str | None:
    if _ignored(specs, path, False):
        return "ignored by .gitignore"
    image = images and path.suffix.lower() in IMAGE_SUFFIXES
    reason = None if image else name_skip_reason(entry.name)
    if reason:
        return reason
    size = entry.stat().st_size
    max_bytes = size_limit(entry.name, max_bytes)
    if size > max_bytes:
        return f"larger than the {max_bytes // 1024} KiB limit ({size // 1024} KiB)"
    if size == 0:
        return "empty"
    if image or path.suffix.lower() in BINARY_OK_SUFFIXES:
        return None
    return sniff_text(path, size)
