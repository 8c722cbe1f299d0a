#!/usr/bin/env bash
# `make test`: the whole suite as two pytest runs side by side, then both results.
#
# Most of the suite keeps two cores busy only part of the time. The tests in BESIDE use about
# one core each (the notebooks under nbval, the browser, one training run or server at a time),
# so they run beside the rest (output in build/test-beside.log, printed at the end) instead of
# after it. The hostile class checks that nothing on the machine changed while it was graded,
# so it waits for the beside run to finish: the beside run holds an exclusive lock on
# build/test-beside.lock (tests/beside.py) until then.
#
#   scripts/run_tests.sh PYTHON [pytest arguments for both runs...]
set -uo pipefail
cd "$(dirname "$0")/.."
py="$1"
shift
BESIDE=(
  solutions
  tests/e2e/browser
  tests/e2e/test_hand_grading.py
  tests/unit/course/test_student_release.py
  tests/notebooks/test_nb06.py
  tests/notebooks/test_notebook_residual.py
)
lock=build/test-beside.lock
log=build/test-beside.log
mkdir -p build
rm -f "$log.rc"
export MPLBACKEND=Agg

exec 9>"$lock"
flock -x 9
(
  # nbval bounds each notebook cell (300 s); pytest-timeout's bound (pyproject) leaves it room
  "$py" -m pytest -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout=300 --timeout=600 \
    "${BESIDE[@]}" "$@" >"$log" 2>&1 9>&-
  echo $? >"$log.rc"
) &
beside=$!
exec 9>&- # the lock is now held by the beside run alone

ignore=()
for path in "${BESIDE[@]}"; do
  [[ $path == tests/* ]] && ignore+=("--ignore=$path")
done
"$py" -m pytest -q tests "${ignore[@]}" "$@"
main=$?
wait "$beside"
rc=$(cat "$log.rc" 2>/dev/null || echo 1)

echo
echo "==== beside: ${BESIDE[*]} (exit $rc) ===="
cat "$log"
if [ "$main" -ne 0 ] || [ "$rc" -ne 0 ]; then
  echo "make test: FAILED (the rest: exit $main; beside: exit $rc)"
  exit 1
fi
