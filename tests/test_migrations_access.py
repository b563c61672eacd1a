"""Upgrading an install from before access lists loses nothing: sources stay open to the tenant, keys act for the
tenant, and retrieve and answer give what they gave (checked on real ingested documents and a real store)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from knowledge.index import indexer
from knowledge.index.indexer import version_identity
from knowledge.index.vectorstore import Scope, get_store
from knowledge.models import Chunk, Document, DocumentVersion, Source
from tenants.models import ApiKey
from tenants.services import api_key_issue
from tests.factories import make_folder_source, make_tenant, rewrite_points_without

FILES = {
    "returns.md": "# Returns\n\nReturns are accepted within thirty days with the receipt.\n",
    "shipping.md": "# Shipping\n\nOrders ship from Rotterdam. Express delivery costs 12 euros.\n",
}
QUESTIONS = ["How many days do I have to return an item?", "What does express delivery cost?"]


def _answers(key: str) -> list[dict]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    found = []
    for question in QUESTIONS:
        hits = client.post("/api/v1/tenants/acme/retrieve/", {"query": question, "top_k": 3}, format="json").json()
        answer = client.post("/api/v1/tenants/acme/answer/", {"question": question}, format="json").json()
        # (a citation's freshness.changed_at is when its version was first served: migrating back past 0010 drops it,
        # and the way forward rebuilds it from the version's creation, a few milliseconds earlier)
        citations = [{k: v for k, v in c.items() if k != "freshness"} for c in answer["citations"]]
        found.append({"hits": [(h["chunk_id"], round(h["score"], 6)) for h in hits["hits"]],
                      "answer": answer["answer"], "citations": citations})  # fmt: skip
    return found


@pytest.mark.django_db(transaction=True)
def test_an_install_from_before_access_lists_upgrades_with_nothing_lost(tmp_path):
    tenant = make_tenant(slug="acme", name="Acme")
    make_folder_source(tenant=tenant, root=tmp_path / "handbook", files=FILES, name="handbook")
    raw_key = api_key_issue(tenant=tenant, scope="read")[1]
    before = _answers(raw_key)
    assert before[0]["hits"] and before[0]["hits"][0][0].endswith("returns.md:documental:0")

    rewrite_points_without(("access",))
    call_command("migrate", "knowledge", "0008", verbosity=0)
    call_command("migrate", "tenants", "0003", verbosity=0)
    with connection.cursor() as cursor:
        columns = {c.name for c in connection.introspection.get_table_description(cursor, "knowledge_document")}
    assert "readers" not in columns and "access" not in columns  # the schema as it was
    call_command("migrate", verbosity=0)  # the upgrade

    assert list(Source.objects.values_list("access", flat=True)) == [["tenant"]]
    assert list(ApiKey.objects.values_list("acts_for", flat=True)) == [["tenant"]]
    assert all(d.access is None and d.reader_list == ["tenant"] for d in Document.objects.all())
    assert Document.objects.filter(access_pending=True).count() == len(FILES)  # the points await `access`
    dense_before = list(Chunk.objects.order_by("pk").values_list("dense", flat=True))
    identity = version_identity(DocumentVersion.objects.first())
    open_to_tenant = Scope(tenant=str(tenant.public_id), statuses=None, principals=["tenant"])
    assert get_store().count(identity, open_to_tenant) == 0  # the old points carry no access list
    indexer.drain()  # the web server's first pass after the upgrade
    assert Document.objects.filter(access_pending=True).count() == 0
    assert get_store().count(identity, open_to_tenant) == Chunk.objects.count()
    assert list(Chunk.objects.order_by("pk").values_list("dense", flat=True)) == dense_before  # nothing re-embedded
    after = _answers(raw_key)
    for old, new in zip(before, after, strict=True):
        assert new["hits"] == old["hits"]
        assert new["answer"] == old["answer"] and new["citations"] == old["citations"]
