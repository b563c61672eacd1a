"""How the conversation's earlier questions condition a follow-up (chat.excerpts.in_context), on the public set.

    python bench/follow_ups.py CORPORA_DIR [QUESTIONS] [CORPUS ...]   (default corpora: flask-docs click-code)

For every answerable question Q of those corpora (its relevant documents R):
- follow-up: Q asked first, then a reference to it ("And which document says so?", rotating through a few
  phrasings). A hit when the follow-up is read with Q and an excerpt the model reads is from R. Compared with the
  follow-up alone (no history) and with Q alone (the ceiling).
- new topic: the question before Q is one of another corpus; a hit when Q is answered as asked (not joined) and an
  excerpt is from R, as it would be without history.
Retrieval, focus and the cross-encoder only (no chat model): what the model would be given. Reported for the
tuning half (odd question numbers) and the held-out half (even), as bench/eval_halves.py splits the set, each with
its own follow-up phrasings (the held-out ones written after the rule). Also: how many of all public questions (each
stands alone) the rule would take for a follow-up.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from _django import setup

# Follow-ups for the tuning half (odd question numbers) and, written apart, for the held-out half (even).
FOLLOW_UPS = {
    False: ["And which document says so?", "Where is that written?", "Can you show me the source for that?",
            "Which page says this?"],
    True: ["Is that documented anywhere?", "And where can I read more about it?", "Why is it like that?",
           "What about the default?", "Can you quote it?"],
}  # fmt: skip


def main() -> None:
    setup()
    from django.core.management import call_command

    from chat import excerpts
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    corpora_dir = Path(sys.argv[1])
    default = Path(__file__).resolve().parents[2] / "shared/eval/questions.jsonl"
    questions_path = Path(sys.argv[2]) if len(sys.argv) > 2 else default
    corpora = sys.argv[3:] or ["flask-docs", "click-code"]
    tenant = tenant_create(slug="bench")
    started = time.perf_counter()
    for corpus in corpora:
        call_command("ingest", "bench", str(corpora_dir / corpus), "--source", corpus, verbosity=0)
    print(f"ingested {', '.join(corpora)} in {time.perf_counter() - started:.0f} s")
    questions = [q for q in map(json.loads, questions_path.read_text().splitlines())
                 if q.get("answerable") and q["corpus"] in corpora]  # fmt: skip
    viewer, options = Viewer.everything(tenant), excerpts.AnswerSettings()

    def relevant(sources: excerpts.Sources, question: dict) -> bool:  # type: ignore[type-arg]
        keys = {hit.chunk.document.document_key for hit in sources.excerpts}
        return any(key.endswith(doc) or doc.endswith(key) for key in keys for doc in question["relevant_docs"])

    rows = []
    everything = [q for q in map(json.loads, questions_path.read_text().splitlines()) if q]
    joined_wrongly = [q["id"] for q in everything if excerpts.follows_up(q["question"])]
    print(f"public questions (all {len(everything)}, 3 corpora, 2 languages) taken for follow-ups: "
          f"{len(joined_wrongly)} {joined_wrongly}")  # fmt: skip
    for i, question in enumerate(questions):
        phrasings = FOLLOW_UPS[int(question["id"][1:]) % 2 == 0]
        follow_up = phrasings[i % len(phrasings)]
        alone = excerpts.prepare(viewer=viewer, question=question["question"], options=options)
        bare = excerpts.prepare(viewer=viewer, question=follow_up, options=options)
        asked, joined = excerpts.in_context(viewer=viewer, question=follow_up, earlier=[question["question"]],
                                            options=options, budget_chars=None)  # fmt: skip
        other = next(q for q in questions[i + 1 :] + questions if q["corpus"] != question["corpus"])
        kept, switched = excerpts.in_context(
            viewer=viewer, question=question["question"], earlier=[other["question"]], options=options,
            budget_chars=None,
        )  # fmt: skip
        rows.append({
            "id": question["id"], "held_out": int(question["id"][1:]) % 2 == 0,
            "ceiling": relevant(alone, question), "bare": relevant(bare, question),
            "joined": asked != follow_up, "follow_up": asked != follow_up and relevant(joined, question),
            "stands_alone": kept == question["question"],
            "new_topic": kept == question["question"] and relevant(switched, question),
        })  # fmt: skip
    print(
        "| half | n | Q alone: R in excerpts | follow-up alone: R in excerpts | follow-up read with Q "
        "| follow-up read with Q and R in excerpts | new topic answered as asked "
        "| answered as asked and R in excerpts |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, half in (("tuning (odd)", False), ("held out (even)", True), ("all", None)):
        part = [r for r in rows if half is None or r["held_out"] == half]
        n = len(part) or 1

        def share(key: str, part: list = part, n: int = n) -> str:  # type: ignore[type-arg]
            return f"{sum(r[key] for r in part) / n:.3f}"

        print(f"| {name} | {len(part)} | {share('ceiling')} | {share('bare')} | {share('joined')} | "
              f"{share('follow_up')} | {share('stands_alone')} | {share('new_topic')} |")  # fmt: skip
    misses = [r["id"] for r in rows if not r["follow_up"] or not r["new_topic"]]
    print("misses:", ", ".join(misses) or "none")


if __name__ == "__main__":
    main()
