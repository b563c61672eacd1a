"""Issue 67's measures: the insights page's time on an empty tenant and on one with 100,000 answers, and the content
gaps found on a scripted month.

    python bench/insights.py [page|gaps|all]

`page`: ANSWERS answer records (a month, four doors, five groups, a fifth refused, each answered one citing one of
200 documents) written straight to SQL, then the page requested as an admin (Django's test client, the whole view
and template), five times each on the empty tenant and the full one: median seconds.

`gaps`: a month of MONTH questions from several groups — the answerable ones (the public eval set's, the company
questions', asked again and again as people do) and a tenth unanswerable on purpose, about ten planted topics no
document covers, each asked in many words (English and Spanish). Which questions were refused is not decided by
running 3,000 answers through the model here (hours on two cores): every planted question is refused, and the
answerable ones at the false-refusal rate measured on the public set (FALSE_REFUSALS), the same ones each time they
are asked (a refusal is deterministic). The real embedder and the real grouping then make the gaps. Topics 0-4 tune
the thresholds (RAG_GAP_JOIN, RAG_GAP_LINK; the grid is printed), topics 5-9 are held out: each is found when one gap
holds most of its questions and few others. A gap that is no planted topic is counted apart.

`gaps --real`: which questions are refused is decided by the product. The three public corpora (BENCH_CORPORA, from
../shared/eval/get_corpus.sh) and the three companies' documents are ingested as six sources of one tenant, and
every distinct question of the month is answered once through the answer every door gives (chat.recipe, the
packaged chat model in its own process); the month's askings of it take that outcome and its hits (asked again, the
same retrieval and the same greedy model give the same refusal). Outcomes are kept in BENCH_OUTCOMES (a JSON file)
so a cut run goes on where it stopped. A planted question the product answered instead of refusing is an answer no
document supports: counted as answered wrong, and missing from the gaps."""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _django import setup

ANSWERS = int(os.environ.get("BENCH_ANSWERS", 100_000))
MONTH = int(os.environ.get("BENCH_MONTH", 3000))
FALSE_REFUSALS = float(os.environ.get("BENCH_FALSE_REFUSALS", 0.08))
ROOT = Path(__file__).resolve().parent.parent

TOPICS = [  # ten things no document of the corpora says, each asked in ten ways (the last two in Spanish)
    [
        "Where can employees park their cars?",
        "Is there a car park for staff at the office?",
        "Can I leave my car in the company garage?",
        "How do I get a parking spot at headquarters?",
        "Do we have free parking at work?",
        "Who assigns the parking places?",
        "Is parking at the office paid?",
        "Where should visitors park?",
        "¿Dónde pueden aparcar los empleados?",
        "¿Hay parking para el personal?",
    ],
    [
        "Does the health insurance cover the dentist?",
        "Is dental care part of our medical plan?",
        "Who pays for dental treatment?",
        "Are orthodontics covered by the company insurance?",
        "Can I claim a dentist bill?",
        "What dental coverage do we have?",
        "Is a teeth cleaning reimbursed?",
        "Does insurance pay for my dental check-up?",
        "¿El seguro cubre el dentista?",
        "¿Qué cobertura dental tenemos?",
    ],
    [
        "What is the wifi password for guests?",
        "How do visitors connect to the wireless network?",
        "Which wifi network should guests use?",
        "Where do I find the guest wifi key?",
        "Is there wifi for visitors?",
        "What is the password of the lobby wifi?",
        "How can a client get internet access in the meeting room?",
        "Who gives out the guest network password?",
        "¿Cuál es la contraseña del wifi de invitados?",
        "¿Cómo se conectan las visitas a la red wifi?",
    ],
    [
        "When is the summer party this year?",
        "What date is the company summer event?",
        "Where will the summer celebration be held?",
        "Can I bring my family to the summer party?",
        "Is there a summer barbecue for staff?",
        "Who organises the summer party?",
        "Do we have a team event in July?",
        "What time does the summer party start?",
        "¿Cuándo es la fiesta de verano?",
        "¿Dónde se celebra la fiesta de verano de la empresa?",
    ],
    [
        "How do I book a meeting room?",
        "Which tool reserves conference rooms?",
        "Can I reserve the big meeting room?",
        "Where do I see if a meeting room is free?",
        "How far ahead can I book a room?",
        "Who manages the meeting room calendar?",
        "Is there a limit on room bookings?",
        "How do I cancel a room reservation?",
        "¿Cómo reservo una sala de reuniones?",
        "¿Dónde veo si una sala está libre?",
    ],
    [
        "Can I bring my dog to the office?",
        "Are pets allowed at work?",
        "Is the office dog friendly?",
        "What is the rule on animals in the building?",
        "May I come in with my cat?",
        "Do we allow dogs on Fridays?",
        "Is there a pet policy?",
        "Can a guide dog come into the office?",
        "¿Puedo traer a mi perro a la oficina?",
        "¿Se permiten mascotas en el trabajo?",
    ],
    [
        "How do I get a new laptop?",
        "Who replaces a broken laptop?",
        "When am I due a new computer?",
        "How do I order a second monitor?",
        "Can I choose a Mac instead of a PC?",
        "Where do I request new hardware?",
        "How long does a laptop replacement take?",
        "Who approves equipment requests?",
        "¿Cómo pido un portátil nuevo?",
        "¿Quién repone un ordenador roto?",
    ],
    [
        "Is there a gym discount for employees?",
        "Do we get a subsidised fitness membership?",
        "Which gyms have a company deal?",
        "Does the company pay for sports clubs?",
        "How do I join the gym programme?",
        "Is yoga paid by the company?",
        "Are there sports benefits?",
        "Can I get a discount at the swimming pool?",
        "¿Hay descuento en el gimnasio para empleados?",
        "¿La empresa paga el gimnasio?",
    ],
    [
        "How do I change my bank account for the salary?",
        "Where do I update my IBAN for payroll?",
        "Who do I tell about a new bank account?",
        "Can I split my salary into two accounts?",
        "How long does a payroll bank change take?",
        "Which form changes the salary account?",
        "When does a new bank account apply to my pay?",
        "Where is the payroll bank form?",
        "¿Cómo cambio la cuenta bancaria de la nómina?",
        "¿Dónde actualizo mi IBAN para el sueldo?",
    ],
    [
        "Is there a shuttle bus from the station?",
        "How do I get from the train station to the office?",
        "Does the company run a bus for staff?",
        "What time does the staff shuttle leave?",
        "Where does the office shuttle stop?",
        "Is there transport from the metro to headquarters?",
        "Can visitors take the shuttle?",
        "Is the shuttle free?",
        "¿Hay autobús lanzadera desde la estación?",
        "¿A qué hora sale el autobús de la empresa?",
    ],
]
FRAMES = ["{q}", "Hi, {q}", "Quick question: {q}"]
GROUPS = ["sales", "support", "engineering", "finance", "hr"]


def page() -> None:
    from django.test import Client
    from django.utils import timezone

    from chat.models import AnswerGround, AnswerRecord
    from knowledge.models import Document, Source
    from tenants.models import Membership, Tenant
    from tenants.services import group_create, membership_add

    def tenant_with(slug: str):  # type: ignore[no-untyped-def]
        from django.contrib.auth import get_user_model

        tenant = Tenant.objects.create(slug=slug, name=slug)
        admin, _ = get_user_model().objects.get_or_create(username=f"admin-{slug}")
        membership_add(tenant=tenant, user=admin, role=Membership.Role.ADMIN)
        for name in GROUPS:
            group_create(tenant=tenant, name=name)
        return tenant, admin

    empty, empty_admin = tenant_with("empty")
    full, full_admin = tenant_with("full")
    source = Source.objects.create(tenant=full, kind="upload", name="docs", label="docs", source_id="full:upload:docs")
    documents = Document.objects.bulk_create(
        Document(
            tenant=full,
            source=source,
            document_key=f"doc-{n}.md",
            document_id=f"full:upload:docs/doc-{n}.md",
            title=f"Document {n}",
            version=1,
            valid_until=timezone.localdate().replace(year=2025) if n % 40 == 0 else None,
        )
        for n in range(200)
    )
    started = time.perf_counter()
    rng = random.Random(7)
    now = timezone.now()
    doors, statuses = ["chat", "api", "mcp", "openai"], ["answered"] * 7 + ["partial", "not_found", "no_evidence"]
    for start in range(0, ANSWERS, 5000):
        rows = []
        for n in range(start, min(start + 5000, ANSWERS)):
            rows.append(
                AnswerRecord(
                    tenant=full,
                    channel=rng.choice(doors),
                    question=f"question {n}",
                    answer="…",
                    status=rng.choice(statuses),
                    total_ms=rng.lognormvariate(7, 0.5),
                    groups=f" {rng.choice(GROUPS)} ",
                    top_source=source.source_id,
                )
            )
        made = AnswerRecord.objects.bulk_create(rows)
        AnswerRecord.objects.filter(pk__in=[r.pk for r in made]).update(created_at=now)
        grounds = [
            AnswerGround(tenant=full, answer=r, document=rng.choice(documents), version=1)
            for r in made
            if r.status in ("answered", "partial")
        ]
        AnswerGround.objects.bulk_create(grounds)
    for n, pk in enumerate(AnswerRecord.objects.filter(tenant=full).values_list("pk", flat=True)):
        if n % 1000 == 0:  # spread over 30 days (one update per 1,000 answers, a day each)
            AnswerRecord.objects.filter(tenant=full, pk__gte=pk, pk__lt=pk + 1000).update(
                created_at=now - __import__("datetime").timedelta(days=(n // 1000) % 30)
            )
    print(f"wrote {ANSWERS:,} answers in {time.perf_counter() - started:.0f} s")
    for tenant, admin in ((empty, empty_admin), (full, full_admin)):
        client = Client(HTTP_HOST="localhost")
        client.force_login(admin)
        seconds = []
        for _ in range(5):
            began = time.perf_counter()
            response = client.get(f"/t/{tenant.slug}/insights/")
            seconds.append(time.perf_counter() - began)
            assert response.status_code == 200, response.status_code
        other = {}
        views = (("one group", "?group=sales"), ("by assistant", "?by=assistant"), ("by group", "?by=group"))
        for label, query in views:
            times = []
            for _ in range(3):
                began = time.perf_counter()
                assert client.get(f"/t/{tenant.slug}/insights/{query}").status_code == 200
                times.append(time.perf_counter() - began)
            other[label] = statistics.median(times)
        count = AnswerRecord.objects.filter(tenant=tenant).count()
        print(
            f"insights page, {count:>7,} answers: {statistics.median(seconds):.3f} s median of 5 "
            f"(max {max(seconds):.3f} s); " + ", ".join(f"{k}: {v:.3f} s" for k, v in other.items()) + " (median of 3)"
        )


def _questions() -> tuple[list[str], list[tuple[str, int]]]:
    answerable = []
    for path in (
        Path("/work/shared/eval/questions.jsonl"),
        ROOT / "bench/data/company-questions.jsonl",
        ROOT / "bench/data/company-fresh-questions.jsonl",
        ROOT / "bench/data/company-unseen-questions.jsonl",
    ):
        if path.exists():
            for line in path.read_text().splitlines():
                row = json.loads(line)
                if row.get("answerable", True) and row.get("question"):
                    answerable.append(row["question"])
    planted = [(frame.format(q=q), topic) for topic, asked in enumerate(TOPICS) for q in asked for frame in FRAMES]
    return answerable, planted


def _real_outcomes(questions: list[str]) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The tenant with the six corpora, and each distinct question's real outcome: {question: {status, hits}}."""
    import subprocess
    import tempfile

    from company import start_model

    from chat import recipe
    from chat.models import AnswerRecord
    from insights.models import Gap, GapQuestion
    from knowledge.ingest import pipeline
    from tenants.models import Tenant
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    corpora = Path(os.environ.get("BENCH_CORPORA", "/srv/bench"))
    tenant = Tenant.objects.filter(slug="month").first()
    if tenant is not None:  # a kept data directory (BENCH_DATA_DIR): its corpora are there, the month is made again
        GapQuestion.objects.filter(tenant=tenant).delete()
        Gap.objects.filter(tenant=tenant).delete()
        AnswerRecord.objects.filter(tenant=tenant).delete()
        print("the six sources kept in BENCH_DATA_DIR", flush=True)
    fresh = tenant is None
    tenant = tenant or tenant_create(slug="month", name="month")
    began = time.perf_counter()
    for name in (
        [] if not fresh else ("flask-docs", "click-code", "es-docs", "company", "company-fresh", "company-unseen")
    ):
        where = corpora / name if name.endswith("-docs") or name == "click-code" else ROOT / "bench/data" / name
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        subprocess.run(["cp", "-r", f"{where}/.", str(folder)], check=True)
        source = pipeline.folder_source_get_or_create(tenant=tenant, name=name, path=folder)
        job = pipeline.sync_folder(source=source, root=folder)
        print(f"  ingested {name}: {job.state}, {job.chunks_total} chunks", flush=True)
    if fresh:
        print(f"six sources ingested in {time.perf_counter() - began:.0f} s", flush=True)
    kept = Path(os.environ.get("BENCH_OUTCOMES", ROOT / "var" / "bench-month-outcomes.json"))
    outcomes = json.loads(kept.read_text()) if kept.exists() else {}
    viewer = Viewer.everything(tenant)
    todo = [q for q in dict.fromkeys(questions) if q not in outcomes]
    if todo:
        server = start_model()
        try:
            began = time.perf_counter()
            for n, question in enumerate(todo, 1):
                asked = time.perf_counter()
                answering = recipe.Answering(viewer=viewer, asked=recipe.Asked(question=question), channel="chat")
                result, record = answering.json()  # kept as every door keeps it: its hits as the gaps read them
                total = time.perf_counter() - asked
                outcomes[question] = {"status": result.status, "hits": record.hits, "seconds": round(total, 2)}
                record.delete()  # the month's askings are written below, each with this outcome
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(json.dumps(outcomes))
                if n % 20 == 0:
                    spent = time.perf_counter() - began
                    print(f"  answered {n}/{len(todo)} in {spent:.0f} s", flush=True)
        finally:
            server.terminate()
            server.wait(60)
    return tenant, outcomes


def gaps() -> None:
    import numpy as np
    from django.conf import settings

    from chat.models import AnswerRecord
    from insights import gaps as engine
    from insights.models import Gap, GapQuestion
    from tenants.models import Tenant

    real = "--real" in sys.argv
    answerable, planted = _questions()
    rng = random.Random(11)
    month = [(q, None) for q in rng.choices(answerable, k=MONTH - len(planted))] + planted
    rng.shuffle(month)
    outcomes: dict[str, dict[str, Any]] = {}
    if real:
        tenant, outcomes = _real_outcomes([q for q, _ in month])
        refused = [(q, topic) for q, topic in month if outcomes[q]["status"] in engine.REFUSED]
        distinct_answerable = sorted({q for q, topic in month if topic is None})
        refused_answerable = {q for q in distinct_answerable if outcomes[q]["status"] in engine.REFUSED}
        planted_answered = [q for q, topic in planted if outcomes[q]["status"] not in engine.REFUSED]
        seconds = sorted(o["seconds"] for o in outcomes.values())
        print(
            f"real outcomes of {len(outcomes)} distinct questions (answer p50 {statistics.median(seconds):.1f} s): "
            f"planted refused {len(planted) - len(planted_answered)}/{len(planted)}, answered instead (answered "
            f"wrong: no document says it) {len(planted_answered)}; answerable refused {len(refused_answerable)}/"
            f"{len(distinct_answerable)} distinct"
        )
        for q in planted_answered:
            print(f"    planted, answered {outcomes[q]['status']}: {q!r}")
    else:
        refused_answerable = set(rng.sample(sorted(set(answerable)), k=round(FALSE_REFUSALS * len(set(answerable)))))
        refused = [(q, topic) for q, topic in month if topic is not None or q in refused_answerable]
        tenant = Tenant.objects.create(slug="month", name="month")
    print(
        f"a month: {len(month):,} questions ({len(planted)} about {len(TOPICS)} planted topics, "
        f"{len(set(answerable))} answerable asked again and again); refused: {len(refused)}, of which "
        f"{sum(1 for _, t in refused if t is None)} answerable ({len(refused_answerable)} questions refused each "
        "time asked)"
    )
    topic_of: dict[int, int | None] = {}
    for n, (question, topic) in enumerate(refused):
        record = AnswerRecord.objects.create(
            tenant=tenant,
            channel="chat",
            question=question,
            answer="…",
            status=outcomes[question]["status"] if real else "not_found",
            hits=outcomes[question]["hits"] if real else [],
            groups=f" {GROUPS[n % len(GROUPS)]} ",
        )
        topic_of[record.pk] = topic

    def score(topics: range) -> tuple[int, int, list[str]]:
        found, notes = 0, []
        gaps_ = list(Gap.objects.filter(tenant=tenant))
        members = {g.pk: [topic_of[q.answer_id] for q in g.questions.all()] for g in gaps_}
        for topic in topics:
            total = sum(1 for t in topic_of.values() if t == topic)
            best = max(members.values(), key=lambda m: m.count(topic), default=[])
            share, purity = best.count(topic) / total, (best.count(topic) / len(best) if best else 0)
            if share >= 0.5 and purity >= 0.8:
                found += 1
            notes.append(f"topic {topic}: {share:.0%} of its questions in one gap ({purity:.0%} of that gap)")
        other = sum(1 for m in members.values() if max(set(m), key=m.count) is None)
        return found, other, notes

    def _pieces(topics: range) -> int:
        """How many gaps hold questions of these topics (a topic split in three counts three)."""
        rows = GapQuestion.objects.filter(tenant=tenant, gap__isnull=False).values_list("gap_id", "answer_id")
        return len({gap for gap, answer in rows if topic_of[answer] in topics})

    started = time.perf_counter()
    grid = []
    for join in (0.5, 0.55, 0.6, 0.65, 0.7):
        for link in (0.4, 0.45, 0.5, 0.55, 0.6):
            Gap.objects.filter(tenant=tenant).delete()
            GapQuestion.objects.filter(tenant=tenant).delete()
            settings.RAG_GAP_JOIN, settings.RAG_GAP_LINK = join, link
            for chunk in np.array_split(np.array(sorted(topic_of)), 4):  # four refreshes over the month
                engine.refresh(tenant, only=[int(pk) for pk in chunk])
            tuned, other, _ = score(range(0, 5))
            held, _other, _ = score(range(5, 10))
            pieces = _pieces(range(0, 5))
            grid.append((tuned, -pieces, -other, join, link, held))
            print(
                f"  join {join:.2f} link {link:.2f}: tuning topics found {tuned}/5 in {pieces} gaps, held-out "
                f"{held}/5, other gaps {other}, gaps {Gap.objects.filter(tenant=tenant).count()}"
            )
    tuned, _pieces_, _other, join, link, held = max(grid)  # most tuning topics found, then the fewest pieces
    print(
        f"chosen on topics 0-4 alone (most found, then the fewest gaps they are split into): join {join}, link {link} "
        f"({tuned}/5 found there); held-out topics 5-9: "
        f"{held}/5 found  [{time.perf_counter() - started:.0f} s for the grid]"
    )
    Gap.objects.filter(tenant=tenant).delete()
    GapQuestion.objects.filter(tenant=tenant).delete()
    settings.RAG_GAP_JOIN, settings.RAG_GAP_LINK = join, link
    began = time.perf_counter()
    for chunk in np.array_split(np.array(sorted(topic_of)), 4):
        engine.refresh(tenant, only=[int(pk) for pk in chunk])
    found, other, notes = score(range(10))
    print(
        f"with them: {found}/10 planted topics found, {other} other gaps (answerable questions refused again and "
        f"again), {Gap.objects.filter(tenant=tenant).count()} gaps in all; "
        f"four refreshes {time.perf_counter() - began:.1f} s"
    )
    for note in notes:
        print("  " + note)
    if real:  # what each gap's owner is shown: a draft of existing sentences, or "no source says this"
        drafted = {True: [0, 0], False: [0, 0]}  # planted or not → [with a draft, "no source says this"]
        for gap in Gap.objects.filter(tenant=tenant):
            topics = [topic_of[q.answer_id] for q in gap.questions.all()]
            planted_gap = max(set(topics), key=topics.count) is not None
            drafted[planted_gap][0 if gap.draft.get("sentences") else 1] += 1
            if gap.draft.get("sentences") and planted_gap:
                first = gap.draft["sentences"][0]
                said = f"{first['document_key']}: {first['text'][:90]!r}"
                print(f"    planted gap {gap.representative!r} drafted from {said}")
        print(
            f"drafts (NEAR {engine.NEAR}): planted gaps {drafted[True][0]} with a draft, {drafted[True][1]} 'no source "
            f"says this'; other gaps {drafted[False][0]} with a draft, {drafted[False][1]} without"
        )


if __name__ == "__main__":
    setup()
    wanted = sys.argv[1] if len(sys.argv) > 1 else "all"
    if wanted in ("page", "all"):
        page()
    if wanted in ("gaps", "all"):
        gaps()
