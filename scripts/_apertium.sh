# Sourced by _venv.sh: Apertium with its Spanish–English pair, which glosses a Spanish question into English for the
# English legs of a retrieve (inference/translation.py). Debian's packages; installed when missing and this runs as
# root, otherwise a one-line hint (Spanish questions are then not glossed; everything else works).
apertium_install() {
  command -v apertium >/dev/null 2>&1 && [ -e /usr/share/apertium/modes/spa-eng.mode ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apertium apertium-eng-spa >/dev/null
  else
    echo "Glossing Spanish questions into English needs: sudo apt-get install apertium apertium-eng-spa" >&2
  fi
}
