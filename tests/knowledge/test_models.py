from __future__ import annotations

import pytest
from django.db import IntegrityError

from knowledge import ids
from knowledge.models import Chunk, Document, Source
from knowledge.services import source_create, source_default_get
from tests.factories import make_document


def test_the_default_source_is_created_once_per_tenant(tenant_a, tenant_b):
    first = source_default_get(tenant=tenant_a)
    assert source_default_get(tenant=tenant_a) == first
    assert first.source_id == "src:acme:upload:default"
    assert source_default_get(tenant=tenant_b).source_id == "src:globex:upload:default"


def test_a_loose_document_belongs_to_the_default_source(tenant_a):
    document = make_document(tenant=tenant_a, key="Notes/Meeting 1.md")
    assert document.source.is_default
    assert document.document_id == "doc:src:acme:upload:default:Notes/Meeting 1.md"


def test_two_sources_whose_names_normalise_alike_are_refused(tenant_a):
    source_create(tenant=tenant_a, kind="folder", name="Product Docs")
    with pytest.raises(IntegrityError):
        source_create(tenant=tenant_a, kind="folder", name="  product   docs ")


def test_the_same_source_name_in_two_tenants_gives_two_ids(tenant_a, tenant_b):
    a = source_create(tenant=tenant_a, kind="folder", name="docs")
    b = source_create(tenant=tenant_b, kind="folder", name="docs")
    assert a.source_id != b.source_id


def test_chunks_copy_the_tenant_and_carry_stable_ids(tenant_a, tenant_b):
    make_document(tenant=tenant_a, key="a.md", chunks=3)
    make_document(tenant=tenant_b, key="a.md", chunks=2)
    chunks = Chunk.objects.for_tenant(tenant_a)
    assert chunks.count() == 3
    assert {ids.parse_chunk_id(c.chunk_id).tenant for c in chunks} == {"acme"}
    assert Document.objects.for_tenant(tenant_b).get().chunks.count() == 2
    assert Source.objects.for_tenant(tenant_b).count() == 1
