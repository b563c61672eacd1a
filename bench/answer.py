"""Answer latency: time-to-first-token and tokens/s through the API versus llama-cpp-python directly.

    python bench/answer.py [--model PATH]      # default: the packaged Qwen2.5-Coder 1.5B Instruct

Ingests ragsite's own docs/ into a throw-away tenant, starts gunicorn, then for each question:
(a) POST /api/v1/tenants/bench/answer/ with "stream": true (the SSE path an agent or the chat uses),
(b) the very same focused, grounded prompt sent straight to llama_cpp.Llama.create_chat_completion
    on one loaded Llama (which, like the server, reuses the KV state of the shared system prefix).
Both greedy (temperature 0) with the same max_tokens, so they generate the same tokens. The ratio
of the medians is our overhead (retrieval, focusing, prompt building, HTTP, SSE) less what the
reused system prefix saves. It also prints the prompt size and the machine's prefill rate, so a
first-token time can be projected onto a slower machine (tokens / its prefill rate).
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

QUESTIONS = [
    "How do I load a folder of documents into a tenant?",
    "Which variable switches the database to PostgreSQL?",
    "What does index_check --repair do?",
    "How are API keys stored?",
    "What happens when the chat model fails to load?",
]
MAX_TOKENS = 96


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", help="a chat GGUF (default: the packaged default chat model)")
    args = parser.parse_args()
    data_dir = setup()
    from django.conf import settings
    from django.core.management import call_command

    from chat.models import Assistant
    from chat.services import AnswerSettings, focused_prompt, prepare
    from inference.llm import STOP, load_model, pick_threads
    from inference.packaged import packaged_llm_path
    from tenants.services import api_key_issue, tenant_create

    model_path = args.model or str(packaged_llm_path())
    os.environ["RAG_LLM_MODEL_PATH"] = model_path  # the server started below uses the same model

    root = Path(__file__).resolve().parent.parent
    tenant = tenant_create(slug="bench")
    call_command("ingest", "bench", str(root / "docs"), "--source", "docs", verbosity=0)
    Assistant.objects.create(tenant=tenant, name="greedy", temperature=0.0, max_tokens=MAX_TOKENS)
    raw_key = api_key_issue(tenant=tenant)[1]
    threads = pick_threads(settings.RAG_LLM_THREADS)

    # (b) direct: the same prompts, built here, sent straight to llama-cpp-python.
    direct_ttft, direct_rate, prompt_tokens = [], [], []
    options = AnswerSettings(temperature=0.0, max_tokens=MAX_TOKENS)
    model = load_model(model_path, threads=threads, n_ctx=settings.RAG_LLM_CONTEXT)
    for question in ["warm up", *QUESTIONS]:  # the first, untimed, evaluates the system prefix as the server does
        sources = prepare(tenant=tenant, question=question, options=options)
        prompt, _ = focused_prompt(question, sources, options, model.count_tokens, model.n_ctx - MAX_TOKENS - 64)
        prompt_tokens.append(model.count_tokens(prompt.messages[-1]["content"]))  # after the reused system prefix
        started = time.perf_counter()
        first, count = None, 0
        for chunk in model.llama.create_chat_completion(
            messages=prompt.messages, max_tokens=MAX_TOKENS, temperature=0.0, stream=True, repeat_penalty=1.1,
            stop=STOP,
        ):  # fmt: skip
            if chunk["choices"][0].get("delta", {}).get("content"):
                count += 1
                first = first or time.perf_counter()
        end = time.perf_counter()
        if question != "warm up":
            direct_ttft.append((first - started) * 1000)
            direct_rate.append((count - 1) / (end - first) if count > 1 else 0.0)
    del model
    from knowledge.vectorstore import reset_store

    reset_store()

    # (a) through the API, streamed.
    port = 8798
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "PORT": str(port), "RAG_DEBUG": "true"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config", "ragsite/gunicorn_conf.py",
         "--access-logfile", "/dev/null"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    api_ttft, api_rate = [], []
    try:
        url = f"http://127.0.0.1:{port}/api/v1/tenants/bench/answer/"

        def ask(question: str) -> tuple[float, float]:
            body = json.dumps({"question": question, "stream": True, "assistant": "greedy"}).encode()
            request = urllib.request.Request(url, data=body, method="POST", headers={
                "Authorization": f"Api-Key {raw_key}", "Content-Type": "application/json"})  # fmt: skip
            started = time.perf_counter()
            first, last, count = None, None, 0
            with urllib.request.urlopen(request, timeout=300) as response:
                for line in response:
                    if line.startswith(b"event: token"):
                        count += 1
                        last = time.perf_counter()
                        first = first or last
            # Decode is timed from the first token to the last, as on the direct side: the verification and
            # the `done` event that follow the last token are not decoding.
            return (first - started) * 1000, (count - 1) / (last - first) if count > 1 else 0.0

        for _ in range(60):
            try:
                ask("warm up")
                break
            except OSError:
                time.sleep(1)
        for question in QUESTIONS:
            ttft, rate = ask(question)
            api_ttft.append(ttft)
            api_rate.append(rate)
    finally:
        server.terminate()
        server.wait(timeout=30)

    med = statistics.median
    setup_line = f"{threads} thread(s), greedy, max {MAX_TOKENS} tokens, {len(QUESTIONS)} questions"
    print(f"chat model: {Path(model_path).name}, {setup_line}")
    rate = med(prompt_tokens) / (med(direct_ttft) / 1000)
    print(f"prompt after the reused system prefix: median {med(prompt_tokens):.0f} tokens (focused excerpts + "
          f"question); ≈ {rate:.0f} tok/s to first token here, so ≈ {med(prompt_tokens) / 45:.1f} s on a machine "
          f"that prefills 45 tok/s")  # fmt: skip
    for name, ttft, rate in (
        ("direct llama-cpp-python", direct_ttft, direct_rate),
        ("API (SSE, retrieval incl.)", api_ttft, api_rate),
    ):
        print(f"{name:<27}: TTFT median {med(ttft):7.0f} ms   decode median {med(rate):5.1f} tok/s")
    print(
        f"overhead ratio: TTFT {med(api_ttft) / med(direct_ttft):.2f}x, decode {med(api_rate) / med(direct_rate):.2f}x"
    )


if __name__ == "__main__":
    main()
