#!/usr/bin/env bash
# final_device.sh — one device call that verifies a tree end to end on 2 GPUs: build everything,
# every GPU test (tests/gpu/run.sh), then the fused-op benchmarks with their torch async-TP peers
# (interleaved meld rows; torch in its own process), in priority order under a time budget.
# Logs land in $OUT as at most 8 files. Usage: bench/final_device.sh   (BUDGET_S, default 500)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
budget=${BUDGET_S:-500}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( budget - $(el) )); }
d=$(date -u +%Y-%m-%d)
L="$OUT/log.txt"
{ nvidia-smi -L; nvidia-smi topo -m; } > "$L" 2>&1
make -j32 all build/bench/bench_gemm_rs build/bench/bench_ag_gemm >> "$L" 2>&1 || { grep -E "error" "$L" | head -30; exit 1; }
echo "build: $(el) s" | tee -a "$L"
TEST_TIMEOUT_S=150 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$? at $(el) s" | tee -a "$L"
grep -E "PASSED|FAILED|FAIL |checks|rc=" "$OUT/gpu_tests.log" | tail -25
run_b() { # name timeout cmd...
  local n=$1 t=$2; shift 2
  local l; l=$(left); [ "$l" -lt 20 ] && { echo "skip $n (budget)"; return; }
  [ "$t" -gt "$l" ] && t=$l
  echo "=== $n (timeout $t s) at $(el) s" | tee -a "$L"
  timeout -k 5 "$t" "$@" >> "$OUT/bench.log" 2>&1; echo "$n rc=$? at $(el) s" | tee -a "$L"
}
run_b rs 60 build/bench/bench_gemm_rs --quick --op rs --json "$OUT/fused-$d.jsonl"
run_b ag 90 build/bench/bench_ag_gemm --quick --json "$OUT/fused-$d.jsonl"
run_b torch_rs 80 torchrun --nproc-per-node 2 bench/gemm_rs_torch.py --quick --json "$OUT/torch-$d.jsonl"
run_b torch_ag 80 torchrun --nproc-per-node 2 bench/ag_gemm_torch.py --quick --json "$OUT/torch-$d.jsonl"
run_b ar 150 build/bench/bench_gemm_rs --quick --op ar --json "$OUT/fused-$d.jsonl"
grep -vE "^\[rank|^W|Warning|warn|return func" "$OUT/bench.log" | grep -E "gemm_|x[0-9]+x|variant|graph|async|diag|note|^   " | head -80
if command -v cuobjdump >/dev/null && [ "$(left)" -gt 5 ]; then
  for o in gemm gemm_rs; do cuobjdump -sass build/obj/src/ops/$o.o > "$OUT/$o.sass" 2>/dev/null; done
  tar -czf "$OUT/sass.tgz" -C "$OUT" gemm.sass gemm_rs.sass && rm -f "$OUT/gemm.sass" "$OUT/gemm_rs.sass"
fi
echo "total: $(el) s"
