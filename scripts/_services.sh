# Sourced by scripts/test.sh: PostgreSQL and Redis for the production-configuration run of the suite.
# Installs Debian's packages when missing (as root), starts them when not running, and creates the
# `ragsite` role (CREATEDB, so pytest-django can create its test database). Exports RAG_TEST_DATABASE_URL
# and RAG_TEST_REDIS_URL for the production run; a failure here fails the tests (nothing is skipped).

PG_USER=ragsite
PG_PASSWORD=ragsite
export RAG_TEST_DATABASE_URL="${RAG_TEST_DATABASE_URL:-postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:5432/ragsite}"
export RAG_TEST_REDIS_URL="${RAG_TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"  # db 15: tests flush it

_as_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "The production-configuration tests need PostgreSQL and Redis running (or root to install them):" >&2
    echo "  sudo apt-get install postgresql redis-server   # or set RAG_TEST_DATABASE_URL / RAG_TEST_REDIS_URL" >&2
    return 1
  fi
}

services_start() {
  local missing=()
  command -v pg_ctlcluster >/dev/null 2>&1 || missing+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  if [ ${#missing[@]} -gt 0 ]; then
    _as_root || return 1
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    _as_root || return 1
    local version
    version=$(ls /usr/lib/postgresql | sort -V | tail -1)
    pg_lsclusters -h | awk '{print $1, $2}' | grep -q "^$version main$" || pg_createcluster "$version" main >/dev/null
    pg_ctlcluster "$version" main start
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- psql -q -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER'" | grep -q 1 ||
      runuser -u postgres -- psql -q -c "CREATE ROLE $PG_USER LOGIN PASSWORD '$PG_PASSWORD' CREATEDB"
    runuser -u postgres -- psql -q -tAc "SELECT 1 FROM pg_database WHERE datname = 'ragsite'" | grep -q 1 ||
      runuser -u postgres -- createdb -O "$PG_USER" ragsite
  fi
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    _as_root || return 1
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
    for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.5; done
  fi
}
