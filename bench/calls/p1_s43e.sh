#!/usr/bin/env bash
# p1_s43e.sh — ONE GPU (session 43, call 5): the session's final library (the lane-0 shuffle and
# the unmasked descriptors in the ping-pong kernel only; the 128 x 256 kernels as in calls 1-3):
# test_gemm_fp8 as is and in ping-pong pairs, test_gemm with clusters on (cut by DEADLINE).
# Prediction: all pass. One archive (s43e.tgz).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s43e.sh (carry: bench/pack_bins.sh
#   build/lib/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm)
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm
export MELD_TIMEOUT_MS=5000
for v in default ppcl2; do
  e=IP_ROW_NO_ENV=1; [ $v = ppcl2 ] && e="MELD_GEMM_TILE_N=128 MELD_GEMM_CLUSTER_EXPERIMENTAL=1"
  env $e timeout -k 5 "$(tl 60)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8_$v.log" 2>&1
  echo "== test_gemm_fp8 $v rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_fp8_$v.log" | cut -c1-140 | head -6
done
MELD_GEMM_CLUSTER_EXPERIMENTAL=1 timeout -k 5 "$(tl 200)" build/tests/gpu/test_gemm > "$OUT/test_gemm_cl.log" 2>&1
echo "== test_gemm (clusters on) rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_cl.log" | cut -c1-140 | head -6
grep -c "pingpong\|ping-pong" "$OUT/test_gemm_cl.log"
cd "$OUT" && tar czf s43e.tgz --remove-files $(ls | grep -v s43e.tgz)
echo "== done at $(el) s"
