"""End-to-end ingestion throughput against the raw embedder(s) on the same chunks, in one run (with the multilingual
leg, the raw figure is both embedders, as the pipeline runs them: `embed_for_index`).

    python bench/ingest.py [--runs N] [--llamaindex-python PATH] [FOLDER ...]

Default corpus: the eval corpora fetched by ../shared/eval/get_corpus.sh into /srv/bench
(flask-docs, click-code and es-docs), else the installed Django package's source tree. Prints chunks/s
for the whole pipeline (walk, extract, chunk, embed, SQL, Qdrant Edge indexing) and for the
raw embedder alone on exactly the texts the pipeline embedded, both on every core (as `manage.py ingest`
and the workers run: RAG_EMBED_THREADS=0), and their ratio (target >= 0.85). It also prints the CPU time of
both: what the pipeline spends besides embedding (pypdf is pure Python) runs on the same cores, so
raw CPU / pipeline CPU is the best ratio this machine allows for that corpus. With `--runs N` the pair
(pipeline into a fresh tenant, then the raw embedder) is repeated and the median ratio printed: a shared
virtual machine's speed drifts by 10% and more between minutes, and each ratio is taken within its pair.
Then edits one paragraph of the longest prose document and prints how many chunks the new version
embedded (target <= 2; the others take their vectors from SQL).

With `--llamaindex-python` (a Python that has LlamaIndex, see bench/llamaindex_ingest.py), the same folders
are then ingested by LlamaIndex's default pipeline with the same MiniLM on the same machine, and both
wall times are printed side by side (target: ragsite no slower).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _django import setup


def main() -> None:
    setup()
    import os

    from inference.embedders import become_batch_process, embed_for_index, get_embedder
    from knowledge.ingest import pipeline, prepare
    from knowledge.models import Chunk
    from tenants.services import tenant_create

    args = sys.argv[1:]
    llamaindex, runs = "", 1
    while args[:1] in (["--llamaindex-python"], ["--runs"]):
        if args[0] == "--runs":
            runs = int(args[1])
        else:
            llamaindex = args[1]
        args = args[2:]
    folders = [Path(a) for a in args]
    if not folders:
        bench = [Path("/srv/bench/flask-docs"), Path("/srv/bench/click-code"), Path("/srv/bench/es-docs")]
        if all(p.is_dir() for p in bench):
            folders = bench
        else:
            import django

            folders = [Path(django.__file__).parent]
    become_batch_process()  # what manage.py ingest and the django-q workers do
    embedder = get_embedder()
    embedder.embed(["warm up the model"])
    ratios = []
    for run in range(1, runs + 1):  # each run: the pipeline into a fresh tenant, then the raw embedder
        tenant = tenant_create(slug=f"bench-{run}")
        print(f"-- run {run} of {runs}")
        started, cpu_started = time.perf_counter(), cpu_seconds()
        chunks = 0
        for folder in folders:
            source = pipeline.folder_source_get_or_create(tenant=tenant, name=folder.name, path=folder)
            job = pipeline.sync_folder(source=source, root=folder)
            chunks += job.chunks_done
            print(f"{folder}: {job.added} documents, {job.chunks_done} chunks, {job.skipped} skipped, "
                  f"{job.failed} failed")  # fmt: skip
        pipeline_seconds, pipeline_cpu = time.perf_counter() - started, cpu_seconds() - cpu_started

        stored = Chunk.objects.for_tenant(tenant).select_related("document", "document_version").order_by("pk")
        texts = [prepare.stored_embedding_text(c) for c in stored]  # the very inputs the pipeline embedded
        started, cpu_started = time.perf_counter(), cpu_seconds()
        embed_for_index(embedder, texts)  # both legs' vectors, as the pipeline stores them
        raw_seconds, raw_cpu = time.perf_counter() - started, cpu_seconds() - cpu_started

        end_to_end = chunks / pipeline_seconds
        raw = len(texts) / raw_seconds
        cores = os.cpu_count() or 1
        print(f"end-to-end: {chunks} chunks in {pipeline_seconds:.1f} s = {end_to_end:.1f} chunks/s; "
              f"CPU {pipeline_cpu:.1f} s, {pipeline_cpu / pipeline_seconds:.2f} of {cores} cores busy")  # fmt: skip
        print(f"raw embedder: {len(texts)} chunks in {raw_seconds:.1f} s = {raw:.1f} chunks/s; "
              f"CPU {raw_cpu:.1f} s, {raw_cpu / raw_seconds:.2f} of {cores} cores busy")  # fmt: skip
        print(
            f"CPU on everything but the embedder (extraction, chunking, SQL, indexing): "
            f"{pipeline_cpu - raw_cpu:.1f} s; the best ratio with that work on the same cores is "
            f"{raw_cpu / pipeline_cpu:.2f}"
        )
        ratios.append(end_to_end / raw)
        print(
            f"ratio end-to-end / raw embedder ({cores} cores, {getattr(embedder, 'threads', '?')} "
            f"embedder threads): {ratios[-1]:.2f} (target >= 0.85)"
        )
    if runs > 1:
        print(f"ratio over {runs} runs: median {statistics.median(ratios):.2f}, "
              f"{min(ratios):.2f}-{max(ratios):.2f} (target >= 0.85)")  # fmt: skip
    edit_one_paragraph(tenant, embedder)
    if llamaindex:
        side_by_side(llamaindex, folders, chunks, pipeline_seconds)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, all its threads."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def side_by_side(python: str, folders: list[Path], chunks: int, seconds: float) -> None:
    """LlamaIndex's default pipeline on the same folders, after ragsite's run (the machine is otherwise idle)."""
    import json
    import subprocess

    script = Path(__file__).with_name("llamaindex_ingest.py")
    result = subprocess.run([python, str(script), *map(str, folders)], capture_output=True, text=True, check=True)
    other = json.loads(result.stdout.strip().splitlines()[-1])
    print(
        f"LlamaIndex default pipeline: {other['documents']} documents, {other['nodes']} nodes in "
        f"{other['seconds']:.1f} s = {other['nodes'] / other['seconds']:.1f} nodes/s ({other['threads']} torch threads)"
    )
    print(
        f"first ingest, same folders: ragsite {seconds:.1f} s ({chunks} chunks) vs LlamaIndex {other['seconds']:.1f} s "
        f"({other['nodes']} nodes): ragsite takes {seconds / other['seconds']:.2f}x LlamaIndex's time (target <= 1)"
    )


def edit_one_paragraph(tenant, embedder) -> None:  # type: ignore[no-untyped-def]
    """A new version of the longest prose document with one paragraph changed: how many chunks are embedded."""
    from django.db.models import Count

    from inference.embedders import embed_for_index
    from knowledge.ingest import versions
    from knowledge.models import Document

    document = (
        Document.objects.for_tenant(tenant).filter(mode="documental", source_type__in=["markdown", "rst", "text"])
        .annotate(n=Count("chunks")).order_by("-n").first()
    )  # fmt: skip
    if document is None:
        print("one-paragraph edit: no prose document in the corpus")
        return
    text = Path(document.source_path).read_text()
    paragraphs = text.split("\n\n")
    middle = max(range(len(paragraphs)), key=lambda i: (len(paragraphs[i]) > 200, -abs(i - len(paragraphs) // 2)))
    paragraphs[middle] = paragraphs[middle].replace(" ", " really ", 1)

    class Counting:
        identity, embedded = embedder.identity, 0

        def embed(self, texts):  # type: ignore[no-untyped-def]
            return embedder.embed(texts)

        def embed_for_index(self, texts):  # type: ignore[no-untyped-def]
            Counting.embedded += len(texts)
            return embed_for_index(embedder, texts)

    outcome = versions.ingest_bytes(source=document.source, key=document.document_key,
                                    data="\n\n".join(paragraphs).encode(), embedder=Counting())  # fmt: skip
    print(
        f"one-paragraph edit of {document.display_key} ({outcome.chunks} chunks): {Counting.embedded} "
        f"chunk(s) embedded (target <= 2)"
    )


if __name__ == "__main__":
    main()
