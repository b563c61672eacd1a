"""How the gateway reads the model server's state file (no model runs here: the file is written by the test)."""

from __future__ import annotations

import os

import pytest

from inference.llm import ModelUnavailable, get_gateway, gguf_info
from inference.packaged import QWEN_0_5B, packaged_gemma_path
from inference.runtime import READY, RESTARTING, RuntimeState, write_state


def _state(settings, tmp_path, **fields) -> None:  # type: ignore[no-untyped-def]
    settings.RAG_LLM_RUNTIME_DIR = tmp_path / "llm"
    write_state(RuntimeState(supervisor_pid=os.getpid(), url="http://127.0.0.1:9/v1", pid=1, n_ctx=4096, **fields))


def test_a_template_less_gemma_gets_its_rules_folded_into_the_user_turn_and_qwen_does_not(settings, tmp_path):
    gemma, qwen = str(packaged_gemma_path()), str(QWEN_0_5B.target())
    assert not gguf_info(gemma).has_chat_template and gguf_info(qwen).has_chat_template
    models = {"gemma-3-270m-q4_k_m.gguf": gemma, QWEN_0_5B.filename: qwen}
    _state(settings, tmp_path, state=READY, model="gemma-3-270m-q4_k_m.gguf", models=models)
    assert get_gateway().model().fold_system is True  # llama.cpp's "gemma" format would drop the system turn
    assert get_gateway([qwen]).model().fold_system is False


def test_a_restarting_server_is_a_retry_later_and_a_stale_state_file_is_no_server(settings, tmp_path):
    _state(settings, tmp_path, state=RESTARTING, detail="The model process killed by SIGKILL; restarting in 1 s.")
    with pytest.raises(ModelUnavailable) as unavailable:
        get_gateway().model()
    assert unavailable.value.retry_after >= 1 and "restarting" in unavailable.value.reason
    settings.RAG_LLM_RUNTIME_DIR = tmp_path / "llm"
    write_state(RuntimeState(state=READY, supervisor_pid=2**22 + 1))  # a supervisor that no longer exists
    gateway = get_gateway(["other.gguf"])
    assert gateway.model() is None and "No chat model server is running" in gateway.unavailable_reason()
