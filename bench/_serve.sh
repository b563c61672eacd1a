# Sourced by the answer benches: start the model server (unless RAG_LLM_URL is set) and gunicorn for the checkout
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
