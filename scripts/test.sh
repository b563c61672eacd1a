#!/usr/bin/env bash
# Install ragsite with its test tools and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="[test]"
source scripts/_venv.sh
exec "$VENV/bin/python" -m pytest "$@"
