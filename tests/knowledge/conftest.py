"""Fixtures of more than one module of the knowledge tests."""

from __future__ import annotations

import pytest

from knowledge.ingest import pipeline
from tests.knowledge.test_languages import ENGLISH_DOCS, SPANISH_DOCS, _folder


@pytest.fixture
def bilingual(tenant_a, tmp_path):
    """Seven documents in one folder source, five English and two Spanish (tests/knowledge/test_languages.py)."""
    root = _folder(tmp_path, {**ENGLISH_DOCS, **SPANISH_DOCS})
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="docs", path=root)
    pipeline.sync_folder(source=source, root=root)
    return tenant_a
