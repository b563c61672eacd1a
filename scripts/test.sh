#!/usr/bin/env bash
# Install ragsite with its test tools and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="[test]"
export IDENTITY_TEST_SERVERS=1  # scripts/_identity.sh: node, npm and slapd for the identity tests' real servers
export CONNECTOR_TEST_SERVERS=1  # scripts/_connectors.sh: DokuWiki and PHP for the connectors' real servers
source scripts/_venv.sh
# Browser tests drive Debian's Chromium (Playwright's own browser download does not work offline).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "Browser tests need Debian's chromium: sudo apt-get install chromium chromium-driver" >&2
  fi
fi
# Style and layering first: they take seconds and fail before the suite does.
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/lint-imports"
# Types: mypy with the Django and DRF plugins (they load the settings, hence a throwaway debug configuration).
RAG_DEBUG=true RAG_DATA_DIR="$(mktemp -d)" "$VENV/bin/mypy"
# The suite runs twice: on the embedded defaults, and on the production configuration (PostgreSQL, Redis as
# broker and cache, the Qdrant-server code path against qdrant-client's in-process server API, since no Qdrant
# server binary installs here). RAG_TEST_CONFIGS=embedded (or production) runs one of them.
CONFIGS="${RAG_TEST_CONFIGS:-embedded production}"
# Two lanes a configuration: the tests that start no process (no Chromium, gunicorn or model) first, for a quick
# answer, then the others (tests/conftest.py marks them `process`). Both run; the status is the worse of the two.
run_lanes() {
  local lane_status=0
  echo "-- fast lane (no process started)"
  "$VENV/bin/python" -m pytest -m "not process" "$@" || { s=$?; [ "$s" = 5 ] || lane_status=$s; }
  echo "-- process lane (Chromium, gunicorn, the model server, packaged models)"
  "$VENV/bin/python" -m pytest -m process "$@" || { s=$?; [ "$s" = 5 ] || lane_status=$s; }
  return $lane_status
}
status=0
for config in $CONFIGS; do
  case "$config" in
    embedded)
      echo "== embedded configuration: SQLite, Qdrant Edge, django-q2 on the ORM broker"
      run_lanes "$@" || status=$?
      ;;
    production)
      source scripts/_services.sh
      services_start
      echo "== production configuration: PostgreSQL, Redis (broker and cache), the Qdrant client path"
      DATABASE_URL="$RAG_TEST_DATABASE_URL" REDIS_URL="$RAG_TEST_REDIS_URL" RAG_TEST_QDRANT_URL=":memory:" \
        run_lanes "$@" || status=$?
      ;;
    *) echo "Unknown configuration $config (embedded, production)" >&2; exit 2 ;;
  esac
done
exit $status
