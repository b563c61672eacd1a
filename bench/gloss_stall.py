"""Does a hostile Spanish question stall the gloss for others? (issue 61, case 5)

    python bench/gloss_stall.py              # in this checkout
    (cd OTHER_CHECKOUT && python /work/main/bench/gloss_stall.py)   # the same measure of another commit

One thread asks a question that broke Apertium (ending in `^`) six times in a row, another tenant asks ten ordinary
Spanish questions at the same time (each a new text, so none comes from the cache). Prints the seconds each hostile
call took and the p50 / max of the ordinary questions' glosses while the hostile ones ran, then alone. The figures
are wall-clock on this machine: compare two checkouts in the same window.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))
os.environ.setdefault("RAG_DEBUG", "true")
os.environ.setdefault("RAG_DATA_DIR", "/tmp/ragsite-gloss-bench")
os.environ["DJANGO_SETTINGS_MODULE"] = "ragsite.settings"

import django  # noqa: E402

django.setup()

from inference import translation  # noqa: E402

HOSTILE = "¿Cuál es la dieta diaria para viajes dentro de España?^"
ORDINARY = [f"¿Cuántos días de vacaciones tengo en el año {2000 + n}?" for n in range(20)]


def timed(text: str, scope: str) -> float:
    started = time.perf_counter()
    translation.gloss(text, "es", scope=scope)
    return time.perf_counter() - started


def main() -> None:
    timed("¿Dónde está la impresora?", "warm")  # the process started and its dictionaries loaded
    hostile: list[float] = []
    others: list[float] = []

    def attacker() -> None:
        for n in range(6):
            hostile.append(timed(HOSTILE + " " * n, "attacker"))  # a new text each time: no cache

    thread = threading.Thread(target=attacker)
    thread.start()
    time.sleep(0.05)
    for text in ORDINARY[:10]:
        others.append(timed(text, "victim"))
        time.sleep(0.1)
    thread.join()
    alone = [timed(text, "victim") for text in ORDINARY[10:]]
    print(f"hostile calls, s each: {' '.join(f'{t:.3f}' for t in hostile)}")
    print(f"other tenant during:   p50 {statistics.median(others) * 1000:.1f} ms, max {max(others) * 1000:.1f} ms")
    print(f"other tenant alone:    p50 {statistics.median(alone) * 1000:.1f} ms, max {max(alone) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
