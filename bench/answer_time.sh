#!/bin/bash
# The time questions (issue 48) through the real server: bench/time_corpus.py's fixtures ingested as three sources
# of the tenant "bench" (policies synced twice, so edited files have two versions; a git repository with dated
# commits), the model server and gunicorn started, then bench/score_time.py.
#   bench/answer_time.sh OUT_DIR [CODE_DIR]
# Run it on a `git worktree` of another commit (CODE_DIR) to compare; nothing else should run meanwhile.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
CODE="${2:-$HERE}"
PY="$HERE/.venv/bin/python"
PORT="${PORT:-8766}"
source "$HERE/bench/_serve.sh"
CORPUS="$(mktemp -d)"
"$PY" "$HERE/bench/time_corpus.py" "$CORPUS" 1
cd "$CODE"
export RAG_DEBUG=true RAG_DATA_DIR="${RAG_DATA_DIR:-$(mktemp -d)}" PORT RAG_LLM_PRELOAD=true
"$PY" manage.py migrate -v0
"$PY" manage.py create_tenant bench --name Bench >/dev/null
for source in policies handbook company-b; do
  "$PY" manage.py ingest bench "$CORPUS/$source" --source "$source" 2>&1 | grep -v " INFO " | tail -1
done
for repo in order-service billing-service; do
  "$PY" manage.py ingest bench "$CORPUS/$repo" --source "$repo" --kind git 2>&1 | grep -v " INFO " | tail -1
done
sleep 2  # the edits come a moment after the first versions
"$PY" "$HERE/bench/time_corpus.py" "$CORPUS" 2
for source in policies company-b; do
  "$PY" manage.py ingest bench "$CORPUS/$source" --source "$source" 2>&1 | grep -v " INFO " | tail -1
done
KEY="$("$PY" manage.py create_api_key bench --scope read | tail -1)"
serve_answers "$OUT"
"$PY" "$HERE/bench/score_time.py" --base-url "http://127.0.0.1:$PORT" --api-key "$KEY" --out "$OUT" | tee "$OUT/table.md"
# The fresh held-out set: written after the method, run once (bench/data/time/README.md).
"$PY" "$HERE/bench/score_time.py" --base-url "http://127.0.0.1:$PORT" --api-key "$KEY" --out "$OUT/fresh" \
  --questions "$HERE/bench/data/time/fresh.jsonl" | tee "$OUT/fresh.md"
