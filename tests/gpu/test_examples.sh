#!/usr/bin/env bash
# test_examples.sh — the C examples as GPU tests (tests/gpu/run.sh runs it with the others): each
# built example (build/examples/*) under examples/run.sh at 1 rank and at 2 (sharing the GPU where
# there is one), each exiting 0 only when its own check passed (allreduce: exact sums, plain and
# from a CUDA graph; tp_mlp: the fused block within 1e-2 of the whole block). Prints tests/run.sh's
# "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" lines.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
for ex in build/examples/*; do
  [ -x "$ex" ] || continue
  for p in 1 2; do
    if MELD_TIMEOUT_MS=${MELD_TIMEOUT_MS:-20000} timeout -k 5 120 examples/run.sh "$p" "$ex"; then pass=$((pass + 1))
    else echo "FAILED: examples/run.sh $p $ex"; fail=$((fail + 1)); fi
  done
done
# (none built: a PREBUILT=1 run that did not carry build/examples; said, not failed)
[ $((pass + fail)) -gt 0 ] || echo "test_examples.sh SKIPPED: no built examples (make examples, or carry build/examples)"
echo "[  PASSED  ] $pass test(s)."
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s)"
[ "$fail" -eq 0 ]
