from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from inference.packaged import (
    PACKAGED_CHAT_CHAIN,
    PackagedModelError,
    assemble_gguf,
    packaged_embedder_files,
    prepare_packaged_models,
)
from knowledge.search.retrieval import retrieve
from tenants.models import Membership
from tenants.principals import Viewer


def test_setup_demo_creates_a_tenant_and_an_admin_once_and_prints_working_credentials(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first, second = io.StringIO(), io.StringIO()
    call_command("setup_demo", stdout=first)
    call_command("setup_demo", stdout=second)
    assert first.getvalue() == second.getvalue()
    password = first.getvalue().split("password: ")[1].split()[0]
    user = get_user_model().objects.get(username="admin")
    assert user.check_password(password) and user.is_superuser
    demo = Membership.objects.get(user=user).tenant
    assert demo.slug == "demo"
    assert oct((tmp_path / "admin-credentials.txt").stat().st_mode)[-3:] == "600"
    # A new user can ask right away: ragsite's own docs/ are in the demo tenant, indexed.
    assert "documents of ragsite's docs/ in source src:demo:folder:ragsite-docs" in first.getvalue()
    hits = retrieve(
        viewer=Viewer.everything(demo), query="Which environment variable switches the database to PostgreSQL?", top_k=3
    )
    top = [hit.chunk.document.display_key for hit in hits]
    assert {"configuration.md", "production.md"} & set(top)  # both document DATABASE_URL
    assert any("DATABASE_URL" in hit.chunk.text for hit in hits)


def test_the_packaged_models_are_ready_without_any_download(settings, tmp_path):
    settings.RAG_MODELS_DIR = tmp_path
    files = prepare_packaged_models()
    for model in PACKAGED_CHAT_CHAIN:  # assembled from the part packages, verified (size + sha256)
        assert model.target().stat().st_size == model.size and model.target().read_bytes()[:4] == b"GGUF"
    assert [f.name for f in files][:2] == [f"chat: {m.label} GGUF" for m in PACKAGED_CHAT_CHAIN]
    model, tokenizer = packaged_embedder_files()
    assert model.suffix == ".onnx" and tokenizer.name == "tokenizer.json"
    assert all(f.size > 100_000 for f in files)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(m.filename for m in PACKAGED_CHAT_CHAIN)  # no temp


def test_an_assembly_that_does_not_match_its_pin_leaves_nothing_under_the_final_name(tmp_path):
    from dataclasses import replace

    small = PACKAGED_CHAT_CHAIN[1]
    wrong = replace(small, sha256="0" * 64)
    with pytest.raises(PackagedModelError, match="expected 491400064 bytes with sha256 0000"):
        assemble_gguf(wrong, tmp_path / "model.gguf")
    assert list(tmp_path.iterdir()) == []  # neither the final name nor a temp file


@pytest.mark.slow
def test_prepare_models_asks_the_runtime_for_one_token_in_a_child_process(settings, tmp_path):
    """The self-test up.sh runs: the packaged 0.5B answers one token in a child; a broken model says why."""
    from inference.packaged import QWEN_0_5B
    from inference.runtime import runtime_self_test

    settings.RAG_MODELS_DIR = QWEN_0_5B.target().parent  # assembled for the suite already
    out = io.StringIO()
    call_command("prepare_models", stdout=out)
    assert "llama.cpp self-test: one token in" in out.getvalue() and "AVX2 = 1" in out.getvalue()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    failed = runtime_self_test(str(broken))
    assert not failed.ok and failed.detail.startswith("the child exited with status 1.")
