"""End-to-end ingestion throughput against the raw embedder on the same chunks, in one run.

    python bench/ingest.py [FOLDER ...]

Default corpus: the eval corpora fetched by ../shared/eval/get_corpus.sh into /srv/bench
(flask-docs and click-code), else the installed Django package's source tree. Prints chunks/s
for the whole pipeline (walk, extract, chunk, embed, SQL, Qdrant Edge indexing) and for the
raw embedder alone on exactly the texts the pipeline embedded, and their ratio (target >= 0.85).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _django import setup


def main() -> None:
    setup()
    from knowledge import pipeline
    from knowledge.embedders import get_embedder
    from knowledge.models import Chunk
    from tenants.services import tenant_create

    folders = [Path(a) for a in sys.argv[1:]]
    if not folders:
        bench = [Path("/srv/bench/flask-docs"), Path("/srv/bench/click-code")]
        if all(p.is_dir() for p in bench):
            folders = bench
        else:
            import django

            folders = [Path(django.__file__).parent]
    tenant = tenant_create(slug="bench")
    embedder = get_embedder()
    embedder.embed(["warm up the model"])

    started = time.perf_counter()
    chunks = 0
    for folder in folders:
        source = pipeline.folder_source_get_or_create(tenant=tenant, name=folder.name, path=folder)
        job = pipeline.sync_folder(source=source, root=folder)
        chunks += job.chunks_done
        print(f"{folder}: {job.added} documents, {job.chunks_done} chunks, {job.skipped} skipped, {job.failed} failed")
    pipeline_seconds = time.perf_counter() - started

    texts = [
        pipeline.embedding_text(c.document.title, c.heading, c.text)
        for c in Chunk.objects.for_tenant(tenant).select_related("document").order_by("pk")
    ]
    started = time.perf_counter()
    embedder.embed(texts)
    raw_seconds = time.perf_counter() - started

    end_to_end = chunks / pipeline_seconds
    raw = len(texts) / raw_seconds
    print(f"end-to-end: {chunks} chunks in {pipeline_seconds:.1f} s = {end_to_end:.1f} chunks/s")
    print(f"raw embedder: {len(texts)} chunks in {raw_seconds:.1f} s = {raw:.1f} chunks/s")
    print(f"ratio end-to-end / raw embedder: {end_to_end / raw:.2f} (target >= 0.85)")


if __name__ == "__main__":
    main()
