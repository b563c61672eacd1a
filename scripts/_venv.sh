# Sourced by up.sh and test.sh: a virtual environment in .venv with the project installed.
# llama-cpp-python compiles llama.cpp from source the first time (6-10 minutes on 2 cores), for the fleet
# rather than this CPU, into a wheel directory of ours keyed by its flags (_llama.sh); later installs take seconds.
VENV="${RAG_VENV:-$PWD/.venv}"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "ragsite needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi
# A venv whose creation was interrupted (no pip in it) is made again, not reused.
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  "$PYTHON" -m venv --clear "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
source "$(dirname "${BASH_SOURCE[0]}")/_ocr.sh"
ocr_install || echo "Installing Tesseract failed; scanned PDFs will be recorded as needing OCR." >&2
source "$(dirname "${BASH_SOURCE[0]}")/_apertium.sh"
apertium_install || echo "Installing Apertium failed; Spanish questions will not be glossed into English." >&2
source "$(dirname "${BASH_SOURCE[0]}")/_identity.sh"
identity_install || echo "Installing xmlsec1 failed; SAML sign-in will be refused until it is installed." >&2
source "$(dirname "${BASH_SOURCE[0]}")/_connectors.sh"
connectors_install || echo "Installing the connectors' test servers failed; their tests will be skipped." >&2
source "$(dirname "${BASH_SOURCE[0]}")/_llama.sh"
# Before the project: its requirement is then already met, so pip never builds (or reuses) a native wheel.
llama_install "$VENV" || exit 1
# The CPU build of torch is never needed; nothing here pulls it.
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".${EXTRAS:-}" >"$VENV/pip-install.log" 2>&1; then
  cat "$VENV/pip-install.log" >&2
  echo "Installing ragsite failed (log above, also in $VENV/pip-install.log)." >&2
  exit 1
fi
# The pages' translations (locale/<language>/LC_MESSAGES/*.po, docs/languages.md): compiled here with GNU gettext's
# msgfmt (Debian's gettext, installed when missing and this runs as root); without it the pages stay in English.
if ! command -v msgfmt >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext >/dev/null || true
fi
if command -v msgfmt >/dev/null 2>&1; then
  RAG_DEBUG=true RAG_DATA_DIR="$(mktemp -d)" "$VENV/bin/python" manage.py compilemessages --ignore=.venv -v0
else
  echo "The pages stay in English: compiling their translations needs msgfmt (sudo apt-get install gettext)." >&2
fi
