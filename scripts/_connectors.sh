# Sourced by _venv.sh. The connectors (knowledge/ingest/dokuwiki.py, redmine.py, mailbox.py) are clients and need
# nothing installed; with CONNECTOR_TEST_SERVERS=1 (scripts/test.sh) this installs the real servers their tests start:
# Debian's DokuWiki with PHP's command-line server and its XML module, Debian's Redmine on SQLite (its package
# database answered ahead: SQLite, no questions) and Debian's Dovecot IMAP server. Installed when missing and this runs as root, otherwise a one-line
# hint (those tests are then skipped, saying why).
connectors_install() {
  [ "${CONNECTOR_TEST_SERVERS:-0}" = 1 ] || return 0
  local missing=""
  [ -f /usr/share/dokuwiki/doku.php ] || missing="dokuwiki"
  command -v php >/dev/null 2>&1 || missing="$missing php-cli"
  php -m 2>/dev/null | grep -qi '^xml$' || missing="$missing php-xml"
  [ -x /usr/share/redmine/bin/rails ] || missing="$missing redmine redmine-sqlite"
  [ -x /usr/sbin/dovecot ] || missing="$missing dovecot-imapd"
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf '%s\n' "redmine redmine/instances/default/database-type select sqlite3" \
      "redmine redmine/instances/default/dbconfig-install boolean true" | debconf-set-selections
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "The connectors' tests need: sudo apt-get install $missing" >&2
  fi
}
