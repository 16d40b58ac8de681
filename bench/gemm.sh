#!/usr/bin/env bash
# bench/gemm.sh [OUTDIR] [COMMIT] — on a GPU machine: build the GEMM engine (a GEMM-only
# library: other sessions' files mid-edit cannot break it), its GPU test and benchmark; check
# the SASS/ptxas (HGMMA present, no local memory, no C75xx); run the test, then the benchmark.
# Logs and JSON lines go to OUTDIR (default bench/results).
#   GEMM_INCLUDE_FIRST=DIR  headers searched before src/ (e.g. a DIR/device/gemm.cuh to build)
#   BENCH_ARGS (default --variants), TEST_TIMEOUT (100), BENCH_TIMEOUT (150), SKIP_TEST=1,
#   BENCH_FALLBACK_SRC=FILE (an older bench_gemm.cu, run if the benchmark fails)
set -u
cd "$(dirname "$0")/.."
OUT=${1:-bench/results}
COMMIT=${2:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$OUT"
L="-L/usr/local/cuda/lib64 -Xlinker -rpath=/usr/local/cuda/lib64 -lcudart -lpthread -ldl -lm -lstdc++"
NVCC=/usr/local/cuda/bin/nvcc
INC="-Iinclude -Isrc -Isrc/host -I/usr/local/cuda/include"
[ -n "${GEMM_INCLUDE_FIRST:-}" ] && INC="-I$GEMM_INCLUDE_FIRST $INC"
NVFLAGS="-O3 -lineinfo -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC,-Wall,-Wextra -Werror all-warnings -Xptxas -warn-spills,-warn-lmem-usage -diag-suppress 177 $INC"
B=build/gemm_only
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
{
  mkdir -p $B build/tests/gpu build/bench
  for f in error log gemm_plan; do
    gcc -O2 -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -pthread $INC -c src/host/$f.c -o $B/$f.o || exit 1
  done
  $NVCC $NVFLAGS -Xptxas -v -c src/ops/gemm.cu -o $B/gemm.o > "$OUT/ptxas.log" 2>&1 || { cat "$OUT/ptxas.log"; exit 1; }
  rm -f $B/libmeld.a && ar rcs $B/libmeld.a $B/error.o $B/log.o $B/gemm_plan.o $B/gemm.o
  $NVCC $NVFLAGS -Itests tests/gpu/test_gemm.cu -o build/tests/gpu/test_gemm $B/libmeld.a -lcublas -lcublasLt $L &
  $NVCC $NVFLAGS -Xlinker -export-dynamic -Ibench bench/bench_gemm.cu -o build/bench/bench_gemm $B/libmeld.a -lcublas -lcublasLt $L &
  wait %1 && wait %2 || exit 1
  if [ -f "${BENCH_FALLBACK_SRC:-}" ]; then # an older bench, if the new one fails
    $NVCC $NVFLAGS -Ibench "$BENCH_FALLBACK_SRC" -o build/bench/bench_gemm_fallback $B/libmeld.a -lcublas -lcublasLt $L || true
  fi
  echo "built (GEMM-only library)"
} > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass $B/gemm.o > "$OUT/gemm.sass" 2>&1
  echo "SASS: $(grep -c HGMMA "$OUT/gemm.sass") HGMMA, $(grep -cE '\b(LDL|STL)\b' "$OUT/gemm.sass") local-memory instructions"
fi
grep -E "registers|spill|C75" "$OUT/ptxas.log"
if [ -z "${SKIP_TEST:-}" ]; then
  timeout -k 5 ${TEST_TIMEOUT:-100} build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
  echo "test_gemm exit $?"; grep -E "FAIL|PASSED|FAILED|checks" "$OUT/test_gemm.log" | head -40
fi
timeout -k 5 ${BENCH_TIMEOUT:-150} build/bench/bench_gemm ${BENCH_ARGS:---variants} --json "$OUT/gemm.jsonl" --commit "$COMMIT" > "$OUT/bench.log" 2>&1
rc=$?
echo "bench_gemm exit $rc"; cat "$OUT/bench.log"
if [ $rc -ne 0 ]; then
  tail -40 "$OUT/bench.log" >&2
  if [ -x build/bench/bench_gemm_fallback ]; then
    timeout -k 5 ${FALLBACK_TIMEOUT:-100} build/bench/bench_gemm_fallback ${FALLBACK_ARGS:-} --json "$OUT/gemm-fallback.jsonl" --commit "$COMMIT" > "$OUT/bench-fallback.log" 2>&1
    echo "bench_gemm_fallback exit $?"; cat "$OUT/bench-fallback.log"
  fi
fi
