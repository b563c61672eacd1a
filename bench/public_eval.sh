#!/bin/bash
# Retrieval quality and latency on the public set (../shared/eval), from an empty data directory: the three corpora
# ingested as three sources of one tenant, then `manage.py evaluate` (recall@5, MRR@10, p50/p95 in-process).
#   bench/public_eval.sh [CODE_DIR] [CORPORA_DIR]     (defaults: this checkout, /srv/bench from get_corpus.sh)
# Run it on two checkouts (a `git worktree` of the base commit, and this one) to compare a change.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
CODE="${1:-$HERE}"
CORPORA="${2:-/srv/bench}"
PY="$HERE/.venv/bin/python"
cd "$CODE"
export RAG_DEBUG=true RAG_DATA_DIR="$(mktemp -d)"
"$PY" manage.py migrate -v0
"$PY" manage.py create_tenant bench --name Bench >/dev/null
for corpus in flask-docs click-code es-docs; do
  "$PY" manage.py ingest bench "$CORPORA/$corpus" --source "$corpus" 2>&1 | grep -v " INFO " | tail -1
done
"$PY" manage.py evaluate bench "$HERE/../shared/eval/questions.jsonl" --methods dense,lexical,hybrid 2>&1 | grep -v " INFO "
