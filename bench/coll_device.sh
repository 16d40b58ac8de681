#!/usr/bin/env bash
# coll_device.sh — one device call for the collectives: build only what they need (the
# committed host sources and collectives.cu: other ops' work in progress stays out), run
# test_coll, then bench_coll. Logs and JSON land in $OUT.
# Usage: bench/coll_device.sh [bench args]   (default: --quick; "--s2": the session-2 sweep,
# sizes up to 1 GB; "--zc": the ZC engine on symmetric buffers, up to 1 GB; SHARED_TESTS=1 also builds the full library and runs test_signal,
# test_abort and test_ag_gemm, for changes to the shared device headers)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MELD_TIMEOUT_MS=${MELD_TIMEOUT_MS:-3000}
t0=$(date +%s)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1; nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
HS=$(ls src/host/*.c | grep -v gemm | tr '\n' ' ')
make -j16 BUILD=build/coll HOST_SRCS="$HS" CU_SRCS=src/ops/collectives.cu \
  build/coll/tests/gpu/test_coll build/coll/bench/bench_coll > "$OUT/build.log" 2>&1 \
  || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
timeout -k 5 ${TEST_TIMEOUT_S:-100} build/coll/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "rc=$?" >> "$OUT/test_coll.log"
grep -v "WARN.*MELD_COMMIT" "$OUT/test_coll.log" | tail -12
echo "test done: $(( $(date +%s) - t0 )) s"
if [ "${1:-}" = "--s2" ] || [ "${1:-}" = "--zc" ]; then ARGS=("$@"); else ARGS=(--quick "$@"); fi
timeout -k 5 ${BENCH_TIMEOUT_S:-160} build/coll/bench/bench_coll "${ARGS[@]}" --json "$OUT/coll.jsonl" > "$OUT/bench_coll.log" 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s"
if [ "${S2BULK:-0}" = 1 ]; then  # the opt-in bulk RING in its own processes (a failure cannot abort the sweep's comm)
  TEST_COLL_ONLY=bulk timeout -k 5 60 build/coll/tests/gpu/test_coll > "$OUT/test_coll_bulk.log" 2>&1
  echo "test_coll (bulk variants) rc=$?" | tee -a "$OUT/test_coll_bulk.log"; tail -4 "$OUT/test_coll_bulk.log"
  timeout -k 5 ${BULK_TIMEOUT_S:-60} build/coll/bench/bench_coll --s2bulk --json "$OUT/coll_bulk.jsonl" > "$OUT/bench_bulk.log" 2>&1
  echo "bulk bench rc=$? at $(( $(date +%s) - t0 )) s"
fi
if [ "${SHARED_TESTS:-0}" = 1 ]; then
  make -j16 lib build/tests/gpu/test_signal build/tests/gpu/test_abort build/tests/gpu/test_ag_gemm > "$OUT/build_shared.log" 2>&1 \
    || { grep -E "error" "$OUT/build_shared.log" | head -20; }
  for t in test_signal test_abort test_ag_gemm; do
    timeout -k 5 100 build/tests/gpu/$t > "$OUT/$t.log" 2>&1; echo "$t rc=$?" | tee -a "$OUT/$t.log"
  done
fi
grep -v "WARN.*MELD_COMMIT" "$OUT/bench_coll.log" | tail -${TAIL_LINES:-400}
echo "total: $(( $(date +%s) - t0 )) s"
