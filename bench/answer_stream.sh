#!/bin/bash
# Time to the first verified sentence and to the whole answer, streamed through the real server of a checkout:
# flask-docs ingested into a fresh data directory, the model server and gunicorn started, bench/answer_stream.py run.
#   bench/answer_stream.sh [CODE_DIR] [CORPORA_DIR] [N]
# Run it on a `git worktree` of another commit, then on this one, back to back, nothing else running.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
CODE="${1:-$HERE}"
CORPORA="${2:-/srv/bench}"
N="${3:-12}"
PY="$HERE/.venv/bin/python"
PORT="${PORT:-8766}"
source "$HERE/bench/_serve.sh"
bench_tenant "$CODE" "$CORPORA" flask-docs
LOGS="$RAG_DATA_DIR/logs"
mkdir -p "$LOGS"
serve_answers "$LOGS"
echo "== $(git -C "$CODE" log -1 --format='%h %s' | cut -c1-80)"
"$PY" "$HERE/bench/answer_stream.py" --base-url "http://127.0.0.1:$PORT" --api-key "$KEY" --tenant bench --n "$N"
