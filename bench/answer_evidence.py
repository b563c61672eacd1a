"""What reaches the model, per variant of the answer path, without asking the model anything.

    RAG_DATA_DIR=/tmp/evaldata python bench/answer_evidence.py TENANT [questions.jsonl] [--variants ...]

For each question of an evaluation set already ingested into TENANT (answer_eval.py's set by default) it runs
the answer path's evidence steps — retrieve, choose the excerpts, focus them — and reports, by half (odd ids are
the tuning half, even ids are held out):
  in hits      the expected phrase is in one of the hits' chunks (the ceiling for everything after)
  in excerpts  … in one of the chunks sent on to focusing
  in focused   … in the focused text the model reads (what an answer can at best be built from)
  strength     the cross-encoder's best logit over the focused sentences, for answerable and unanswerable
               questions: where a weak-evidence refusal threshold can stand
and the time the steps take (p50 / p95 ms), so a variant's gain can be weighed against its cost.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from tenants.principals import Viewer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAG_DEBUG", "true")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")

VARIANTS = {
    # name: (rerank the hits with the cross-encoder, focus with the cross-encoder)
    "hybrid": (False, False),
    "hybrid+cefocus": (False, True),
    "rerank+cefocus": (True, True),
}


def phrase_check(questions_path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("answer_eval", questions_path.parent / "answer_eval.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.contains_phrase


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tenant")
    parser.add_argument("questions", nargs="?", default=str(ROOT.parent / "shared/eval/questions.jsonl"))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--out", help="per question JSONL")
    args = parser.parse_args()
    import django

    django.setup()
    from chat.excerpts import AnswerSettings, prepare
    from tenants.models import Tenant

    questions_path = Path(args.questions)
    contains = phrase_check(questions_path)
    questions = [json.loads(line) for line in questions_path.read_text().splitlines() if line.strip()]
    tenant = Tenant.objects.get(slug=args.tenant)
    out = open(args.out, "w") if args.out else None  # noqa: SIM115
    for name in args.variants.split(","):
        rerank, cross = VARIANTS[name]
        rows = []
        viewer = Viewer.everything(tenant)
        prepare(viewer=viewer, question="warm up", options=AnswerSettings(top_k=args.top_k), rerank=rerank,
                cross_focus=cross)  # fmt: skip
        for q in questions:
            started = time.perf_counter()
            sources = prepare(viewer=viewer, question=q["question"], options=AnswerSettings(top_k=args.top_k),
                              rerank=rerank, cross_focus=cross)  # fmt: skip
            ms = (time.perf_counter() - started) * 1000
            phrase = q["answer"] if q["answerable"] else ""
            row = {
                "id": q["id"], "variant": name, "answerable": q["answerable"], "ms": round(ms),
                "in_hits": bool(phrase) and any(contains(h.chunk.text, phrase) for h in sources.hits),
                "in_excerpts": bool(phrase) and any(contains(h.chunk.text, phrase) for h in sources.excerpts),
                "in_focused": bool(phrase) and any(contains(f.text, phrase) for f in sources.focused),
                "strength": sources.strength, "missing": sources.missing,
            }  # fmt: skip
            rows.append(row)
            if out:
                out.write(json.dumps(row) + "\n")
        report(name, rows)
    if out:
        out.close()


def report(name: str, rows: list[dict]) -> None:
    print(f"\n## {name}  (time p50 / p95: {statistics.median(r['ms'] for r in rows):.0f} / "
          f"{percentile([r['ms'] for r in rows], 95):.0f} ms)")  # fmt: skip
    print("| half | n ans | in hits | in excerpts | in focused | strength ans p10/p50 | strength unans p50/p90 |")
    print("|---|---|---|---|---|---|---|")
    for half, parity in (("tuning (odd)", 1), ("held out (even)", 0), ("all", None)):
        part = [r for r in rows if parity is None or int(re.sub(r"\D", "", r["id"])) % 2 == parity]
        ans = [r for r in part if r["answerable"]]
        unans = [r for r in part if not r["answerable"]]
        share = lambda key, ans=ans: f"{sum(r[key] for r in ans) / len(ans):.3f}"  # noqa: E731
        strong = lambda rs: [r["strength"] for r in rs if r["strength"] is not None]  # noqa: E731
        fmt = lambda values, p: f"{percentile(values, p):.2f}" if values else "-"  # noqa: E731
        print(f"| {half} | {len(ans)} | {share('in_hits')} | {share('in_excerpts')} | {share('in_focused')} | "
              f"{fmt(strong(ans), 10)} / {fmt(strong(ans), 50)} | "
              f"{fmt(strong(unans), 50)} / {fmt(strong(unans), 90)} |")  # fmt: skip


if __name__ == "__main__":
    main()
