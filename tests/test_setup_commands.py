from __future__ import annotations

import io

from django.contrib.auth import get_user_model
from django.core.management import call_command

from ragsite.packaged_models import packaged_embedder_files, packaged_llm_path, prepare_packaged_models
from tenants.models import Membership


def test_setup_demo_creates_a_tenant_and_an_admin_once_and_prints_working_credentials(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first, second = io.StringIO(), io.StringIO()
    call_command("setup_demo", stdout=first)
    call_command("setup_demo", stdout=second)
    assert first.getvalue() == second.getvalue()
    password = first.getvalue().split("password: ")[1].split()[0]
    user = get_user_model().objects.get(username="admin")
    assert user.check_password(password) and user.is_superuser
    assert Membership.objects.get(user=user).tenant.slug == "demo"
    assert oct((tmp_path / "admin-credentials.txt").stat().st_mode)[-3:] == "600"


def test_the_packaged_models_are_ready_without_any_download(settings, tmp_path):
    settings.RAG_MODELS_DIR = tmp_path
    files = prepare_packaged_models()
    assert packaged_llm_path(assemble=False).read_bytes()[:4] == b"GGUF"
    model, tokenizer = packaged_embedder_files()
    assert model.suffix == ".onnx" and tokenizer.name == "tokenizer.json"
    assert all(f.size > 100_000 for f in files)
