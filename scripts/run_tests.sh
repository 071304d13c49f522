#!/usr/bin/env bash
# `make test`: the whole suite as two groups running at the same time — unit + integration tests
# spread over pytest-xdist workers (POWERON_TEST_WORKERS, default 2; 4 shortened a run on two cores by 11 % but
# starves the lease and takeover tests of CPU; tests of one xdist_group stay on one
# worker, e.g. the scale-out cluster), and the browser tests in one
# process (they share one Reflex app and its .web/ folder). Each line is prefixed with its group;
# the exit status is the first failing group's (pytest's 5, "no tests collected", fails too).
# With arguments (`PYTEST_ARGS="-k workflow" make test`) it is one plain pytest run with them.
set -uo pipefail
cd "$(dirname "$0")/.."
pytest=.venv/bin/pytest
if [ $# -gt 0 ]; then
  exec "$pytest" "$@"
fi

run_group() {  # name, pytest arguments...
  local name=$1
  shift
  "$pytest" "$@" 2>&1 | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}

started=$SECONDS
run_group backend -n "${POWERON_TEST_WORKERS:-2}" --dist loadgroup --durations=30 tests/unit tests/integration &
backend=$!
run_group e2e --durations=15 tests/e2e &
e2e=$!
wait "$backend"; backend_status=$?
wait "$e2e"; e2e_status=$?
echo "make test: backend group exit ${backend_status}, e2e group exit ${e2e_status}, $((SECONDS - started)) s"
if [ "$backend_status" -ne 0 ]; then exit "$backend_status"; fi
exit "$e2e_status"
