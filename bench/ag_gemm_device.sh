#!/usr/bin/env bash
# ag_gemm_device.sh — one device call for AG+GEMM: build (in snap_ag if present: HEAD + this
# op's changes, isolated from others' work in progress; binaries prebuilt there are reused),
# CPU test, GPU test (2 ranks and 1 rank inside), bench at the 9 suite shapes, a traced run,
# then the torch async-TP baseline with whatever time is left. Everything lands in $OUT as at
# most 8 files. Usage: bench/ag_gemm_device.sh [quick|full]   (BUDGET_S: total seconds, 280)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mode=${1:-full}
budget=${BUDGET_S:-280}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
root=$PWD; [ -d snap_ag ] && cd snap_ag
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
{ nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/log.txt" 2>&1
if [ -x build/tests/gpu/test_ag_gemm ] && [ -x build/bench/bench_ag_gemm ] && [ -x build/tests/unit/test_ag_gemm_plan ]; then
  echo "prebuilt binaries (built where the tree was prepared)" >> "$OUT/log.txt"
else
  make -j16 lib build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm build/tests/unit/test_ag_gemm_plan \
    >> "$OUT/log.txt" 2>&1 || { grep -E "error" "$OUT/log.txt" | head -30; exit 1; }
fi
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/log.txt"
echo "=== unit" >> "$OUT/log.txt"; build/tests/unit/test_ag_gemm_plan >> "$OUT/log.txt" 2>&1; echo "unit rc=$?" | tee -a "$OUT/log.txt"
echo "=== test_ag_gemm"; timeout -k 5 ${TEST_TIMEOUT_S:-75} build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1; echo "rc=$?" >> "$OUT/test_ag_gemm.log"
grep -E "FAIL|PASSED|FAILED|rc=|^---|back-to-back|graph|mismatch|missing|delayed|checks" "$OUT/test_ag_gemm.log" | head -40
d=$(date -u +%Y-%m-%d)
echo "=== bench ($mode) at $(( $(date +%s) - t0 )) s"
q=--quick; [ "$mode" = full ] && q=
timeout -k 5 ${BENCH_TIMEOUT_S:-120} build/bench/bench_ag_gemm $q --json "$OUT/ag_gemm-$d.jsonl" > "$OUT/bench.log" 2>&1; echo "rc=$?" >> "$OUT/bench.log"
grep -v "^\[rank" "$OUT/bench.log" | head -120
echo "=== trace at $(( $(date +%s) - t0 )) s"
# Another bootstrap port: the bench just before may leave its port in TIME_WAIT (run 3 lost the trace so).
MELD_PORT=${TRACE_PORT:-47913} MELD_TRACE="$OUT/trace.json" timeout -k 5 25 build/bench/bench_ag_gemm --trace >> "$OUT/log.txt" 2>&1; echo "trace rc=$?"
tl=$(( $(left) - 10 ))
echo "=== torch (${tl} s left) at $(( $(date +%s) - t0 )) s"
if [ $tl -gt 30 ]; then
  timeout -k 5 $tl torchrun --nproc-per-node 2 "$root/bench/ag_gemm_torch.py" $q --json "$OUT/ag_gemm-$d.jsonl" > "$OUT/torch.log" 2>&1; echo "rc=$?" >> "$OUT/torch.log"
  grep -vE "^W|warn" "$OUT/torch.log" | tail -15
fi
ls -la "$OUT"
echo "total: $(( $(date +%s) - t0 )) s"
