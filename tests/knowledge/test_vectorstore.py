"""The same interface tests against both backends: Qdrant Edge and qdrant-client (":memory:")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from inference.embedders import EmbedderIdentity
from knowledge.index.lexical import document_vector, query_vector
from knowledge.index.vectorstore import ClientStore, EdgeStore, Scope, StoreBusy, StorePoint, point_id

IDENTITY = EmbedderIdentity("test", "unit-vectors", 8)


@pytest.fixture(params=["edge", "client"])
def store(request, tmp_path):  # type: ignore[no-untyped-def]
    backend = EdgeStore(tmp_path / "q") if request.param == "edge" else ClientStore(":memory:")
    yield backend
    backend.close()


def _unit(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).normal(size=8)
    return (vector / np.linalg.norm(vector)).tolist()


def _point(n: int, tenant: str, text: str, **payload: object) -> StorePoint:
    base = {
        "tenant": tenant,
        "status": "active",
        "document_id": f"doc{n}",
        "tags": [],
        "critical": 0,
        "mode": "documental",
    }
    return StorePoint(point_id(f"chk{n}", 1), _unit(n), document_vector(text), {**base, **payload})


@pytest.fixture
def loaded(store):  # type: ignore[no-untyped-def]
    store.upsert(
        IDENTITY,
        [
            _point(1, "A", "Send the X-Api-Key header to authenticate", tags=["api"]),
            _point(2, "A", "def get_current_object(self): return the proxied object", mode="code"),
            _point(3, "A", "Configuración de la instalación en Debian", critical=1),
            _point(4, "B", "X-Api-Key rotation policy for the payroll system"),
            _point(6, "A", "İstanbul'da ağ yapılandırması ve güvenlik duvarı"),
            _point(5, "A", "old text about api keys", status="superseded"),
        ],
    )
    return store


def _docs(hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.payload["document_id"] for h in hits]


def test_lexical_search_matches_identifiers_and_their_parts(loaded):
    for query in ("X-Api-Key", "api key", "get_current_object", "current object"):
        hits = loaded.search(IDENTITY, Scope(tenant="A"), dense=None, sparse=query_vector(query), limit=5)
        assert _docs(hits)[0] in {"doc1", "doc2"}, query


def test_lexical_search_folds_accents(loaded):
    hits = loaded.search(
        IDENTITY, Scope(tenant="A"), dense=None, sparse=query_vector("configuracion instalacion"), limit=5
    )
    assert _docs(hits) == ["doc3"]


def test_hybrid_search_fuses_both_legs_and_stays_in_the_tenant(loaded):
    hits = loaded.search(
        IDENTITY, Scope(tenant="A"), dense=_unit(4), sparse=query_vector("X-Api-Key rotation"), limit=10
    )
    assert "doc4" not in _docs(hits) and "doc1" in _docs(hits)
    assert all(h.payload["tenant"] == "A" for h in hits)
    b_hits = loaded.search(IDENTITY, Scope(tenant="B"), dense=_unit(1), sparse=query_vector("api key"), limit=10)
    assert _docs(b_hits) == ["doc4"]


def test_filters_by_status_mode_tags_and_critical(loaded):
    def ids(scope: Scope) -> set[str]:
        return {h.payload["document_id"] for h in loaded.search(IDENTITY, scope, dense=_unit(9), sparse=None, limit=10)}

    assert ids(Scope(tenant="A")) == {"doc1", "doc2", "doc3", "doc6"}
    assert ids(Scope(tenant="A", statuses=["active", "superseded"])) == {"doc1", "doc2", "doc3", "doc5", "doc6"}
    assert ids(Scope(tenant="A", mode="code")) == {"doc2"}
    assert ids(Scope(tenant="A", tags=["api"])) == {"doc1"}
    assert ids(Scope(tenant="A", critical_only=True)) == {"doc3"}
    assert ids(Scope(tenant="A", document_ids=[])) == set()


def test_payload_updates_delete_count_and_ids(loaded):
    loaded.set_payload(IDENTITY, Scope(tenant="A", document_ids=["doc1"]), {"critical": 1, "tags": ["faq"]})
    assert loaded.count(IDENTITY, Scope(tenant="A", critical_only=True)) == 2
    assert loaded.count(IDENTITY, Scope(tenant="A", tags=["faq"])) == 1
    # A payload update scoped to tenant B cannot touch tenant A's points.
    loaded.set_payload(IDENTITY, Scope(tenant="B", document_ids=["doc1"]), {"status": "retired"})
    assert loaded.count(IDENTITY, Scope(tenant="A", document_ids=["doc1"])) == 1
    loaded.delete(IDENTITY, Scope(tenant="A", statuses=None, document_ids=["doc1", "doc5"]))
    assert loaded.ids(IDENTITY, Scope(tenant="A", statuses=None)) == {
        point_id("chk2", 1),
        point_id("chk3", 1),
        point_id("chk6", 1),
    }
    assert loaded.count(IDENTITY, Scope(tenant="B")) == 1


def test_a_second_process_cannot_open_the_embedded_store_and_the_owner_keeps_working(tmp_path):
    owner = EdgeStore(tmp_path / "q")
    owner.upsert(IDENTITY, [_point(1, "A", "owner data")])
    script = textwrap.dedent(
        f"""
        import os, sys
        os.environ["DJANGO_SETTINGS_MODULE"] = "ragsite.test_settings"
        import django; django.setup()
        from knowledge.index.vectorstore import EdgeStore, StoreBusy
        from inference.embedders import EmbedderIdentity
        try:
            EdgeStore({str(tmp_path / "q")!r}).ensure_collection(EmbedderIdentity("test", "unit-vectors", 8))
        except StoreBusy as exc:
            print("busy:", exc)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "busy: The embedded vector store" in result.stdout, result.stderr
    owner.upsert(IDENTITY, [_point(2, "A", "more owner data")])
    owner.flush()  # a second opener that touched the shard would break this flush
    assert owner.count(IDENTITY, Scope(tenant="A")) == 2
    owner.close()
    reopened = EdgeStore(tmp_path / "q")
    assert reopened.count(IDENTITY, Scope(tenant="A")) == 2
    reopened.close()


def test_the_same_process_also_gets_store_busy_for_a_second_handle(tmp_path):
    first = EdgeStore(tmp_path / "q")
    first.ensure_collection(IDENTITY)
    with pytest.raises(StoreBusy):
        EdgeStore(tmp_path / "q").ensure_collection(IDENTITY)
    first.close()


@pytest.mark.parametrize("leg", ["search", "hybrid"])
def test_lexical_scores_use_this_tenants_statistics_only_on_both_backends(store, leg):  # type: ignore[no-untyped-def]
    """Issue 10 #5: another tenant filling the collection with a word must not change how this tenant ranks it
    (nor reveal, through the scores, that another tenant holds it)."""

    def top_score() -> tuple[str, float]:
        query = query_vector("invoice")
        if leg == "search":
            hits = store.search(IDENTITY, Scope(tenant="A"), dense=None, sparse=query, limit=3)
            return hits[0].payload["document_id"], hits[0].score
        legs = store.hybrid(IDENTITY, Scope(tenant="A"), dense=_unit(99), sparse=query, limit=3)
        only_lexical = store.search(IDENTITY, Scope(tenant="A"), dense=None, sparse=query, limit=3)
        assert legs.lexical[0] == only_lexical[0].id  # the hybrid call's lexical leg ranks the same way
        return only_lexical[0].payload["document_id"], only_lexical[0].score

    store.upsert(IDENTITY, [
        _point(1, "A", "Invoice numbering and the invoice archive"),
        *(_point(10 + n, "A", f"Unrelated travel policy paragraph {n}") for n in range(20)),
    ])  # fmt: skip
    before = top_score()
    store.upsert(IDENTITY, [_point(100 + n, "B", f"invoice {n} for customer {n}") for n in range(200)])
    after = top_score()
    assert before[0] == after[0] == "doc1"
    assert after[1] == pytest.approx(before[1], rel=1e-4)


def test_the_embedded_store_fuses_its_two_legs_exactly_as_the_engine_would(tmp_path):  # type: ignore[no-untyped-def]
    """The embedded store runs each leg once and fuses here; the engine's own RRF over the same legs gives the same
    points with the same scores (only the order among equal scores may differ)."""
    store = EdgeStore(tmp_path / "q")
    words = ["api", "key", "header", "token", "rotation", "policy", "proxy", "object", "install", "debian"]
    rng = np.random.default_rng(3)
    store.upsert(IDENTITY, [_point(n, "A", " ".join(rng.choice(words, 5))) for n in range(60)])
    query, dense, scope = query_vector("api key rotation"), _unit(99), Scope(tenant="A")
    here = store.hybrid(IDENTITY, scope, dense=dense, sparse=query, limit=20, prefetch=40)
    store.fuse_here = False
    engine = store.hybrid(IDENTITY, scope, dense=dense, sparse=query, limit=20, prefetch=40)
    store.close()
    assert len(here.fused) == 20 and here.dense == engine.dense and here.lexical == engine.lexical
    assert {h.id: round(h.score, 6) for h in here.fused} == {h.id: round(h.score, 6) for h in engine.fused}
    assert all(h.payload["tenant"] == "A" for h in here.fused)
    assert [h.score for h in here.fused] == sorted((h.score for h in here.fused), reverse=True)


def test_the_embedded_store_optimizes_what_was_written_only_in_a_quiet_moment(tmp_path):  # type: ignore[no-untyped-def]
    store = EdgeStore(tmp_path / "q")
    store.upsert(IDENTITY, [_point(n, "A", f"note {n} about api keys") for n in range(50)])
    scope, dense = Scope(tenant="A"), _unit(7)
    before = [h.id for h in store.search(IDENTITY, scope, dense=dense, sparse=None, limit=10)]
    assert store.optimize(quiet_for=3600) is False  # a search just came: not now
    assert store.optimize(quiet_for=0) is True
    assert store.optimize(quiet_for=0) is False  # nothing written since
    assert [h.id for h in store.search(IDENTITY, scope, dense=dense, sparse=None, limit=10)] == before
    store.close()
    reopened = EdgeStore(tmp_path / "q")  # written by an earlier process: looked at once
    assert reopened.count(IDENTITY, scope) == 50
    assert reopened.optimize(quiet_for=0) is True and reopened.optimize(quiet_for=0) is False
    reopened.close()


def test_searches_go_on_while_the_store_is_optimized_and_writes_made_meanwhile_land_after(tmp_path, monkeypatch):
    """Issue 50: a search that came while the owner optimized waited for the whole optimization (Qdrant Edge's
    optimize holds the interpreter: 4.8 s after 20,000 new points, bench/optimize_wait.py). It now runs on a copy in
    a child process; here the child waits for a signal, so the search provably ran during the optimization."""
    import threading

    from knowledge.index import vectorstore

    go = tmp_path / "go"
    waiting = ("import pathlib, sys, time\nwhile not pathlib.Path(sys.argv[2]).exists(): time.sleep(0.05)\n"
               + vectorstore.OPTIMIZE_CHILD.replace("; ", "\n"))  # fmt: skip
    real_run = vectorstore.subprocess.run
    monkeypatch.setattr(vectorstore.subprocess, "run",
                        lambda command, **kw: real_run([*command[:2], waiting, command[3], str(go)], **kw))  # fmt: skip
    store = EdgeStore(tmp_path / "q")
    store.upsert(IDENTITY, [_point(n, "A", f"note {n} about api keys") for n in range(50)])
    scope, dense = Scope(tenant="A"), _unit(7)
    before = [h.id for h in store.search(IDENTITY, scope, dense=dense, sparse=None, limit=10)]
    optimizing = threading.Thread(target=store.optimize, kwargs={"quiet_for": 0})
    optimizing.start()
    work = tmp_path / "q" / f"{IDENTITY.collection}.optimizing"
    while not work.exists() and optimizing.is_alive():
        optimizing.join(0.05)
    assert work.exists(), "the optimization ended before its copy was made"
    writing = threading.Thread(target=store.upsert, args=(IDENTITY, [_point(99, "A", "written meanwhile")]))
    writing.start()  # waits for the swap: the copy being optimized would not hold it
    assert [h.id for h in store.search(IDENTITY, scope, dense=dense, sparse=None, limit=10)] == before
    assert optimizing.is_alive() and writing.is_alive()  # the search ran while the optimization was under way
    go.touch()
    optimizing.join(60)
    writing.join(60)
    assert not optimizing.is_alive() and not writing.is_alive()
    assert store.count(IDENTITY, scope) == 51  # nothing lost, the write made meanwhile included
    assert [h.id for h in store.search(IDENTITY, scope, dense=dense, sparse=None, limit=10)][:5] == before[:5]
    assert sorted(p.name for p in (tmp_path / "q").iterdir() if p.is_dir()) == [IDENTITY.collection]
    store.close()
