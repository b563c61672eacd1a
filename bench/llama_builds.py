"""llama.cpp builds side by side: prefill and decode tokens/s of each wheel on this machine, same model and prompt.

    python bench/llama_builds.py [--model PATH] WHEEL_OR_DIR...   # default: the portable wheel of scripts/_llama.sh

Each wheel is unpacked into its own directory and run in a child process (a build that faults kills only its
child, and the table says how). Greedy, the model server's settings (all cores, context 4096, batch 512); each
figure is the median of --runs runs after one untimed warm-up. Build the variants to compare with, e.g.:

    CMAKE_ARGS="-DGGML_NATIVE=ON" .venv/bin/pip wheel --no-cache-dir --no-binary llama-cpp-python --no-deps \\
        -w /tmp/native llama-cpp-python==0.3.36
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = (
    "Summarise the following policy for a new employee in five bullet points.\n\n"
    + "Every product carries a two year warranty; claims need the original receipt and the serial number. "
    "Returns are accepted within thirty days of purchase, unused and in the original packaging. " * 12
)
CHILD = r"""
import json, os, statistics, sys, time
import llama_cpp
model, runs = sys.argv[1], int(sys.argv[2])
threads = os.cpu_count()
info = llama_cpp.llama_print_system_info().decode().strip()
print(json.dumps({"info": info}), flush=True)
llama = llama_cpp.Llama(model_path=model, n_ctx=4096, n_batch=512, n_threads=threads, n_threads_batch=threads,
                        logits_all=False, verbose=False)
prompt = sys.stdin.read()
tokens = llama.tokenize(prompt.encode(), add_bos=True)
prefill, decode = [], []
for n in range(runs + 1):
    llama.reset()
    started = time.perf_counter()
    llama.eval(tokens)
    evaluated = time.perf_counter()
    out = llama.create_completion(prompt, max_tokens=64, temperature=0.0)  # the prompt is cached: decode only
    done = time.perf_counter()
    if n:
        prefill.append(len(tokens) / (evaluated - started))
        decode.append(out["usage"]["completion_tokens"] / (done - evaluated))
print(json.dumps({"prompt_tokens": len(tokens), "prefill": statistics.median(prefill),
                  "decode": statistics.median(decode)}), flush=True)
"""


def unpack(wheel: Path, into: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    for library in (into / "llama_cpp" / "lib").glob("*.so*"):
        library.chmod(0o755)


def measure(wheel: Path, model: str, runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="llama-build-") as target:
        unpack(wheel, Path(target))
        env = {**os.environ, "PYTHONPATH": target}
        done = subprocess.run([sys.executable, "-c", CHILD, model, str(runs)], input=PROMPT, env=env,
                              capture_output=True, text=True, timeout=1800)  # fmt: skip
    result: dict[str, object] = {}
    for line in done.stdout.splitlines():
        result.update(json.loads(line))
    if done.returncode != 0:
        how = f"killed by {signal.Signals(-done.returncode).name}" if done.returncode < 0 else f"exit {done.returncode}"
        result["failed"] = f"{how}: {(done.stderr.strip().splitlines() or [''])[-1][:120]}"
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wheels", nargs="*", help="wheels, or directories holding one")
    parser.add_argument("--model", help="a GGUF (default: the packaged Qwen2.5-Coder 1.5B Instruct)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from _django import setup

    setup()
    from inference.packaged import packaged_llm_path
    from inference.runtime import cpu_flags

    model = args.model or str(packaged_llm_path())
    portable = subprocess.run(["bash", "-c", "source scripts/_llama.sh; llama_wheel_dir"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    wheels = []
    for given in [portable, *args.wheels]:
        path = Path(given)
        wheels += sorted(path.glob("llama_cpp_python-*.whl")) if path.is_dir() else [path]
    print(
        f"model {Path(model).name}, {os.cpu_count()} threads; CPU advertises: "
        f"{' '.join(sorted(f for f in cpu_flags() if f.startswith(('avx512', 'amx', 'avx2', 'fma', 'f16c'))))}"
    )
    results = [(wheel, measure(wheel, model, args.runs)) for wheel in wheels]
    base = results[0][1]
    for wheel, result in results:
        label = wheel.parent.name
        if "failed" in result:
            print(f"{label:<44} FAILED ({result['failed']})\n{'':<44} {result.get('info', '')}")
            continue
        ratio = ""
        if "prefill" in base and wheel != results[0][0]:
            ratio = (f"  vs portable: prefill {result['prefill'] / base['prefill']:.2f}x, "
                     f"decode {result['decode'] / base['decode']:.2f}x")  # fmt: skip
        print(f"{label:<44} prefill {result['prefill']:6.1f} tok/s  decode {result['decode']:5.1f} tok/s{ratio}")
        print(f"{'':<44} {result['info']}")


if __name__ == "__main__":
    main()
