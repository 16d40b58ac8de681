#!/usr/bin/env bash
# coll_device.sh — one device call for the collectives: build only what they need (the
# committed host sources and collectives.cu: other ops' work in progress stays out), run
# test_coll, then bench_coll. Logs and JSON land in $OUT. Usage: bench/coll_device.sh [bench args]
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
grep -v "WARN.*MELD_COMMIT" "$OUT/test_coll.log" | tail -30
timeout -k 5 ${BENCH_TIMEOUT_S:-160} build/coll/bench/bench_coll --quick --json "$OUT/coll.jsonl" "$@" > "$OUT/bench_coll.log" 2>&1
echo "bench rc=$?"
grep -v "WARN.*MELD_COMMIT" "$OUT/bench_coll.log"
echo "total: $(( $(date +%s) - t0 )) s"
