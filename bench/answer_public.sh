#!/bin/bash
# Answers on the public set through the real server: the three corpora ingested as three sources of one tenant,
# the model server (`manage.py llm_serve`, the packaged chain unless RAG_LLM_MODEL_PATH or RAG_LLM_URL says
# otherwise) and gunicorn started, then ../shared/eval/answer_eval.py and bench/eval_halves.py.
#   bench/answer_public.sh OUT_DIR [CODE_DIR] [CORPORA_DIR]
# OUT_DIR gets answers.jsonl (one line per question), summary.json and halves.md. Run it on a `git worktree` of
# another commit (CODE_DIR) to compare; nothing else should run on the machine meanwhile.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
CODE="${2:-$HERE}"
CORPORA="${3:-/srv/bench}"
PY="$HERE/.venv/bin/python"
PORT="${PORT:-8765}"
source "$HERE/bench/_serve.sh"
bench_tenant "$CODE" "$CORPORA" flask-docs click-code es-docs
serve_answers "$OUT"
"$PY" "$HERE/../shared/eval/answer_eval.py" --base-url "http://127.0.0.1:$PORT" --api-key "$KEY" --tenant bench \
  --endpoints answer --timeout 300 --out "$OUT/answers.jsonl" --json "$OUT/summary.json" | tee "$OUT/table.md" || true
"$PY" "$HERE/bench/eval_halves.py" "$OUT/answers.jsonl" | tee "$OUT/halves.md"
