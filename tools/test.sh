#!/usr/bin/env bash
# Run the test suite from a fresh clone: creates .venv (once), installs the package with its test
# extras, and runs pytest on every core (pytest-xdist; TEST_WORKERS=1 for one process).
#   bash tools/test.sh            the default run: every test not marked slow   (budget 3 minutes, 2 cores)
#   bash tools/test.sh --all      also the slow ones, as CI does                  (budget 30 minutes)
#                                 (the tests marked realtime run after the rest, one at a time, with
#                                 the machine to themselves: a live 250 Hz dataflow on 2 cores beside
#                                 another test worker measures the machine, not the code)
# Extra arguments go to pytest (e.g. a test file, -k EXPR, -x). The slowest 15 tests and the wall
# time against the budget are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/env.sh
select=()
realtime=0
budget=180
if [ "${1:-}" = "--all" ]; then
  shift
  select=(-m "not realtime")
  realtime=1
  budget=1800
  export OPENARM_TEST_ALL=1  # the fuzz tests' full example counts (tests/conftest.py: FUZZ_EXAMPLES)
fi
# compiled modules are cached (pytest's rewritten tests too): a run, and each process it starts, then
# skips compiling from source; the environment here sets PYTHONDONTWRITEBYTECODE, which forbids that
unset PYTHONDONTWRITEBYTECODE
workers="${TEST_WORKERS:-$(nproc)}"
parallel=()
if [ "$workers" -gt 1 ]; then
  parallel=(-n "$workers" --dist loadgroup)
fi
start=$(date +%s)
set +e
.venv/bin/python -m pytest "${select[@]}" "${parallel[@]}" --durations=15 "$@"
rc=$?
if [ "$realtime" = 1 ]; then
  echo "tools/test.sh: the realtime tests, alone on the machine"
  .venv/bin/python -m pytest -m realtime -n 0 --durations=5 "$@"
  rt=$?
  [ "$rt" = 5 ] && rt=0  # none selected (a file or -k that excludes them)
  [ "$rc" != 0 ] || rc=$rt
fi
set -e
wall=$(( $(date +%s) - start ))
verdict="within"
[ "$wall" -le "$budget" ] || verdict="OVER"
echo "tools/test.sh: ${wall} s wall on $(nproc) core(s), ${workers} worker(s): ${verdict} the ${budget} s budget of this run"
exit "$rc"
