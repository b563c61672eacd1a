"""Several web processes on the embedded store: its owner serves their searches over a local socket (shared.py)."""

from __future__ import annotations

import json
import threading
import urllib.request
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import numpy as np
import pytest

from inference.embedders import EmbedderIdentity
from knowledge.index.lexical import document_vector, query_vector
from knowledge.index.shared import OwnerStore, StoreServer, _address
from knowledge.index.vectorstore import EdgeStore, Scope, StoreBusy, StorePoint, point_id
from tests.servers import environment, manage, start_gunicorn, stop

IDENTITY = EmbedderIdentity("test", "unit-vectors", 8)


def _point(n: int, tenant: str, text: str) -> StorePoint:
    vector = np.random.default_rng(n).normal(size=8)
    payload = {"tenant": tenant, "status": "active", "document_id": f"doc{n}", "tags": [], "critical": 0,
               "mode": "documental"}  # fmt: skip
    return StorePoint(point_id(f"chk{n}", 1), (vector / np.linalg.norm(vector)).tolist(), document_vector(text),
                      payload)  # fmt: skip


def test_another_process_reads_and_deletes_through_the_owner_but_never_upserts(tmp_path, monkeypatch):
    monkeypatch.setattr("knowledge.index.shared.OWNER_WAIT_S", 0.5)  # how long a gone owner is waited for
    owner = EdgeStore(tmp_path / "q")
    owner.upsert(IDENTITY, [_point(n, "A" if n % 2 else "B", f"note {n} about api keys") for n in range(20)])
    server = StoreServer(owner, tmp_path / "q")
    remote = OwnerStore(tmp_path / "q")
    try:
        scope, dense, sparse = Scope(tenant="A"), _point(99, "A", "").dense, query_vector("api keys")
        here = owner.hybrid(IDENTITY, scope, dense=dense, sparse=sparse, limit=5)
        there = remote.hybrid(IDENTITY, scope, dense=dense, sparse=sparse, limit=5)
        assert [h.id for h in there.fused] == [h.id for h in here.fused] and there.dense == here.dense
        assert all(h.payload["tenant"] == "A" for h in there.fused)
        assert remote.count(IDENTITY, scope) == 10 and remote.ids(IDENTITY, scope) == owner.ids(IDENTITY, scope)
        with pytest.raises(StoreBusy):  # new versions are the owner's indexer's to write
            remote.upsert(IDENTITY, [_point(50, "A", "new")])
        remote.delete(IDENTITY, Scope(tenant="B", statuses=None))  # deleting a source cannot wait
        assert owner.count(IDENTITY, Scope(tenant="B")) == 0 and owner.count(IDENTITY, scope) == 10
        with pytest.raises(AuthenticationError):  # a client that does not know the key gets nothing
            Client(_address(tmp_path / "q"), family="AF_UNIX", authkey=b"guess")
        assert remote.count(IDENTITY, scope) == 10  # the server goes on after a refused client
    finally:
        server.close()
        remote.close()
        owner.close()
    with pytest.raises(StoreBusy):  # the owner is gone: a clear "not reachable", never a hang
        OwnerStore(tmp_path / "q").count(IDENTITY, Scope(tenant="A"))


def test_two_web_workers_answer_retrieves_side_by_side_on_the_embedded_store(tmp_path):
    pages = tmp_path / "pages"
    pages.mkdir()
    for n in range(12):
        (pages / f"topic{n}.md").write_text(f"# Topic {n}\n\nThe code word of topic {n} is word{n}x.\n")
    env = environment(tmp_path / "data", RAG_WEB_WORKERS="2", RAG_WEB_THREADS="4", RAG_API_RATE="100000/min")
    for command in (("migrate", "-v0"), ("create_tenant", "acme"), ("ingest", "acme", str(pages), "--source", "kb")):
        done = manage(env, *command)
        assert done.returncode == 0, done.stderr[-2000:]
    key = manage(env, "create_api_key", "acme", "--scope", "read").stdout.strip().splitlines()[-1]
    log = (tmp_path / "web.log").open("w")
    web = start_gunicorn(env, log)
    errors: list[str] = []
    found: list[bool] = []

    def ask(n: int) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{env['PORT']}/api/v1/tenants/acme/retrieve/", method="POST",
            data=json.dumps({"query": f"code word of topic {n}", "top_k": 3}).encode(),
            headers={"Authorization": f"Api-Key {key}", "Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                hits = json.loads(response.read())["hits"]
                found.append(any(f"word{n}x" in hit["text"] for hit in hits))
        except Exception as exc:  # noqa: BLE001  (every failure is reported below)
            errors.append(repr(exc))

    try:
        threads = [threading.Thread(target=ask, args=(n % 12,)) for n in range(48)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop(web)
        log.close()
    text = (tmp_path / "web.log").read_text()
    assert not errors and len(found) == 48 and all(found), (errors[:3], text[-3000:])
    assert "reads through it" in text  # the second worker is not the owner: it searched through the first
