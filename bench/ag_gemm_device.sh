#!/usr/bin/env bash
# ag_gemm_device.sh — one device call for AG+GEMM: build (in .agsnap if present: HEAD + this
# op's changes, isolated from others' work in progress), CPU test, GPU test, bench, torch
# baseline, a traced run. Everything lands in $OUT as at most 8 files.
# Usage: bench/ag_gemm_device.sh [quick|full]
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mode=${1:-quick}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
root=$PWD; [ -d .agsnap ] && cd .agsnap
t0=$(date +%s)
{ nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/log.txt" 2>&1
make -j16 lib build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm build/tests/unit/test_ag_gemm_plan \
  > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/log.txt"
echo "=== unit" >> "$OUT/log.txt"; build/tests/unit/test_ag_gemm_plan >> "$OUT/log.txt" 2>&1; echo "rc=$?" >> "$OUT/log.txt"
echo "=== test_ag_gemm"; timeout -k 5 ${TEST_TIMEOUT_S:-120} build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1; echo "rc=$?" >> "$OUT/test_ag_gemm.log"
grep -E "FAIL|PASSED|FAILED|rc=|---|rel |back-to-back|graph|mismatch|missing" "$OUT/test_ag_gemm.log" | head -60
d=$(date -u +%Y-%m-%d)
echo "=== bench ($mode)"
q=--quick; [ "$mode" = full ] && q=
timeout ${BENCH_TIMEOUT_S:-200} build/bench/bench_ag_gemm $q --json "$OUT/ag_gemm-$d.jsonl" > "$OUT/bench.log" 2>&1; echo "rc=$?" >> "$OUT/bench.log"
cat "$OUT/bench.log" | grep -v "^\[rank" | head -60
echo "=== torch"
timeout ${TORCH_TIMEOUT_S:-150} torchrun --nproc-per-node 2 "$root/bench/ag_gemm_torch.py" $q --json "$OUT/ag_gemm-$d.jsonl" > "$OUT/torch.log" 2>&1; echo "rc=$?" >> "$OUT/torch.log"
grep -vE "^W|warn" "$OUT/torch.log" | tail -15
echo "=== trace"
MELD_TRACE="$OUT/trace.json" timeout 60 build/bench/bench_ag_gemm --trace >> "$OUT/log.txt" 2>&1; echo "trace rc=$?"
ls -la "$OUT"
echo "total: $(( $(date +%s) - t0 )) s"
