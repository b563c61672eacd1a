"""A chat model file and the chain of them, read without loading a model: the GGUF's metadata (architecture, name,
chat template), the chat format llama.cpp's server should use, the chain the operator configured (with the
packaged models), which files a tenant's assistant may name, and the server's threads. The gateway (llm.py) and
the model server's supervisor (runtime.py) both use it; neither imports the other for it."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

from inference.packaged import PACKAGED_CHAT_CHAIN, PackagedModelError, assemble_gguf

logger = logging.getLogger(__name__)


# GGUFs without a chat template (base models such as Gemma 3 270M) make llama.cpp fall back to Llama-2
# markup, and the model then answers nothing; the server gets the family's own format instead.
FAMILY_FORMATS = {
    "gemma": "gemma",
    "qwen": "chatml",
    "llama": "llama-3",
    "mistral": "mistral-instruct",
    "phi": "chatml",
}


# Formats whose template silently drops the system turn (llama.cpp's "gemma"): the rules are folded into the
# first user turn instead, or the model would answer without them.
SYSTEMLESS_FORMATS = {"gemma"}


class ModelLoadError(Exception):
    pass


@dataclass(frozen=True)
class GGUFInfo:
    architecture: str
    name: str
    has_chat_template: bool
    context_length: int | None


# GGUF metadata value types (ggml's gguf.h): fixed sizes for the scalars, 8 = string, 9 = array.
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_WANTED = ("general.architecture", "general.name", "tokenizer.chat_template")


def _read_gguf_metadata(path: str) -> dict[str, Any]:
    """The scalar and string metadata of a GGUF (arrays such as the vocabulary are skipped unread).

    Written here rather than with ggml-org's `gguf` reader: that one parses every tensor and array into numpy
    and took 15.6 s on the 1.5B; this reads only the header, in well under a second."""
    import struct

    with open(path, "rb") as file:

        def unpack(fmt: str) -> Any:
            size = struct.calcsize("<" + fmt)
            data = file.read(size)
            if len(data) != size:
                raise ValueError("truncated GGUF header")
            return struct.unpack("<" + fmt, data)[0]

        def string() -> str:
            length = unpack("Q")
            if length > 1 << 24:
                raise ValueError("implausible string length in GGUF header")
            return file.read(length).decode("utf-8", errors="replace")

        def value(kind: int) -> Any:
            if kind in _GGUF_SCALARS:
                return unpack(_GGUF_SCALARS[kind])
            if kind == _GGUF_STRING:
                return string()
            if kind == _GGUF_ARRAY:
                item, count = unpack("I"), unpack("Q")
                if item in _GGUF_SCALARS:
                    file.seek(count * struct.calcsize("<" + _GGUF_SCALARS[item]), 1)
                elif item == _GGUF_STRING:
                    for _ in range(count):
                        file.seek(unpack("Q"), 1)
                else:
                    raise ValueError(f"unsupported GGUF array item type {item}")
                return None
            raise ValueError(f"unknown GGUF value type {kind}")

        if file.read(4) != b"GGUF":
            raise ValueError("not a GGUF file")
        if unpack("I") < 2:
            raise ValueError("GGUF version 1 is not supported")
        unpack("Q")  # tensor count
        metadata: dict[str, Any] = {}
        for _ in range(unpack("Q")):
            key = string()
            found = value(unpack("I"))
            if key in _GGUF_WANTED or key.endswith(".context_length"):
                metadata[key] = found
        return metadata


@lru_cache(maxsize=64)
def _gguf_info(path: str, size: int, mtime: float) -> GGUFInfo:
    metadata = _read_gguf_metadata(path)
    architecture = str(metadata.get("general.architecture") or "")
    return GGUFInfo(
        architecture=architecture,
        name=str(metadata.get("general.name") or ""),
        has_chat_template=bool(metadata.get("tokenizer.chat_template")),
        context_length=metadata.get(f"{architecture}.context_length"),
    )


def gguf_info(path: str) -> GGUFInfo:
    """A GGUF's metadata, read from its header without loading weights (nor llama.cpp).

    Raises ModelLoadError for a missing, truncated or foreign file."""
    try:
        stat = Path(path).stat()
        return _gguf_info(path, stat.st_size, stat.st_mtime)
    except (OSError, ValueError) as exc:  # missing, truncated, foreign or damaged
        raise ModelLoadError(f"{path}: {type(exc).__name__}: {exc}") from exc


def chat_format_for(path: str) -> str | None:
    """None when the GGUF carries its chat template (llama.cpp then uses it); otherwise its family's format."""
    try:
        info = gguf_info(path)
    except ModelLoadError:
        return None  # the server reports the file itself
    if info.has_chat_template:
        return None
    family = f"{info.architecture} {info.name} {Path(path).name}".lower()
    return next((fmt for key, fmt in FAMILY_FORMATS.items() if key in family), "chatml")


def server_threads() -> int:
    """RAG_LLM_THREADS, or with 0 ("auto") every core: the model server is the only thing decoding."""
    return settings.RAG_LLM_THREADS or os.cpu_count() or 1


def configured_paths() -> list[str]:
    """RAG_LLM_MODEL_PATH, then RAG_LLM_FALLBACK_PATHS, then (unless a path is set) the packaged chain."""
    paths = [settings.RAG_LLM_MODEL_PATH] if settings.RAG_LLM_MODEL_PATH else []
    paths += [p for p in settings.RAG_LLM_FALLBACK_PATHS if p]
    if not settings.RAG_LLM_MODEL_PATH:
        for model in PACKAGED_CHAT_CHAIN:
            try:
                paths.append(str(assemble_gguf(model)))
            except (PackagedModelError, OSError) as exc:  # the next model, or extractive answers, still work
                logger.warning("A packaged chat model is unavailable: %s", exc)
                paths.append(str(model.target()))  # kept in the chain so the failure is reported
    return list(dict.fromkeys(paths))


def model_path_allowed(path: str) -> bool:
    """A chat GGUF a tenant's assistant may name: a .gguf inside RAG_MODELS_DIR, or one the operator
    configured (RAG_LLM_MODEL_PATH, RAG_LLM_FALLBACK_PATHS). Never an arbitrary file of the server."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    operator = {
        Path(p).expanduser().resolve() for p in [settings.RAG_LLM_MODEL_PATH, *settings.RAG_LLM_FALLBACK_PATHS] if p
    }
    models_dir = Path(settings.RAG_MODELS_DIR).resolve()
    return resolved in operator or (resolved.suffix == ".gguf" and models_dir in resolved.parents)
