# Sourced by the answer benches (HERE: this checkout; PY: its venv's python).

# bench_tenant CODE_DIR CORPORA_DIR CORPUS...: in CODE_DIR, on a fresh data directory (RAG_DATA_DIR, or a new one),
# the tenant "bench" with one source per corpus, and a read key in $KEY.
bench_tenant() {
  local code="$1" corpora="$2"
  shift 2
  cd "$code"
  export RAG_DEBUG=true RAG_DATA_DIR="${RAG_DATA_DIR:-$(mktemp -d)}" PORT RAG_LLM_PRELOAD=true
  "$PY" manage.py migrate -v0
  "$PY" manage.py create_tenant bench --name Bench >/dev/null
  for corpus in "$@"; do
    "$PY" manage.py ingest bench "$corpora/$corpus" --source "$corpus" 2>&1 | grep -v " INFO " | tail -1
  done
  KEY="$("$PY" manage.py create_api_key bench --scope read | tail -1)"
}

# serve_answers LOG_DIR: start the model server (unless RAG_LLM_URL is set) and gunicorn for the checkout
# in the current directory, logs under $1, and wait until the chat model is ready. Stopped when the script exits.
serve_answers() {
  local logs="$1"
  PIDS=()
  trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
  if [ -z "${RAG_LLM_URL:-}" ]; then
    "$PY" manage.py llm_serve >"$logs/llm.log" 2>&1 &
    PIDS+=($!)
  fi
  "$HERE/.venv/bin/gunicorn" ragsite.wsgi --config ragsite/gunicorn_conf.py >"$logs/web.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do
    curl -fs "http://127.0.0.1:$PORT/healthz" 2>/dev/null | grep -q '"state": "ready"' && return 0
    sleep 1
  done
  echo "the server or the chat model did not come up (logs in $logs)" >&2
  return 1
}
