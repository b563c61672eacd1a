"""Time a no-change re-sync of a folder with many files (target: <= 5 s for >= 5,000 files).

    python bench/resync.py [N_FILES]

Generates N small Markdown files (default 5,000) in nested folders, ingests them once (real
embedder), then times three re-syncs of the unchanged folder and reports the median, and checks
that nothing was embedded.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from _django import setup


def main() -> None:
    setup()
    from inference.embedders import get_embedder
    from knowledge.ingest import pipeline
    from tenants.services import tenant_create

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    root = Path(tempfile.mkdtemp(prefix="ragsite-resync-"))
    for n in range(count):
        folder = root / f"area{n % 50:02d}" / f"topic{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note{n:05d}.md").write_text(f"# Note {n}\n\nItem {n} belongs to area {n % 50}.\n")
    tenant = tenant_create(slug="bench")
    source = pipeline.folder_source_get_or_create(tenant=tenant, name="notes", path=root)
    started = time.perf_counter()
    first = pipeline.sync_folder(source=source, root=root)
    print(f"first sync: {first.added} documents, {first.chunks_done} chunks in {time.perf_counter() - started:.1f} s")

    embedder = get_embedder()
    calls = []
    original = embedder.embed
    embedder.embed = lambda texts: calls.append(len(texts)) or original(texts)  # type: ignore[method-assign]
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        job = pipeline.sync_folder(source=source, root=root)
        timings.append(time.perf_counter() - started)
        assert job.unchanged == count and job.chunks_done == 0, (job.unchanged, job.chunks_done)
    median = statistics.median(timings)
    print(f"no-change re-sync of {count} files: median {median:.2f} s (min {min(timings):.2f}, max {max(timings):.2f})")
    print(f"texts embedded during the re-syncs: {sum(calls)} (target: 0, and <= 5 s)")


if __name__ == "__main__":
    main()
