# Sourced by _venv.sh: Debian's xmlsec1, which pysaml2 runs to check a SAML assertion's signature (identity/saml.py).
# With IDENTITY_TEST_SERVERS=1 (scripts/test.sh), also the real servers the identity tests start: node and npm (for
# the OpenID Provider, tests/identity/oidc_provider), OpenLDAP's slapd and its tools. Installed when missing and this
# runs as root, otherwise a one-line hint (SAML sign-in is then refused with a plain message; the rest works).
identity_install() {
  local missing=""
  command -v xmlsec1 >/dev/null 2>&1 || missing="xmlsec1"
  if [ "${IDENTITY_TEST_SERVERS:-0}" = 1 ]; then
    command -v node >/dev/null 2>&1 || missing="$missing nodejs"
    command -v npm >/dev/null 2>&1 || missing="$missing npm"
    [ -x /usr/sbin/slapd ] || missing="$missing slapd"
    command -v ldapadd >/dev/null 2>&1 || missing="$missing ldap-utils"
  fi
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "Single sign-on (and its tests) need: sudo apt-get install $missing" >&2
  fi
}
