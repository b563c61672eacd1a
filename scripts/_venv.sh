# Sourced by up.sh and test.sh: a virtual environment in .venv with the project installed.
# llama-cpp-python compiles llama.cpp from source the first time (about 6 minutes on 2 cores);
# pip keeps the built wheel in its cache, so later installs take seconds.
VENV="${RAG_VENV:-$PWD/.venv}"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "ragsite needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
# The CPU build of torch is never needed; nothing here pulls it.
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".${EXTRAS:-}" >"$VENV/pip-install.log" 2>&1; then
  cat "$VENV/pip-install.log" >&2
  echo "Installing ragsite failed (log above, also in $VENV/pip-install.log)." >&2
  exit 1
fi
