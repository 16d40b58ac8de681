#!/usr/bin/env bash
# run.sh SUITE BIN... — runs test programs (cmocka or tests/gpu/gpu_test.h, which print the
# same "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" lines), each under a time limit,
# and sums them. Writes "passed failed" to build/tests/summary-SUITE and prints a line.
set -u
suite=$1; shift
mkdir -p build/tests
passed=0; failed=0
for bin in "$@"; do
  log=$(mktemp)
  timeout -k 5 ${TEST_TIMEOUT_S:-300} "$bin" >"$log" 2>&1
  rc=$?
  cat "$log"
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "[  FAILED  ] 1 test(s): $bin exited with status $rc"
    f=1
  fi
  passed=$((passed + p)); failed=$((failed + f))
  rm -f "$log"
done
echo "$passed $failed" > build/tests/summary-$suite
echo "== $suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
