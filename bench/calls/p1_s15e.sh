#!/usr/bin/env bash
# p1_s15e.sh — ONE GPU, session 15 call 5: C's TMA stores with L2::evict_first (gemm_params_t
# store_hint; MELD_GEMM_STORE_HINT=1; off by default). The output is written once and never read
# by the kernel; evict-first should leave A's and B's tiles in L2 for the CTAs that read them
# again (fewer HBM reads = less energy at the power cap).
# (1) test_gemm (new "evict" cases) and test_gemm_rs; (2) bench_gemm sustained (2 soak rounds)
# at 8192^2 x 4096, 8192 x 5120 x 8192, 2048 x 5120 x 8192: default / evict / wide / wide+evict;
# (3) bench_gemm_rs --diag --soak, RS and AR (loopback and diag 130 with the hint).
# Prediction (before the run): -0.5..-1.5% sustained where C is large next to A + B (8192^2 x
# 4096: C 128 MB vs 128 MB of operands), ~0 at 2048 x 5120 x 8192 (C 20 MB).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s15e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm build/bench/bench_gemm_rs build/tests/gpu/test_gemm build/tests/gpu/test_gemm_rs
for t in test_gemm test_gemm_rs; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/$t > "$OUT/$t.log" 2>&1
  echo "$t rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/$t.log" | head -5
done
grep -c "evict" "$OUT/test_gemm.log"
timeout -k 5 200 build/bench/bench_gemm --custom-only --shape 8192,8192,4096 --shape 8192,5120,8192 --shape 2048,5120,8192 \
  --only default,repeat,evict,w320,w320ev --soak 300 --soak-rounds 2 --json "$OUT/gemm-evict-s15e.jsonl" > "$OUT/gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"
grep -E "soak|median" "$OUT/gemm.log" | cut -c1-150 | tail -24
for op in rs ar; do
  timeout -k 5 200 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
    --json "$OUT/gemm_$op-p1-s15e.jsonl" > "$OUT/$op.log" 2>&1
  echo "bench_gemm_rs $op rc=$? at $(el) s"
  grep -E "soak" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=130 +[0-9]|STORE_HINT|DIAG=1024 GEMM_AR_ZC=1 +[0-9]" | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
