#!/usr/bin/env bash
# gemm_rs_device.sh — one device call for GEMM+RS/AR: build the committed tree (a tarball made
# here with `git archive HEAD -o build/gemm_rs_head.tar`, carried with this script), run the GPU
# test, the bench (QUICK=--quick for the short one) and the torch async-TP peer; logs in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-unknown} BENCH_RUN=${BENCH_RUN:-}
QUICK=${QUICK-}
t0=$(date +%s)
# Build the committed tree (HEAD as a tarball), not the shared working tree's WIP files.
SRC=/tmp/gemm_rs_src; rm -rf $SRC; mkdir -p $SRC; tar -xf build/gemm_rs_head.tar -C $SRC; cd $SRC
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
make -j16 lib build/tests/gpu/test_gemm_rs build/bench/bench_gemm_rs > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
if [ "${SKIP_TEST:-0}" = 0 ]; then
MELD_TIMEOUT_MS=3000 timeout -k 5 ${TEST_TIMEOUT_S:-110} build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1; echo "rc=$?" >> "$OUT/test_gemm_rs.log"
grep -E "FAIL|PASSED|FAILED|rc=|worst|missing|mismatch|ranks\)|test_gemm_rs:" "$OUT/test_gemm_rs.log" | head -70
fi
echo "t: $(( $(date +%s) - t0 )) s"
d=2026-11-30
timeout -k 5 ${BENCH_TIMEOUT_S:-90} build/bench/bench_gemm_rs $QUICK --json "$OUT/gemm_rs-$d.jsonl" > "$OUT/bench_gemm_rs.log" 2>&1; echo "bench rc=$?"
cat "$OUT/bench_gemm_rs.log" | grep -v "^\[" | head -60
echo "t: $(( $(date +%s) - t0 )) s"
if [ "${SKIP_TORCH:-0}" = 0 ]; then
timeout -k 5 ${TORCH_TIMEOUT_S:-70} torchrun --nproc_per_node=$(nvidia-smi -L | wc -l) bench/gemm_rs_torch.py $QUICK --json "$OUT/torch-$d.jsonl" > "$OUT/torch.log" 2>&1; echo "torch rc=$?"
grep -E "gemm_rs|Error|error" "$OUT/torch.log" | head -12
fi
echo "total: $(( $(date +%s) - t0 )) s"
