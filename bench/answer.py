"""Answer latency: time-to-first-token and tokens/s through the API versus llama.cpp directly, same prompts.

    python bench/answer.py [--model PATH]      # default: the packaged Qwen2.5-Coder 1.5B Instruct

Ingests ragsite's own docs/ into a throw-away tenant and builds, for each question, the focused, grounded prompt
the product would send. Then, greedy (temperature 0) with the same max_tokens, so every leg generates the same
tokens:
(a) direct: that prompt straight to llama_cpp.Llama.create_chat_completion on one Llama loaded here, with the
    model server's settings (threads, context, batch), reusing the KV state of the shared system prefix as the
    server does;
(b) the model server alone: `manage.py llm_serve` (llama.cpp's OpenAI-compatible server in its own process),
    the same prompt over HTTP, streamed;
(c) the product: gunicorn + the same model server, POST /api/v1/tenants/bench/answer/ with "stream": true
    (retrieval, focusing, prompt building, HTTP to the model, SSE to the client).
The ratios (b)/(a) and (c)/(a) are the cost of the separate process and of the whole product. It also prints
the prompt size and the prefill rate, so a first-token time can be projected onto a slower machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from _django import setup

from tenants.principals import Viewer

QUESTIONS = [
    "How do I load a folder of documents into a tenant?",
    "Which variable switches the database to PostgreSQL?",
    "What does index_check --repair do?",
    "How are API keys stored?",
    "What happens when the chat model fails to load?",
]
MAX_TOKENS = 96
ROOT = Path(__file__).resolve().parent.parent


def timed(chunks, text_of) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(seconds to the first token, decode tokens/s from the first token to the last, tokens)."""
    started, first, last, count = time.perf_counter(), None, None, 0
    for chunk in chunks:
        if text_of(chunk):
            count += 1
            last = time.perf_counter()
            first = first or last
    assert first is not None and last is not None, "no token"
    return first - started, (count - 1) / (last - first) if count > 1 else 0.0, count


def wait_for(check, what: str, timeout: float = 600) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            sys.exit(f"{what} did not come up")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a chat GGUF (default: the packaged default chat model)")
    args = parser.parse_args()
    data_dir = setup()
    from django.core.management import call_command

    from chat.excerpts import AnswerSettings, focused_prompt, prepare
    from chat.models import Assistant
    from core.tokens import estimate_tokens
    from inference.llm import STOP, server_threads
    from inference.packaged import packaged_llm_path
    from inference.runtime import READY, read_state
    from tenants.services import api_key_issue, tenant_create

    model_path = args.model or str(packaged_llm_path())
    tenant = tenant_create(slug="bench")
    call_command("ingest", "bench", str(ROOT / "docs"), "--source", "docs", verbosity=0)
    Assistant.objects.create(tenant=tenant, name="greedy", temperature=0.0, max_tokens=MAX_TOKENS)
    raw_key = api_key_issue(tenant=tenant)[1]
    threads, n_ctx = server_threads(), int(os.environ.get("RAG_LLM_CONTEXT", "4096"))
    options = AnswerSettings(temperature=0.0, max_tokens=MAX_TOKENS)
    prompts = []
    for question in ["warm up", *QUESTIONS]:  # the first, untimed, evaluates the system prefix everywhere
        sources = prepare(viewer=Viewer.everything(tenant), question=question, options=options)
        prompt, _ = focused_prompt(question, sources, options, estimate_tokens, n_ctx - MAX_TOKENS - 64)
        prompts.append(prompt.messages)
    from knowledge.index.vectorstore import reset_store

    reset_store()  # gunicorn owns the embedded store from here on

    # (a) direct: llama-cpp-python in this process, as the model server configures it.
    import llama_cpp

    llama = llama_cpp.Llama(model_path=model_path, n_ctx=n_ctx, n_batch=512, n_threads=threads,
                            n_threads_batch=threads, logits_all=False, verbose=False)  # fmt: skip
    direct, prompt_tokens = [], []
    for n, messages in enumerate(prompts):
        chunks = llama.create_chat_completion(messages=messages, max_tokens=MAX_TOKENS, temperature=0.0, stream=True,
                                              repeat_penalty=1.1, stop=STOP)  # fmt: skip
        result = timed(chunks, lambda c: c["choices"][0].get("delta", {}).get("content"))
        if n:
            direct.append(result)
            prompt_tokens.append(len(llama.tokenize(messages[-1]["content"].encode(), add_bos=False, special=True)))
    del llama

    # (b) the model server alone, and (c) the product, on one model server.
    port = 8798
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "PORT": str(port), "RAG_DEBUG": "true",
           "RAG_LLM_MODEL_PATH": model_path, "RAG_LLM_PRELOAD": "false"}  # fmt: skip
    quiet = {"cwd": ROOT, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    supervisor = subprocess.Popen([sys.executable, "manage.py", "llm_serve"], **quiet)  # type: ignore[call-overload]
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config",
                               "ragsite/gunicorn_conf.py", "--access-logfile", "/dev/null"], **quiet)  # fmt: skip
    served, api = [], []
    try:
        wait_for(lambda: getattr(read_state(), "state", None) == READY, "the model server")
        state = read_state()
        import openai

        client = openai.OpenAI(base_url=state.url, api_key=state.api_key, max_retries=0, timeout=600)
        for n, messages in enumerate(prompts):
            chunks = client.chat.completions.create(model=state.model, messages=messages, max_tokens=MAX_TOKENS,
                                                    temperature=0.0, stream=True, stop=STOP,
                                                    extra_body={"repeat_penalty": 1.1})  # fmt: skip
            result = timed(chunks, lambda c: c.choices[0].delta.content if c.choices else None)
            if n:
                served.append(result)

        url = f"http://127.0.0.1:{port}/api/v1/tenants/bench/answer/"

        def ask(question: str) -> tuple[float, float, int]:
            body = json.dumps({"question": question, "stream": True, "assistant": "greedy"}).encode()
            request = urllib.request.Request(url, data=body, method="POST", headers={
                "Authorization": f"Api-Key {raw_key}", "Content-Type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(request, timeout=600) as response:
                # Decode is timed from the first token to the last: the verification and the `done` event that
                # follow the last token are not decoding.
                return timed(response, lambda line: line.startswith(b"event: token"))

        def up() -> bool:
            try:
                ask("warm up")
                return True
            except OSError:
                return False

        wait_for(up, "gunicorn")
        api = [ask(question) for question in QUESTIONS]
    finally:
        for process in (server, supervisor):
            process.terminate()
            process.wait(timeout=60)

    med = statistics.median
    print(f"chat model: {Path(model_path).name}, {threads} thread(s), greedy, max {MAX_TOKENS} tokens, "
          f"{len(QUESTIONS)} questions; llama.cpp: {llama_cpp.llama_print_system_info().decode().strip()}")  # fmt: skip
    ttft_direct = med(r[0] for r in direct)
    print(f"prompt after the reused system prefix: median {med(prompt_tokens):.0f} tokens; ≈ "
          f"{med(prompt_tokens) / ttft_direct:.0f} tok/s to first token here, so ≈ {med(prompt_tokens) / 45:.1f} s "
          "on a machine that prefills 45 tok/s")  # fmt: skip
    for name, results in (("(a) direct llama-cpp-python", direct), ("(b) model server (HTTP)", served),
                          ("(c) product API (SSE)", api)):  # fmt: skip
        print(f"{name:<28}: TTFT median {med(r[0] for r in results) * 1000:7.0f} ms   decode median "
              f"{med(r[1] for r in results):5.1f} tok/s   tokens {[r[2] for r in results]}")  # fmt: skip
    for name, results in (("model server / direct", served), ("product API / direct", api)):
        print(f"{name:<22}: TTFT {med(r[0] for r in results) / ttft_direct:.2f}x, decode "
              f"{med(r[1] for r in results) / med(r[1] for r in direct):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
