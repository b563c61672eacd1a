#!/usr/bin/env bash
# Install ragsite with its test tools and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="[test]"
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
exec "$VENV/bin/python" -m pytest "$@"
