#!/usr/bin/env bash
# Run the test suite from a fresh clone: creates .venv (once), installs the package with its test
# extras, and runs pytest. `--all` also runs the tests marked slow (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
if [ "${1:-}" = "--all" ]; then
  shift
  exec .venv/bin/python -m pytest -m "slow or not slow" "$@"
fi
exec .venv/bin/python -m pytest "$@"
