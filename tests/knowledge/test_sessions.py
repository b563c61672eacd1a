"""Agent sessions over REST (issue 53): a base pack, reads that bring only what is new, and word when what was given
stops being true. Real files through the real pipeline, the real packaged embedder, a real Qdrant Edge store.

The knowledge base: a support handbook of several sections per file, a board note only group:board may read (its
text holds a canary), and a refund policy that a new one will supersede."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from django.utils import timezone
from django_q.models import Schedule
from rest_framework.test import APIClient

from agent_sessions import services as sessions
from agent_sessions.models import AgentSession, SessionChange
from agent_sessions.tasks import session_cleanup_task
from core.tokens import estimate_tokens
from knowledge import services
from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.models import Document
from tenants.services import api_key_issue, group_create, group_delete, group_get
from tests.factories import CommittingClientMixin, make_folder_source

CANARY = "quokka7781lantern"


def _sections(title: str, topics: list[tuple[str, str]]) -> str:
    return f"# {title}\n\n" + "\n\n".join(f"## {head}\n\n{body}" for head, body in topics) + "\n"


# fmt: off
FILES = {
    "shipping.md": _sections("Shipping", [
        ("Warehouses", "Orders ship from the Rotterdam warehouse. Parcels for Spain leave from the Madrid depot."),
        ("Express", "Express delivery costs 12 euros and arrives the next working day when ordered before noon."),
        ("Tracking", "Every parcel has a tracking number sent by e-mail once the carrier scans it at the depot."),
        ("Lost parcels", "A parcel not delivered within ten working days is declared lost and sent again free."),
    ]),
    "returns.md": _sections("Returns", [
        ("Window", "Returns are accepted within thirty days of delivery with the original receipt."),
        ("Refunds", "Refunds go back to the card used for the purchase within five business days."),
        ("Damaged goods", "A damaged parcel is refunded in full when the customer sends a photo within two days."),
    ]),
    "warranty.md": _sections("Warranty", [
        ("Laptops", "Every laptop has a warranty of two years from the day of delivery."),
        ("Batteries", "Batteries are covered for one year; swollen batteries are replaced at once."),
    ]),
    "promo.md": _sections("Winter promotion", [
        ("Discount", "The winter promotion takes 15 percent off every headset until the end of the season."),
    ]),
    "desk.md": _sections("Help desk", [
        ("Hours", "The help desk answers from 8 to 18 on working days, by phone and by chat."),
    ]),
    "refunds-policy.md": _sections("Refund policy", [
        ("Store credit", "Refunds above 500 euros are paid as store credit unless the customer asks otherwise."),
    ]),
    "board.md": _sections("Board minutes", [
        ("Salaries", f"The board approved a salary band of 92,000 euros for senior engineers. Reference {CANARY}."),
    ]),
}
# fmt: on


class Client(CommittingClientMixin, APIClient):
    pass


@pytest.fixture
def kb(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files=FILES, name="kb")
    group_create(tenant=tenant_a, name="board")
    services.document_set_access(tenant=tenant_a, document=Document.objects.get(document_key="board.md"),
                                 access=["group:board"])  # fmt: skip
    indexer.drain()
    return {"tenant": tenant_a, "source": source, "root": root}


def _client(tenant, *, acts_for=None, scope="read"):  # type: ignore[no-untyped-def]
    client = Client()
    key = api_key_issue(tenant=tenant, name=f"agent-{uuid.uuid4().hex[:6]}", scope=scope, acts_for=acts_for)[1]
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def _url(tenant, path: str) -> str:  # type: ignore[no-untyped-def]
    return f"/api/v1/tenants/{tenant.slug}/{path}"


def _start(client, tenant, **body):  # type: ignore[no-untyped-def]
    response = client.post(_url(tenant, "sessions/"), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _retrieve(client, tenant, query: str, **body):  # type: ignore[no-untyped-def]
    response = client.post(_url(tenant, "retrieve/"), {"query": query, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _changes(client, tenant, session: str, **params):  # type: ignore[no-untyped-def]
    response = client.get(_url(tenant, f"sessions/{session}/changes/"), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_session_brings_only_new_chunks_counts_top_k_in_new_ones_and_lists_what_it_holds(kb):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    client = _client(tenant)
    session = _start(client, tenant, purpose="A customer asks about a late parcel")
    question = "Where do parcels ship from, what does express delivery cost and how is a parcel tracked?"
    stateless = [h["chunk_id"] for h in _retrieve(client, tenant, question, top_k=6)["hits"]]

    first = _retrieve(client, tenant, question, top_k=3, session=session)
    second = _retrieve(client, tenant, question, top_k=3, session=session)
    got_first = [h["chunk_id"] for h in first["hits"]]
    got_second = [h["chunk_id"] for h in second["hits"]]
    assert len(got_first) == 3 and len(got_second) == 3  # top_k counts new hits: never fewer
    assert not set(got_first) & set(got_second)  # nothing delivered twice
    assert got_first == stateless[:3] and got_second == stateless[3:6]  # the next ones, in the stateless order
    held = second["already_delivered"]
    assert [h["chunk_id"] for h in held] == got_first and [h["rank"] for h in held] == [1, 2, 3]
    assert first["memory_changes"] == 0 and first["session"] == session and first["tokens"] > 0

    again = _retrieve(client, tenant, question, top_k=3, session=session, include_delivered=True)
    assert [h["chunk_id"] for h in again["hits"]] == stateless[:3]  # include_delivered: the plain ranking

    ledger = client.get(_url(tenant, f"sessions/{session}/")).json()
    assert ledger["deliveries_total"] == 6 and ledger["calls"] == 3
    assert [(d["chunk_id"], d["call"], d["via"]) for d in ledger["deliveries"]] == (
        [(c, 1, "retrieve") for c in got_first] + [(c, 2, "retrieve") for c in got_second])  # fmt: skip
    assert sum(d["tokens"] for d in ledger["deliveries"]) == first["tokens"] + second["tokens"] > 0
    assert ledger["tokens_delivered"] == first["tokens"] + second["tokens"] + again["tokens"]  # sent again: counted
    assert all(d["version"] == 1 and d["document_id"].startswith("doc:") for d in ledger["deliveries"])


def test_specific_retrieve_and_a_budget_in_a_session(kb):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    client = _client(tenant)
    session = _start(client, tenant)
    first = _retrieve(client, tenant, "express delivery cost", top_k=2, session=session, specific=True)
    second = _retrieve(client, tenant, "express delivery cost", top_k=2, session=session, specific=True)
    assert len(second["hits"]) == 2
    assert not {h["chunk_id"] for h in first["hits"]} & {h["chunk_id"] for h in second["hits"]}

    budget = 40
    cut = _retrieve(client, tenant, "returns refunds damaged parcels warranty", top_k=6, session=session,
                    max_tokens=budget)  # fmt: skip
    assert 0 < cut["tokens"] <= budget and cut["left_out"]
    assert all(estimate_tokens(h["text"]) for h in cut["hits"])
    given = {h["chunk_id"] for h in cut["hits"]}
    left = [item["chunk_id"] for item in cut["left_out"]]
    assert not given & set(left) and [item["rank"] for item in cut["left_out"]] == sorted(
        item["rank"] for item in cut["left_out"])  # fmt: skip
    ledger = client.get(_url(tenant, f"sessions/{session}/")).json()
    assert not set(left) & {d["chunk_id"] for d in ledger["deliveries"]}  # what was left out was not given
    later = _retrieve(client, tenant, "returns refunds damaged parcels warranty", top_k=6, session=session)
    assert set(left) <= {h["chunk_id"] for h in later["hits"]}  # so it comes next


def test_the_base_pack_fits_its_budget_most_important_first_and_is_recorded(kb):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    client = _client(tenant)
    whole = client.post(_url(tenant, "bootstrap/"), {"intent": "parcels"}, format="json").json()
    session = _start(client, tenant)
    budget = 60
    pack = client.post(_url(tenant, "bootstrap/"), {"intent": "parcels", "session": session, "max_tokens": budget},
                       format="json").json()  # fmt: skip
    assert pack["tokens"] <= budget and pack["left_out"] and pack["max_tokens"] == budget
    kept = [i["chunk_id"] for i in pack["items"]]
    everything = [i["chunk_id"] for i in whole["items"]]
    assert kept == everything[: len(kept)]  # a prefix: most important first, cut at an item boundary
    assert [i["chunk_id"] for i in pack["left_out"] if "chunk_id" in i] == everything[len(kept) :]
    ledger = client.get(_url(tenant, f"sessions/{session}/")).json()
    assert ledger["base_pack"]["chunk_ids"] == kept and ledger["base_pack"]["tokens"] == pack["tokens"]
    assert {d["chunk_id"] for d in ledger["deliveries"]} == set(kept)
    assert all(d["via"] == "bootstrap" for d in ledger["deliveries"])


def test_stale_memory_every_change_is_reported_once_and_nothing_else(kb):  # type: ignore[no-untyped-def]
    tenant, root = kb["tenant"], kb["root"]
    client = _client(tenant)
    session = _start(client, tenant)
    for query in (
        "express delivery cost",
        "returns window receipt",
        "laptop warranty years",
        "winter promotion",
        "help desk hours",
        "refunds above 500 euros store credit",
    ):
        _retrieve(client, tenant, query, top_k=1, session=session)
    held = {d["document_id"]: d["chunk_id"] for d in
            client.get(_url(tenant, f"sessions/{session}/")).json()["deliveries"]}  # fmt: skip
    docs = {d.document_key: d for d in Document.objects.filter(source=kb["source"])}
    assert {docs[k].document_id for k in ("shipping.md", "returns.md", "warranty.md", "promo.md", "desk.md",
                                          "refunds-policy.md")} <= set(held)  # fmt: skip
    assert _changes(client, tenant, session)["changes"] == []  # nothing changed yet

    # An edit (shipping), a retirement (promo), an expiry (warranty), a restriction (desk), a supersession (refunds).
    text = FILES["shipping.md"].replace("costs 12 euros", "costs 15 euros")
    (root / "shipping.md").write_text(text)
    (root / "refunds-2027.md").write_text("---\nsupersedes: refunds-policy.md\n---\n# Refund policy 2027\n\n"
                                          "Refunds above 800 euros are paid as store credit.\n")  # fmt: skip
    pipeline.sync_folder(source=kb["source"], root=root)
    services.documents_retire(tenant=tenant, documents=Document.objects.filter(pk=docs["promo.md"].pk))
    yesterday = dt.date.today() - dt.timedelta(days=1)
    services.document_set_validity(tenant=tenant, document=docs["warranty.md"], changes={"valid_until": yesterday},
                                   actor="test")  # fmt: skip
    services.document_set_access(tenant=tenant, document=docs["desk.md"], access=["group:board"])
    indexer.drain()

    counted = _retrieve(client, tenant, "lost parcels", top_k=1, session=session)["memory_changes"]
    page = _changes(client, tenant, session)
    kinds = {c["kind"]: c for c in page["changes"]}
    assert counted == len(page["changes"]) == 5 and set(kinds) == {
        "changed", "retired", "expired", "no_longer_available", "superseded"}  # fmt: skip
    changed = kinds["changed"]
    assert changed["document_id"] == docs["shipping.md"].document_id
    assert (changed["old_version"], changed["new_version"]) == (1, 2)
    assert kinds["retired"]["document_id"] == docs["promo.md"].document_id
    assert kinds["expired"]["document_id"] == docs["warranty.md"].document_id
    superseded = kinds["superseded"]
    assert superseded["document_id"] == docs["refunds-policy.md"].document_id
    assert superseded["superseded_by"] == Document.objects.get(document_key="refunds-2027.md").document_id
    gone = kinds["no_longer_available"]
    assert gone == {
        "cursor": gone["cursor"],
        "at": gone["at"],
        "kind": "no_longer_available",
        "chunk_ids": [held[docs["desk.md"].document_id]],
    }  # nothing but the chunk id it holds
    assert "Help desk" not in json.dumps(page) and "desk.md" not in json.dumps(gone["chunk_ids"]).replace(
        held[docs["desk.md"].document_id], "")  # fmt: skip

    assert _changes(client, tenant, session)["changes"] == []  # read: not reported again
    assert _retrieve(client, tenant, "lost parcels", top_k=1, session=session)["memory_changes"] == 0
    replay = _changes(client, tenant, session, cursor="0")  # a cursor re-reads from where it says
    assert [c["kind"] for c in replay["changes"]] == [c["kind"] for c in page["changes"]]
    ledger = client.get(_url(tenant, f"sessions/{session}/")).json()
    assert all(d["document_id"] != docs["desk.md"].document_id for d in ledger["deliveries"])


def test_an_edit_says_which_chunks_hold_the_text_now(kb):  # type: ignore[no-untyped-def]
    tenant, root = kb["tenant"], kb["root"]
    long = "\n\n".join(f"## {head}\n\n{body} " + " ".join(f"{head} note {n}: {body}" for n in range(12))
                        for head, body in (("Warehouses", "Orders ship from the Rotterdam warehouse."),
                                           ("Express", "Express delivery costs 12 euros."),
                                           ("Tracking", "Every parcel has a tracking number.")))  # fmt: skip
    (root / "shipping.md").write_text(f"# Shipping\n\n{long}\n")
    pipeline.sync_folder(source=kb["source"], root=root)
    client = _client(tenant)
    session = _start(client, tenant)
    _retrieve(client, tenant, "Shipping warehouses express tracking", top_k=8, session=session)
    held = [d for d in client.get(_url(tenant, f"sessions/{session}/")).json()["deliveries"]
            if d["document_id"].endswith("shipping.md")]  # fmt: skip
    assert len(held) >= 2
    (root / "shipping.md").write_text(f"# Shipping\n\n{long.replace('costs 12 euros', 'costs 15 euros')}\n")
    pipeline.sync_folder(source=kb["source"], root=root)
    changed = _changes(client, tenant, session)["changes"]
    assert [c["kind"] for c in changed] == ["changed"]
    moved = {c["chunk_id"]: c["now_in"] for c in changed[0]["chunks"]}
    assert set(moved) == {d["chunk_id"] for d in held}
    edited = [chunk for chunk, now in moved.items() if not now]
    assert len(edited) == 1  # the express section's text is gone; every other one is where it was
    assert all(now == [chunk] for chunk, now in moved.items() if chunk not in edited)
    after = _retrieve(client, tenant, "express delivery costs 15 euros", top_k=1, session=session)
    assert "15 euros" in after["hits"][0]["text"]  # the edited chunk is new to the session: it comes again
    # The unchanged chunks of the new version are the texts the session holds: they do not come again.
    unchanged = {chunk for chunk, now in moved.items() if now == [chunk]}
    broad = _retrieve(client, tenant, "Shipping warehouses express tracking", top_k=8, session=session)
    assert not unchanged & {h["chunk_id"] for h in broad["hits"]}
    assert unchanged <= {h["chunk_id"] for h in broad["already_delivered"]}


def test_a_revoked_group_is_no_longer_available_and_its_text_never_reaches_a_session(kb):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    board = _client(tenant, acts_for=["group:board"])
    session = _start(board, tenant)
    found = _retrieve(board, tenant, "salary band senior engineers", top_k=1, session=session)
    assert CANARY in found["hits"][0]["text"]
    board_chunk = found["hits"][0]["chunk_id"]
    group_delete(tenant=tenant, actor=None, group=group_get(tenant=tenant, name="board"))
    indexer.drain()
    after = _retrieve(board, tenant, "salary band senior engineers", top_k=3, session=session)
    assert after["memory_changes"] == 1 and CANARY not in json.dumps(after)
    changes = _changes(board, tenant, session)["changes"]
    assert changes == [{"cursor": changes[0]["cursor"], "at": changes[0]["at"], "kind": "no_longer_available",
                        "chunk_ids": [board_chunk]}]  # fmt: skip

    # A key that never could see it: no read, pack, ledger or change of its session ever holds the canary.
    other = _client(tenant)
    theirs = _start(other, tenant)
    said = [{**_retrieve(other, tenant, q, top_k=8, session=theirs), "query": "(asked)"}
            for q in ("board salary band", CANARY)]  # fmt: skip
    said.append(other.post(_url(tenant, "bootstrap/"), {"intent": "board salaries", "session": theirs},
                           format="json").json())  # fmt: skip
    said.append(other.get(_url(tenant, f"sessions/{theirs}/")).json())
    said.append(_changes(other, tenant, theirs))
    assert CANARY not in json.dumps(said) and "board.md" not in json.dumps(said)


def test_sessions_belong_to_their_key_expire_and_are_cleaned_up(kb, tenant_b):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    mine, other = _client(tenant), _client(tenant)
    session = _start(mine, tenant, ttl=1)
    for path in (f"sessions/{session}/", f"sessions/{session}/changes/"):
        assert other.get(_url(tenant, path)).status_code == 404  # another key: like a missing one
    assert other.post(_url(tenant, "retrieve/"), {"query": "express", "session": session},
                      format="json").status_code == 404  # fmt: skip
    assert other.delete(_url(tenant, f"sessions/{session}/")).status_code == 404
    assert mine.get(_url(tenant, f"sessions/{uuid.uuid4()}/")).status_code == 404
    outsider = _client(tenant_b)
    assert outsider.get(_url(tenant_b, f"sessions/{session}/")).status_code == 404  # another tenant's
    assert outsider.get(_url(tenant, f"sessions/{session}/")).status_code == 404
    assert [s["id"] for s in mine.get(_url(tenant, "sessions/")).json()["sessions"]] == [session]
    assert other.get(_url(tenant, "sessions/")).json()["sessions"] == []

    row = AgentSession.objects.get(public_id=session)
    assert (row.expires_at - row.created_at) == dt.timedelta(hours=1)
    AgentSession.objects.filter(pk=row.pk).update(expires_at=timezone.now() - dt.timedelta(minutes=1))
    gone = mine.post(_url(tenant, "retrieve/"), {"query": "express", "session": session}, format="json")
    assert gone.status_code == 410 and "expired" in gone.json()["detail"]
    assert mine.get(_url(tenant, f"sessions/{session}/")).status_code == 410
    assert sessions.sessions_cleanup() == 0  # expired a minute ago: still answers 410
    schedule = Schedule.objects.get(name=sessions.CLEANUP_SCHEDULE)  # the worker runs the cleanup every hour
    assert (schedule.func, schedule.schedule_type) == ("agent_sessions.tasks.session_cleanup_task", Schedule.HOURLY)
    AgentSession.objects.filter(pk=row.pk).update(expires_at=timezone.now() - dt.timedelta(days=2))
    assert session_cleanup_task() >= 1
    assert mine.get(_url(tenant, f"sessions/{session}/")).status_code == 404

    ended = _start(mine, tenant)
    assert mine.delete(_url(tenant, f"sessions/{ended}/")).status_code == 204
    assert mine.post(_url(tenant, "retrieve/"), {"query": "x", "session": ended}, format="json").status_code == 410


@pytest.mark.parametrize("body", [
    {"max_tokens": "lots"}, {"max_tokens": 0}, {"max_tokens": -5}, {"max_tokens": 10**9}, {"session": "not-a-uuid"},
    {"include_delivered": "perhaps"},
])  # fmt: skip
def test_a_malformed_budget_or_session_is_a_400_naming_the_field(kb, body):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    response = _client(tenant).post(_url(tenant, "retrieve/"), {"query": "express", **body}, format="json")
    assert response.status_code == 400 and set(body) <= set(response.json())


def test_bad_session_inputs_are_400s(kb):  # type: ignore[no-untyped-def]
    tenant = kb["tenant"]
    client = _client(tenant)
    for body in ({"ttl": 0}, {"ttl": "forever"}, {"ttl": 10_000}, {"purpose": "x" * 501}, {"scope": "everything"}):
        response = client.post(_url(tenant, "sessions/"), body, format="json")
        assert response.status_code == 400 and set(body) <= set(response.json()), body
    session = _start(client, tenant)
    for params in ({"cursor": "abc"}, {"limit": "many"}):
        assert client.get(_url(tenant, f"sessions/{session}/changes/"), params).status_code == 400
    pack = client.post(_url(tenant, "bootstrap/"), {"session": session, "max_tokens": "x"}, format="json")
    assert pack.status_code == 400 and "max_tokens" in pack.json()


def test_a_staff_member_keeps_a_session_of_their_own_and_a_read_key_may_start_and_end_one(kb, client):  # type: ignore[no-untyped-def]
    from tests.factories import make_member

    tenant = kb["tenant"]
    staff = make_member(tenant, username="sam")
    client.force_login(staff)
    created = client.post(_url(tenant, "sessions/"), {"purpose": "chat"}, content_type="application/json")
    assert created.status_code == 201
    session = created.json()["id"]
    assert client.get(_url(tenant, f"sessions/{session}/")).status_code == 200
    key_client = _client(tenant)
    assert key_client.get(_url(tenant, f"sessions/{session}/")).status_code == 404  # a key cannot use a user's
    assert AgentSession.objects.get(public_id=session).user == staff
    assert client.delete(_url(tenant, f"sessions/{session}/")).status_code == 204


def test_a_session_scope_holds_every_call(kb, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    other = make_folder_source(tenant=tenant_a, root=tmp_path / "faq", files={
        "faq.md": "# FAQ\n\nExpress delivery is also available for the islands at 30 euros."}, name="faq")  # fmt: skip
    indexer.drain()
    client = _client(tenant_a)
    session = _start(client, tenant_a, scope={"source_ids": [other.source_id]})
    hits = _retrieve(client, tenant_a, "express delivery cost", top_k=5, session=session)["hits"]
    assert hits and {h["source_id"] for h in hits} == {other.source_id}
    assert SessionChange.objects.count() == 0


def test_a_deleted_source_is_no_longer_available_and_a_restored_access_is_not_a_change(kb, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    faq = make_folder_source(tenant=tenant_a, root=tmp_path / "faq", files={
        "faq.md": "# FAQ\n\nGift cards never expire and can be used in every shop."}, name="faq")  # fmt: skip
    indexer.drain()
    client = _client(tenant_a)
    session = _start(client, tenant_a)
    gift = _retrieve(client, tenant_a, "gift cards expire", top_k=1, session=session)["hits"][0]
    desk = _retrieve(client, tenant_a, "help desk hours", top_k=1, session=session)["hits"][0]
    assert gift["document_key"] == "faq.md" and desk["document_key"] == "desk.md"
    services.source_delete(tenant=tenant_a, source=faq)
    document = Document.objects.get(document_key="desk.md")
    services.document_set_access(tenant=tenant_a, document=document, access=["group:board"])
    services.document_set_access(tenant=tenant_a, document=document, access=None)  # taken away and given back
    indexer.drain()  # until the payloads follow, the stricter of the two lists holds (knowledge.models)
    changes = _changes(client, tenant_a, session)["changes"]
    assert [(c["kind"], c["chunk_ids"]) for c in changes] == [("no_longer_available", [gift["chunk_id"]])]


def test_a_call_in_a_session_never_widens_its_tag_scope(kb, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    text = "# Express manual\n\nExpress delivery is booked at the counter before noon."
    manuals = make_folder_source(tenant=tenant_a, root=tmp_path / "manuals", files={"express.md": text}, name="manuals")
    services.source_set_tags(tenant=tenant_a, source=manuals, tags=["manuals"])
    services.source_set_tags(tenant=tenant_a, source=kb["source"], tags=["handbook"])
    indexer.drain()
    client = _client(tenant_a)
    session = _start(client, tenant_a, scope={"tags": [" Manuals "]})  # kept as reads compare tags
    inside = _retrieve(client, tenant_a, "express delivery", top_k=5, session=session)["hits"]
    assert inside and {h["document_key"] for h in inside} == {"express.md"}
    outside = _retrieve(client, tenant_a, "express delivery", top_k=5, session=session, scope={"tags": ["handbook"]})
    assert outside["hits"] == []  # the call names a tag outside the session's: nothing, not the union
