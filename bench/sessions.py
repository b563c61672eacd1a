"""Agent sessions (issue 53): what a session saves a scripted agent, whether stale memory is reported, what it costs.

    RAG_MODELS_DIR=… python bench/sessions.py agent CORPORA_DIR [--top-k 5] [--session-top-k 5[,K2,…]]
    RAG_MODELS_DIR=… python bench/sessions.py stale CORPORA_DIR
    RAG_MODELS_DIR=… BENCH_DATA_DIR=D python bench/sessions.py transcript CORPORA_DIR   (after `agent` in D)
    RAG_MODELS_DIR=… python bench/sessions.py cost [CHUNKS]          (default 20000)

agent: the tasks of bench/data/sessions/tasks.jsonl (written before sessions were built; alternate tune and held-out)
  over the public corpora (flask-docs, click-code ingested as two folder sources of one tenant through the real
  pipeline). Each task's questions are asked in order by a scripted agent, `top_k` hits each, once without a
  session (every retrieve from zero) and once in a session (`knowledge.reads.session_retrieve`, what every door
  calls), asking `--session-top-k` new hits each (an agent that is told what it holds may ask for fewer; `5,3`:
  5 for the first question of a task, 3 for each follow-up). Printed
  per task and per split: chunks delivered twice, tokens delivered until every relevant document the stateless
  agent reaches has been seen (and the ratio session ÷ stateless), tokens over the whole task, and the relevant
  documents reached.
stale: a session is given chunks of eight documents; then one is edited, one superseded, one expired, one retired,
  one restricted to a group the key is not in, and three are left alone. Printed: what the next `changes` call
  reports, whether each change is reported once and nothing else is, and whether the restricted text reaches any
  later read of the session.
cost: CHUNKS chunks in 100-chunk documents (bench/_corpus.py: real texts and BM25 vectors, both dense vectors mixed
  from 2,000 real ones: the default configuration's index), and two sessions holding 1,000 of them each: spread over
  every document (the worst case: each read checks them all) and of 10 documents (a task's). Stateless and session
  retrieves of new questions interleaved (p50, p95; the sessions' ledgers grow as they read), then each session's
  ledger and changes reads.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

TASKS = Path(__file__).resolve().parent / "data" / "sessions" / "tasks.jsonl"
CORPORA = ("flask-docs", "click-code")


def _tenant(slug: str):  # type: ignore[no-untyped-def]
    from tenants.models import Tenant
    from tenants.services import tenant_create

    return Tenant.objects.filter(slug=slug).first() or tenant_create(slug=slug, name=slug.title())


def agent(corpora: Path, top_k: int, session_top_k: list[int]) -> None:
    from agent_sessions import reads
    from agent_sessions import services as sessions
    from core.tokens import estimate_tokens
    from knowledge.index import indexer
    from knowledge.ingest import pipeline
    from knowledge.models import Document
    from knowledge.search.retrieval import RetrieveFilters
    from tenants.principals import viewer_for
    from tenants.services import api_key_issue

    tenant = _tenant("sessions")
    if not Document.objects.filter(tenant=tenant).exists():
        for corpus in CORPORA:
            source = pipeline.folder_source_get_or_create(tenant=tenant, name=corpus, path=corpora / corpus)
            job = pipeline.sync_folder(source=source, root=corpora / corpus)
            print(f"{corpus}: {job.state}, {job.chunks_total} chunks")
        indexer.drain()
    key = api_key_issue(tenant=tenant, name="agent", scope="read")[0]
    viewer = viewer_for(tenant=tenant, api_key=key)
    tasks = [json.loads(line) for line in TASKS.open()]
    reads.session_retrieve(viewer=viewer, session=None, query="warm up", top_k=1, filters=RetrieveFilters())
    rows = []
    for task in tasks:
        relevant = set(task["relevant_docs"])
        runs = {}
        for mode in ("stateless", "session"):
            session = (
                sessions.session_create(tenant=tenant, api_key=key, purpose=task["title"])
                if mode == "session"
                else None
                if mode == "session"
                else None
            )
            seen_chunks: set[str] = set()
            twice = tokens = 0
            reached: dict[str, int] = {}  # relevant document → tokens delivered when it was first seen
            for number, question in enumerate(task["questions"]):
                asked = session_top_k[min(number, len(session_top_k) - 1)] if session is not None else top_k
                read = reads.session_retrieve(viewer=viewer, session=session, query=question, top_k=asked,
                                               filters=RetrieveFilters())  # fmt: skip
                for hit in read.hits:
                    chunk = hit.chunk
                    tokens += estimate_tokens(chunk.text)
                    twice += chunk.chunk_id in seen_chunks
                    seen_chunks.add(chunk.chunk_id)
                    key_ = chunk.document.document_key
                    if key_ in relevant and key_ not in reached:
                        reached[key_] = tokens
            runs[mode] = {"twice": twice, "tokens": tokens, "reached": reached}
        target = set(runs["stateless"]["reached"])  # the relevant documents the stateless agent reaches

        def until(run: dict, target: set[str] = target) -> int:  # type: ignore[type-arg]
            if not target:
                return run["tokens"]
            if not target <= set(run["reached"]):
                return run["tokens"]  # never saw them all: the whole task's tokens
            return max(run["reached"][d] for d in target)

        row = {
            "task": task["id"], "split": task["split"], "relevant": len(relevant),
            "twice": (runs["stateless"]["twice"], runs["session"]["twice"]),
            "until": (until(runs["stateless"]), until(runs["session"])),
            "total": (runs["stateless"]["tokens"], runs["session"]["tokens"]),
            "reached": (len(runs["stateless"]["reached"]), len(runs["session"]["reached"])),
            "covered": target <= set(runs["session"]["reached"]),
        }  # fmt: skip
        rows.append(row)
        print(f"{row['task']} {row['split']:8} relevant {row['relevant']}  reached {row['reached'][0]} → "
              f"{row['reached'][1]}  twice {row['twice'][0]:2} → {row['twice'][1]}  tokens until all seen "
              f"{row['until'][0]:5} → {row['until'][1]:5} ({row['until'][1] / max(1, row['until'][0]):.2f})  whole "
              f"task {row['total'][0]:5} → {row['total'][1]:5}  | {task['title']}")  # fmt: skip
    for split in ("tune", "held_out", None):
        chosen = [r for r in rows if split is None or r["split"] == split]
        until = [sum(r["until"][i] for r in chosen) for i in (0, 1)]
        total = [sum(r["total"][i] for r in chosen) for i in (0, 1)]
        reached = [sum(r["reached"][i] for r in chosen) for i in (0, 1)]
        twice = [sum(r["twice"][i] for r in chosen) for i in (0, 1)]
        print(f"{split or 'all':8} tasks {len(chosen)}  chunks delivered twice {twice[0]} → {twice[1]}  tokens until "
              f"every relevant document seen {until[0]} → {until[1]} (ratio {until[1] / until[0]:.2f}; median per "
              f"task {statistics.median(r['until'][1] / max(1, r['until'][0]) for r in chosen):.2f})  whole tasks "
              f"{total[0]} → {total[1]} ({total[1] / total[0]:.2f})  relevant documents reached {reached[0]} → "
              f"{reached[1]} of {sum(r['relevant'] for r in chosen)}")  # fmt: skip


def transcript(corpora: Path) -> None:
    """The worked transcript of docs/sessions.md: a support case through the REST door, printed call by call."""
    from django.test import Client

    from knowledge.models import Document
    from tenants.services import api_key_issue

    tenant = _tenant("sessions")
    if not Document.objects.filter(tenant=tenant).exists():
        raise SystemExit("run `agent` first with the same BENCH_DATA_DIR: it ingests the corpora")
    raw = api_key_issue(tenant=tenant, name="transcript", scope="read")[1]
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {raw}", HTTP_HOST="localhost")
    base = f"/api/v1/tenants/{tenant.slug}/"

    def post(path: str, body: dict) -> dict:  # type: ignore[type-arg]
        response = client.post(base + path, json.dumps(body), content_type="application/json")
        print(f"POST {path} {json.dumps(body)[:150]}\n→ {response.status_code}")
        return response.json()

    def short(chunk_id: str) -> str:
        return f"{chunk_id.split(':', 5)[-1].rsplit(':', 2)[0]}#{chunk_id.rsplit(':', 1)[1]}"

    session = post("sessions/", {"purpose": "case 4411: customer behind nginx sees http URLs", "ttl": 8})["id"]
    pack = post("bootstrap/", {"session": session, "intent": "deploying behind nginx", "max_tokens": 600,
                               "scope": {"source_ids": ["src:sessions:folder:flask-docs"]}})  # fmt: skip
    print(f"  items {len(pack['items'])}, tokens {pack['tokens']}, left_out {len(pack['left_out'])}")
    for question in ("How do I deploy a Flask app behind nginx?",
                     "Generated URLs use http instead of https behind the proxy; why?",
                     "How many proxies should ProxyFix trust?"):  # fmt: skip
        read = post("retrieve/", {"session": session, "query": question, "top_k": 3})
        print(f"  hits {[short(h['chunk_id']) for h in read['hits']]}, already "
              f"{[(short(a['chunk_id']), a['rank']) for a in read['already_delivered']]}, tokens {read['tokens']}, "
              f"memory_changes {read['memory_changes']}")  # fmt: skip
    ledger = client.get(base + f"sessions/{session}/").json()
    print(f"GET sessions/{session}/ → {ledger['calls']} calls, {ledger['deliveries_total']} deliveries, "
          f"{ledger['tokens_delivered']} tokens")  # fmt: skip


def stale(corpora: Path) -> None:
    import datetime as dt

    from agent_sessions import changes, reads
    from agent_sessions import services as sessions
    from knowledge import services
    from knowledge.index import indexer
    from knowledge.ingest import pipeline
    from knowledge.models import Document
    from knowledge.search.retrieval import RetrieveFilters
    from tenants.principals import viewer_for
    from tenants.services import api_key_issue, group_create

    files = ["config.rst", "web-security.rst", "testing.rst", "cli.rst", "templating.rst", "signals.rst",
             "server.rst", "appcontext.rst"]  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="stale-")) / "docs"
    root.mkdir()
    for name in files:
        shutil.copy(corpora / "flask-docs" / "flask" / name, root / name)
    tenant = _tenant("stale")
    source = pipeline.folder_source_get_or_create(tenant=tenant, name="docs", path=root)
    pipeline.sync_folder(source=source, root=root)
    group_create(tenant=tenant, name="board")
    indexer.drain()
    key = api_key_issue(tenant=tenant, name="agent", scope="read")[0]
    viewer = viewer_for(tenant=tenant, api_key=key)
    session = sessions.session_create(tenant=tenant, api_key=key)
    documents = {d.document_key: d for d in Document.objects.filter(source=source)}
    for name in files:  # the agent is given chunks of every document
        title = documents[name].title or name
        reads.session_retrieve(viewer=viewer, session=session, query=f"{title} {name}", top_k=2,
                                filters=RetrieveFilters(source_ids=[source.source_id]))  # fmt: skip
    held = reads.ledger(session, viewer)["deliveries"]
    given = {d["document_id"] for d in held}
    print(f"given: {len(held)} chunks of {len(given)} documents")
    before = changes.changes_page(session, viewer)["changes"]

    edited, superseded, expired, retired, restricted = files[:5]
    text = (root / edited).read_text()
    (root / edited).write_text(text.replace("the", "THE", 3))  # an edit in the opening text
    (root / "security-2027.md").write_text(f"---\nsupersedes: {superseded}\n---\n# Security, 2027\n\n"
                                          "The 2027 security guide replaces the old one.\n")  # fmt: skip
    pipeline.sync_folder(source=source, root=root)
    yesterday = dt.date.today() - dt.timedelta(days=1)
    services.document_set_validity(tenant=tenant, document=documents[expired], changes={"valid_until": yesterday},
                                   actor="bench")  # fmt: skip
    services.documents_retire(tenant=tenant, documents=Document.objects.filter(pk=documents[retired].pk))
    services.document_set_access(tenant=tenant, document=documents[restricted], access=["group:board"])
    indexer.drain()
    expected = {"changed": edited, "superseded": superseded, "expired": expired, "retired": retired,
                "no_longer_available": restricted}  # fmt: skip
    page = changes.changes_page(session, viewer)
    reported = page["changes"]
    again = changes.changes_page(session, viewer)["changes"]
    print(f"before any change: {len(before)} reported")
    for change in reported:
        print("  ", json.dumps(change)[:220])
    right = 0
    for kind, name in expected.items():
        found = [c for c in reported if c["kind"] == kind]
        if kind == "no_longer_available":
            chunk_ids = {d["chunk_id"] for d in held if d["document_id"] == documents[name].document_id}
            ok = len(found) == 1 and set(found[0]["chunk_ids"]) == chunk_ids and "document_id" not in found[0]
        else:
            ok = len(found) == 1 and found[0]["document_id"] == documents[name].document_id
        right += ok
        print(f"{kind:20} {name:18} {'reported once' if ok else 'NOT RIGHT'}")
    untouched = [n for n in files if n not in expected.values()]
    false = [c for c in reported if c.get("document_id") in {documents[n].document_id for n in untouched}]
    print(f"changes reported {len(reported)} (expected {len(expected)}), right {right} of {len(expected)}, about "
          f"untouched documents {len(false)}, reported again at the next call {len(again)}")  # fmt: skip
    secret = {c.text for c in documents[restricted].chunks.all()}
    later = [reads.session_retrieve(viewer=viewer, session=session, query=q, top_k=8, filters=RetrieveFilters())
             for q in ("command line interface click commands", documents[restricted].title or restricted)]  # fmt: skip
    leaked = sum(1 for read in later for hit in read.hits if hit.chunk.text in secret)
    shown = json.dumps(reported) + json.dumps(reads.ledger(session, viewer), default=str)
    print(f"restricted text in later reads: {leaked} chunks; its title in changes or ledger: "
          f"{bool(documents[restricted].title) and documents[restricted].title in shown}")  # fmt: skip


def cost(chunks: int) -> None:
    import numpy as np
    from _corpus import QUERIES, line, load, text_pool

    from agent_sessions import changes, reads
    from agent_sessions import services as session_services
    from knowledge import services
    from knowledge.models import Chunk, Document
    from knowledge.search.retrieval import RetrieveFilters
    from tenants.principals import viewer_for
    from tenants.services import api_key_issue

    tenant = _tenant("cost")
    if Chunk.objects.filter(tenant=tenant).count() < chunks:  # BENCH_DATA_DIR keeps it between runs
        source = services.source_create(tenant=tenant, kind="folder", name="corpus")
        started = time.perf_counter()
        load(source=source, count=chunks, pool=text_pool(), rng=np.random.default_rng(7))
        print(f"loaded {chunks} chunks in {time.perf_counter() - started:.1f} s")
    key, raw = api_key_issue(tenant=tenant, name="agent", scope="read")
    viewer = viewer_for(tenant=tenant, api_key=key)
    every = Chunk.objects.filter(tenant=tenant).select_related("document", "document_version").defer("dense", "sparse")
    few = list(Document.objects.filter(tenant=tenant).order_by("?").values_list("pk", flat=True)[:10])
    sessions = {}
    for name, held in (
        ("spread", list(every.order_by("?")[:1000])),  # 1,000 chunks of every document
        ("focused", list(every.filter(document__in=few).order_by("?")[:1000])),
    ):  # of 10 documents
        session = session_services.session_create(tenant=tenant, api_key=key)
        started = time.perf_counter()
        session_services.record_call(session, [session_services.Given(c, c.text) for c in held], via="retrieve", call=1)
        documents = len({c.document_id for c in held})
        print(f"{name}: a ledger of {len(held)} chunks of {documents} documents recorded in "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")  # fmt: skip
        sessions[name] = session
    related = " ".join(QUERIES).split()  # an agent's questions: the same few topics again and again
    sample = every.order_by("?").values_list("text", flat=True)[:300]
    diverse = sorted({w for text in sample for w in re.findall(r"[A-Za-z]{5,}", text)})  # new topics each time
    rng = np.random.default_rng(3)
    for vocabulary, words in (("related questions", related), ("new topics", diverse)):
        times: dict[str, list[float]] = {"stateless": [], **{name: [] for name in sessions}}
        for n in range(150):  # new questions each time (no cached embedding), the kinds interleaved in turn
            query = " ".join(rng.choice(words, 6)) + f" {n}"
            kinds = list(times)
            for kind in kinds[n % 3 :] + kinds[: n % 3]:
                started = time.perf_counter()
                reads.session_retrieve(viewer=viewer, session=sessions.get(kind), query=query, top_k=8,
                                        filters=RetrieveFilters())  # fmt: skip
                times[kind].append((time.perf_counter() - started) * 1000)
        plain = times["stateless"][10:]  # the first ones warm the caches
        print(f"-- {vocabulary}, retrieve() in-process")
        print(line(f"stateless (top_k 8, {chunks} chunks)", plain))
        for name, session in sessions.items():
            session.refresh_from_db()
            print(line(f"in a session, {name} ({session.calls} calls, ledger {session.deliveries.count()})",
                       times[name][10:], plain, against="stateless"))  # fmt: skip
    rest(tenant, sessions, raw, diverse, rng)
    for name, session in sessions.items():
        ledger_ms, changes_ms = [], []
        for _ in range(20):
            started = time.perf_counter()
            page = reads.ledger(session, viewer)
            ledger_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            changes.changes_page(session, viewer)
            changes_ms.append((time.perf_counter() - started) * 1000)
        print(line(f"{name}: ledger read ({page['deliveries_total']} deliveries, first 1000)", ledger_ms))
        print(line(f"{name}: changes read (nothing changed)", changes_ms))


def rest(tenant, sessions: dict, raw: str, words: list[str], rng) -> None:  # type: ignore[no-untyped-def, type-arg]
    """The same through the REST door (Django's test client in this process: routing, the key, DRF, the JSON)."""
    from _corpus import line
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Api-Key {raw}", HTTP_HOST="localhost")
    url = f"/api/v1/tenants/{tenant.slug}/retrieve/"
    times: dict[str, list[float]] = {"stateless": [], **{name: [] for name in sessions}}
    for n in range(150):
        query = " ".join(rng.choice(words, 6)) + f" r{n}"
        kinds = list(times)
        for kind in kinds[n % 3 :] + kinds[: n % 3]:
            body = {"query": query, "top_k": 8, **({"session": str(sessions[kind].public_id)} if kind in sessions
                                                   else {})}  # fmt: skip
            started = time.perf_counter()
            response = client.post(url, json.dumps(body), content_type="application/json")
            times[kind].append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.content[:200]
    plain = times["stateless"][10:]
    print("-- new topics, POST retrieve/ (the REST door, in-process)")
    print(line("stateless", plain))
    for name in sessions:
        print(line(f"in a session, {name}", times[name][10:], plain, against="stateless"))


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    from _django import setup

    setup()
    if mode == "agent":
        top_k = int(sys.argv[sys.argv.index("--top-k") + 1]) if "--top-k" in sys.argv else 5
        given = sys.argv[sys.argv.index("--session-top-k") + 1] if "--session-top-k" in sys.argv else str(top_k)
        agent(Path(sys.argv[2]), top_k, [int(k) for k in given.split(",")])
    elif mode == "stale":
        stale(Path(sys.argv[2]))
    elif mode == "transcript":
        transcript(Path(sys.argv[2]))
    elif mode == "cost":
        cost(int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
