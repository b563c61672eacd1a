"""Issue 66's measures: recall on a scripted history, a receipt's cost on an answer, and replay.

    python bench/receipts.py

A company's documents (DOCS policies in one folder source, RESTRICTED more in a second) each state four values in
four sentences and one sentence no answer cites. ANSWERS answers are given by 10 members, each citing one sentence
through the real retriever and the real claim verifier (the model is left out: recall does not depend on the words
the model chose, only on the evidence sentence each claim was verified against). Then, one step at a time, with a
real worker (`manage.py qcluster`, started here on the same data directory) doing what production does:

- `changed`: in some documents the value of the sentence one answer cites changes (the other answers citing other
  sentences of those documents must stay unflagged);
- `elsewhere`: in others, only the sentence no answer cites changes (nothing may be flagged);
- `superseded`, `expired` (a past valid_until), `retired` (the file removed), `restricted` (the second source's
  access given to a group no asker is in): every answer citing those documents is flagged with that state;
- `expired overnight`: documents whose validity ends today are flagged by the first scan after midnight (run here
  with tomorrow's date: the worker runs it every minute).

For each step: the answers that had to be flagged, those flagged (with the right state), those flagged that had
not to be, and the time from the change's commit to each flag (p50, max). Then a receipt's cost: the time to keep an
answer's record with its receipt data (p50 of ANSWERS) and a receipt's size; and the replay of REPLAY receipts."""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _django import setup

DOCS = int(os.environ.get("BENCH_DOCS", 60))
RESTRICTED = int(os.environ.get("BENCH_RESTRICTED_DOCS", 10))
ANSWERS = int(os.environ.get("BENCH_ANSWERS", 200))
REPLAY = int(os.environ.get("BENCH_REPLAY", 1000))
THINGS = ("per diem", "hotel limit", "mileage rate", "meal allowance")


def _text(
    n: int, values: list[int], *, note: str = "Questions about it go to the policy owner.", front: str = ""
) -> str:
    lines = [f"The {thing} of policy {n} is {value} EUR." for thing, value in zip(THINGS, values, strict=True)]
    head = f"---\n{front}---\n" if front else ""
    return f"{head}# Policy {n}\n\n" + " ".join(lines) + f"\n\n{note}\n"


def _values(n: int) -> list[int]:
    return [10 + n, 100 + n, 20 + n, 30 + n]


def main() -> None:
    data = setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from chat import recall, receipts
    from chat.citations import citation_of
    from chat.models import AnswerRecord
    from chat.records import answer_record
    from chat.services import Answer
    from knowledge import services
    from knowledge.claims import EvidenceText, Verifier
    from knowledge.ingest import pipeline
    from knowledge.models import Source
    from knowledge.search.retrieval import retrieve
    from tenants.models import Tenant
    from tenants.principals import Viewer, viewer_for
    from tenants.services import group_create, membership_add

    tenant = Tenant.objects.create(slug="company", name="Company")
    members = []
    for n in range(10):
        user, _ = get_user_model().objects.get_or_create(username=f"staff{n}")
        members.append(membership_add(tenant=tenant, user=user))
    roots = {name: data / "kb" / name for name in ("policies", "restricted")}
    sources = {}
    today = timezone.localdate()
    for name, count, start in (("policies", DOCS, 0), ("restricted", RESTRICTED, DOCS)):
        roots[name].mkdir(parents=True, exist_ok=True)
        for n in range(start, start + count):
            front = f"valid_until: {today.isoformat()}\n" if n % 12 == 11 else ""  # ends today: expires overnight
            (roots[name] / f"policy-{n}.md").write_text(_text(n, _values(n), front=front))
        sources[name] = services.source_create_for(
            tenant=tenant, kind=Source.Kind.FOLDER, name=name, location=str(roots[name]), operator=True
        )
        pipeline.sync_folder(source=sources[name], root=roots[name])
    every = Viewer.everything(tenant)

    # --- 200 answers, each citing one sentence ------------------------------------------------------------------
    cited: dict[int, tuple[int, int]] = {}  # answer pk → (document n, sentence index)
    keep_ms: list[float] = []
    for a in range(ANSWERS):
        n, s = a % (DOCS + RESTRICTED), (a // (DOCS + RESTRICTED)) % 4  # every document, its sentences in turn
        sentence = f"The {THINGS[s]} of policy {n} is {_values(n)[s]} EUR."
        hits = [
            h
            for h in retrieve(viewer=every, query=sentence, top_k=8)
            if h.chunk.document.document_key == f"policy-{n}.md"
        ][:1]
        if not hits:
            print(f"answer {a}: policy-{n}.md not retrieved for {sentence!r}", file=sys.stderr)
            continue
        claims = Verifier([EvidenceText(text=hits[0].chunk.text, units=[])]).check(sentence + " [1]")
        result = Answer(
            answer=sentence + " [1]",
            generated=True,
            model="bench",
            status="answered",
            citations=[citation_of(1, hits[0])],
            hits=hits,
            claims=[c.as_dict() for c in claims],
        )
        member = members[a % len(members)]
        started = time.perf_counter()
        record = answer_record(
            viewer=viewer_for(tenant=tenant, membership=member),
            question=f"What is the {THINGS[s]} of policy {n}?",
            result=result,
            channel="chat",
            user=member.user,
        )
        keep_ms.append((time.perf_counter() - started) * 1000)
        cited[record.pk] = (n, s)
    print(f"{len(cited)} answers over {DOCS + RESTRICTED} documents from {len(members)} members")

    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(3)
    try:
        plan = _plan()
        flagged_before: set[int] = set()
        for step, (documents, state) in plan.items():
            expected = {pk for pk, (n, s) in cited.items() if n in documents and (state != "changed" or s == 0)}
            if state == "unchanged":
                expected = set()
            began = time.time()
            committed = _apply(step, documents, roots, sources, tenant, group_create, services, pipeline)
            seconds = _wait_for(expected, began, committed)
            flagged = set(AnswerRecord.objects.filter(recalled_at__isnull=False).values_list("pk", flat=True))
            new = flagged - flagged_before
            right = {pk for pk in new & expected if AnswerRecord.objects.get(pk=pk).recall_state == state}
            wrong = new - expected
            flagged_before = flagged
            delays = sorted(seconds.values())
            timing = f"{statistics.median(delays):5.1f} s p50, {max(delays):5.1f} s max" if delays else "—"
            assert all(d > -0.5 for d in delays), delays  # a flag never precedes its change
            print(
                f"{step:<18} to flag {len(expected):3}  flagged right {len(right):3}  flagged wrong {len(wrong):3}"
                f"  change → flag {timing}"
            )
        expected = {pk for pk, (n, _s) in cited.items() if n % 12 == 11 and n not in _touched(plan)}
        scanned = recall.scan(now=timezone.now() + dt.timedelta(days=1, minutes=1))
        flagged = set(AnswerRecord.objects.filter(recalled_at__isnull=False).values_list("pk", flat=True))
        new = flagged - flagged_before
        right = {pk for pk in new & expected if AnswerRecord.objects.get(pk=pk).recall_state == "expired"}
        print(
            f"{'expired overnight':<18} to flag {len(expected):3}  flagged right {len(right):3}  flagged wrong "
            f"{len(new - expected):3}  (the first scan after midnight: {scanned.checked} answers checked)"
        )
        hidden = AnswerRecord.objects.filter(recall_state="no_longer_available")
        leaks = [
            r.pk
            for r in hidden
            if set(json.dumps(recall.notice(r)).split()) & {"EUR", "policy"}
            or any(set(c) != {"index", "now"} for c in r.recall.get("claims", []))
        ]
        print(f"restricted: {hidden.count()} askers told only 'no longer available'; notices saying more: {len(leaks)}")
    finally:
        worker.terminate()
        worker.wait(timeout=30)

    # --- a receipt's cost and size, and replay --------------------------------------------------------------------
    sizes = [
        len(json.dumps(receipts.receipt(r, Viewer.everything(tenant)), default=str))
        for r in AnswerRecord.objects.all()[:ANSWERS]
    ]
    print(
        f"keeping an answer with its receipt data: p50 {statistics.median(keep_ms):.2f} ms, "
        f"p95 {sorted(keep_ms)[int(len(keep_ms) * 0.95)]:.2f} ms; a receipt: p50 {statistics.median(sizes):,.0f} "
        f"bytes of JSON"
    )
    records = list(AnswerRecord.objects.select_related("user", "api_key", "tenant", "agent_session"))
    while len(records) < REPLAY:
        records += records
    records = records[:REPLAY]
    started = time.perf_counter()
    for record in records:
        receipts.receipt(record, Viewer.everything(tenant))
    seconds = time.perf_counter() - started
    print(
        f"replay of {REPLAY:,} receipts (then and now for every claim): {seconds:.1f} s, "
        f"{seconds / REPLAY * 1000:.1f} ms each"
    )


def _plan() -> dict[str, tuple[set[int], str]]:
    """Which documents each step changes, and the state their answers must be flagged with (each document at most
    once; the documents that expire overnight, n % 12 == 11, are left alone)."""
    free = [n for n in range(DOCS) if n % 12 != 11]
    return {
        "changed": (set(free[0:15]), "changed"),
        "elsewhere": (set(free[15:30]), "unchanged"),
        "superseded": (set(free[30:35]), "superseded"),
        "expired": (set(free[35:40]), "expired"),
        "retired": (set(free[40:45]), "retired"),
        "restricted": (set(range(DOCS, DOCS + RESTRICTED)), "no_longer_available"),
    }


def _touched(plan: dict[str, tuple[set[int], str]]) -> set[int]:
    return {n for documents, _state in plan.values() for n in documents}


def _apply(step, documents, roots, sources, tenant, group_create, services, pipeline) -> float:  # type: ignore[no-untyped-def]
    """Make the step's change and commit it; the moment it committed (time.time())."""
    root = roots["policies"]
    for n in sorted(documents):
        path, values = root / f"policy-{n}.md", _values(n)
        if step == "changed":
            path.write_text(_text(n, [values[0] + 5, *values[1:]]))
        elif step == "elsewhere":
            path.write_text(_text(n, values, note="Questions about it go to the finance desk."))
        elif step == "superseded":
            (root / f"policy-{n}-2027.md").write_text(
                _text(n, [v + 1 for v in values], front=f"supersedes: policy-{n}.md\n")
            )
        elif step == "expired":
            path.write_text(_text(n, values, front="valid_until: 2026-01-31\n"))
        elif step == "retired":
            path.unlink()
    if step == "restricted":
        group_create(tenant=tenant, name="board")
        services.source_set_access(tenant=tenant, source=sources["restricted"], access=["group:board"])
    else:
        pipeline.sync_folder(source=sources["policies"], root=root)
    return time.time()


def _wait_for(expected: set[int], began: float, committed: float, timeout_s: float = 150) -> dict[int, float]:
    """Each expected answer's seconds from its document's change (the document's event, recorded as the change was
    written, or the commit of an access change, which records none) to its flag, polled every 0.2 s."""
    from django.db.models import Max

    from chat.models import AnswerGround, AnswerRecord
    from knowledge.models import DocumentEvent

    flagged: dict[int, float] = {}
    deadline = time.time() + timeout_s
    while time.time() < deadline and len(flagged) < len(expected):
        rows = AnswerRecord.objects.filter(pk__in=expected - set(flagged), recalled_at__isnull=False)
        flagged.update({pk: at.timestamp() for pk, at in rows.values_list("pk", "recalled_at")})
        time.sleep(0.2)
    if not expected:
        time.sleep(75)  # a step that must flag nothing: wait out one scan of the minute schedule, then count
    seconds = {}
    for pk, at in flagged.items():
        documents = AnswerGround.objects.filter(answer_id=pk).values_list("document_id", flat=True)
        began_at = dt.datetime.fromtimestamp(began, tz=dt.UTC)
        changed = DocumentEvent.objects.filter(document_id__in=documents, at__gte=began_at).aggregate(at=Max("at"))
        seconds[pk] = at - (changed["at"].timestamp() if changed["at"] else committed)
    return seconds


if __name__ == "__main__":
    main()
