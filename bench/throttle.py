"""What a shared throttle costs a request: the per-key rate check and a wrong-key count.

    python bench/throttle.py [REQUESTS]   (default 5000)

Before, each web process counted alone, in memory, with DRF's SimpleRateThrottle (a list of every request's time
per key, read and written back on each request). Now the counters are shared by the web processes
(tenants/counters.py: one UPSERT in a small SQLite file on the embedded default), so RAG_WEB_WORKERS=N counts
against one limit. Measured in one process, RAG_API_RATE 600/min (the default): the rate check per request, both
ways, plus Django's file cache doing DRF's check (the shared store first tried, for the record). The figure that
matters is what a request pays more, against a retrieve's HTTP p50 (bench/retrieve.py: about 10 ms).
"""

from __future__ import annotations

import statistics
import sys
import time

from _django import setup


def _timed(check, requests: int) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        check()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    data = setup()
    from django.core.cache.backends.filebased import FileBasedCache
    from django.core.cache.backends.locmem import LocMemCache
    from django.test import RequestFactory
    from rest_framework.request import Request
    from rest_framework.throttling import SimpleRateThrottle

    from tenants import counters
    from tenants.models import ApiKey, Tenant
    from tenants.throttling import ApiKeyRateThrottle, window_count

    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    tenant = Tenant.objects.create(slug="bench", name="Bench")
    key = ApiKey(tenant=tenant, name="bench", prefix="rag_bench", key_hash="x" * 64, pk=1)
    request = Request(RequestFactory().get("/api/v1/tenants/bench/", REMOTE_ADDR="192.0.2.1"))
    request.auth = key  # type: ignore[misc]
    clock = {"now": time.time()}

    class Drf(SimpleRateThrottle):  # DRF's own, as shipped before: a steady 10 requests/s, so 600 in the list
        scope, THROTTLE_RATES, timer = "api_key", {"api_key": "600/min"}, lambda self: clock["now"]

        def get_cache_key(self, request, view):  # type: ignore[no-untyped-def]
            return "throttle_api_key_key-1"

    def drf(cache) -> None:  # type: ignore[no-untyped-def]
        Drf.cache = cache
        clock["now"] += 0.1
        Drf().allow_request(request, None)  # type: ignore[arg-type]

    ApiKeyRateThrottle.THROTTLE_RATES = {"api_key": f"{requests * 10}/min"}
    memory, files = LocMemCache("bench", {}), FileBasedCache(str(data / "filecache"), {})
    rows = {
        "before: DRF, per-process memory": _timed(lambda: drf(memory), requests),
        "DRF on Django's file cache": _timed(lambda: drf(files), requests),
        "now: shared counter (SQLite)": _timed(lambda: ApiKeyRateThrottle().allow_request(request, None), requests),
    }
    counters.reset()
    rows["now: a wrong-key count"] = _timed(lambda: window_count("bench:guess:192.0.2.9", 600), requests)
    for label, times in rows.items():
        print(f"{label:34s} p50 {statistics.median(times) * 1e3:.3f} ms   p95 "
              f"{sorted(times)[int(len(times) * 0.95)] * 1e3:.3f} ms")  # fmt: skip
    added = statistics.median(rows["now: shared counter (SQLite)"]) - statistics.median(
        rows["before: DRF, per-process memory"])  # fmt: skip
    print(f"a request pays {added * 1e3:+.3f} ms for a shared limit = {added / 0.010:+.1%} of a 10 ms retrieve p50")


if __name__ == "__main__":
    main()
