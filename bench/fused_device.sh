#!/usr/bin/env bash
# fused_device.sh — one device call for the fused ops (GEMM+RS/AR, AG+GEMM): build what they
# need, run test_gemm_rs, then bench_gemm_rs and bench_ag_gemm at chosen shapes; logs in $OUT.
# Env: RS_ARGS (bench_gemm_rs args, default --quick), AG_ARGS (bench_ag_gemm args, e.g. --quick;
# default: not run), AG_SHAPES ("M,N_total,K ..." single swept points), TESTS (default
# "test_gemm_rs"), *_TIMEOUT_S.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(cat .commit 2>/dev/null || echo unknown)}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
TESTS=${TESTS:-test_gemm_rs}
tg=""; for t in $TESTS; do tg="$tg build/tests/gpu/$t"; done
{ nvidia-smi -L; } > "$OUT/log.txt" 2>&1
make -j32 lib $tg build/bench/bench_gemm_rs build/bench/bench_ag_gemm >> "$OUT/log.txt" 2>&1 \
  || { grep -E "error" "$OUT/log.txt" | head -30; exit 1; }
echo "build: $(el) s"
for t in $TESTS; do
  echo "=== $t at $(el) s"
  MELD_TIMEOUT_MS=3000 timeout -k 5 ${TEST_TIMEOUT_S:-110} build/tests/gpu/$t > "$OUT/$t.log" 2>&1; echo "rc=$?" >> "$OUT/$t.log"
  grep -E "FAIL|PASSED|FAILED|rc=|worst|missing|mismatch|ranks\)|checks" "$OUT/$t.log" | head -40
done
d=$(date -u +%Y-%m-%d)
echo "=== bench_gemm_rs ${RS_ARGS:---quick} at $(el) s"
timeout -k 5 ${RS_TIMEOUT_S:-100} build/bench/bench_gemm_rs ${RS_ARGS:---quick} --json "$OUT/gemm_rs-$d.jsonl" > "$OUT/bench_gemm_rs.log" 2>&1; echo "rc=$?"
grep -v "^\[" "$OUT/bench_gemm_rs.log" | head -60
if [ -n "${AG_ARGS:-}" ]; then
  echo "=== bench_ag_gemm $AG_ARGS at $(el) s"
  timeout -k 5 ${AG_TIMEOUT_S:-150} build/bench/bench_ag_gemm $AG_ARGS --json "$OUT/ag_gemm-$d.jsonl" >> "$OUT/bench_ag_gemm.log" 2>&1; echo "rc=$?"
fi
for s in ${AG_SHAPES:-}; do
  echo "=== bench_ag_gemm --shape $s at $(el) s"
  timeout -k 5 60 build/bench/bench_ag_gemm --shape $s --json "$OUT/ag_gemm-$d.jsonl" >> "$OUT/bench_ag_gemm.log" 2>&1; echo "rc=$?"
done
[ -f "$OUT/bench_ag_gemm.log" ] && grep -v "^\[rank" "$OUT/bench_ag_gemm.log" | head -60
echo "total: $(el) s"
