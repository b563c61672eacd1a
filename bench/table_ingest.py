"""What keeping a workbook's tables as tables costs its ingest (issue 51: within 1.3× of ingesting it without).

    python bench/table_ingest.py [ROWS]   (default 10000)

A ledger of ROWS rows and six columns (order, date, region, product, quantity, amount) is written as one .xlsx and
ingested through the real pipeline (extraction, chunking, the packaged embedder, SQL, the embedded store) into a
fresh data directory, three times; the median wall time is printed with the rows kept as a table. Run it on two
checkouts (this one and one before DocumentTable) and compare the medians.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _django import setup


def main() -> None:
    setup()
    import openpyxl

    from knowledge.ingest import pipeline
    from tenants.services import tenant_create

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    rng = random.Random(3)
    folder = Path(tempfile.mkdtemp(prefix="ledger-"))
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Ledger"
    sheet.append(["Order", "Date", "Region", "Product", "Quantity", "Amount"])
    for n in range(rows):
        sheet.append([f"O-{n:05d}", f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                      rng.choice(["North", "South", "East", "West"]), f"Product {rng.randint(1, 300)}",
                      rng.randint(1, 40), round(rng.uniform(5, 900), 2)])  # fmt: skip
    book.save(folder / "ledger.xlsx")
    times = []
    for run in range(3):
        tenant = tenant_create(slug=f"bench{run}", name=f"Bench {run}")
        source = pipeline.folder_source_get_or_create(tenant=tenant, name="ledger", path=folder)
        started = time.perf_counter()
        job = pipeline.sync_folder(source=source, root=folder)
        times.append(time.perf_counter() - started)
        print(f"run {run + 1}: {times[-1]:.1f} s, {job.chunks_total} chunks ({job.state})")
    try:
        from knowledge.models import DocumentTable

        kept = DocumentTable.objects.filter(document__tenant__slug="bench0").first()
        print(f"kept as a table: {kept.row_count if kept else 0} rows")
    except ImportError:
        print("kept as a table: (this checkout keeps no tables)")
    print(f"median {statistics.median(times):.1f} s for {rows} rows")


if __name__ == "__main__":
    main()
