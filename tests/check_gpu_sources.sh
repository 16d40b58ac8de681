#!/usr/bin/env bash
# check_gpu_sources.sh — the GPU tests' and benchmarks' sources (tests/gpu/*.cu, bench/*.cu,
# which only a GPU machine builds) through nvcc -cuda (parsing, type checks and the device code,
# no host object or link; ~1-2 s a file), so that a changed internal signature breaks `make test` here
# instead of the next GPU call (session 40 broke test_ag_gemm's build unseen). Prints tests/run.sh's
# "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" lines. Usage: tests/check_gpu_sources.sh NVCC_FLAGS...
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
for f in tests/gpu/*.cu bench/*.cu; do
  inc=-Itests; case "$f" in bench/*) inc=-Ibench ;; esac
  if "$NVCC" -cuda "$@" "$inc" "$f" -o "$tmp/out.ii" > "$tmp/log" 2>&1; then pass=$((pass + 1))
  else echo "FAILED: $f"; grep -E "error" "$tmp/log" | head -5; fail=$((fail + 1)); fi
done
echo "[  PASSED  ] $pass test(s). (GPU test and benchmark sources compile: nvcc -cuda)"
[ "$fail" -eq 0 ] || echo "[  FAILED  ] $fail test(s)"
[ "$fail" -eq 0 ]
