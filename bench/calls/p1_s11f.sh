#!/usr/bin/env bash
# p1_s11f.sh — ONE GPU, session 11, call 6: the 128 x 320 tile in B-multicast pairs (cluster 2x1,
# each CTA loads one 160-row box of B for both; MELD_GEMM_CLUSTER_EXPERIMENTAL=1).
# Why: call 5's warp sampling put 37% of the wide kernel's samples on the consumers' stage-full
# wait (cuBLASLt's warps wait on their wgmmas instead); cuBLASLt's kernel at this shape is a
# 320 x 128, 3-stage, 1x2-cluster kernel. Per k-block a CTA reads 56 KB from L2; the pair cuts
# that to 36 KB.
# Prediction: 2048 x 5120 x 8192 burst 0.227 -> 0.215-0.222 ms and ncu cycles 382 K -> 360-372 K
# if L2-to-SM bandwidth is what delays the stages; no change if it is latency.
# Usage (device): OUT=... bash bench/calls/p1_s11f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_GEMM_CLUSTER_EXPERIMENTAL=1
build lib build/tests/gpu/test_gemm build/bench/bench_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm_cl.log" 2>&1
echo "test_gemm (cluster cases on) rc=$? at $(el) s"; grep -E "FAIL|checks passed|320.*c2|c2.*320" "$OUT/test_gemm_cl.log" | cut -c1-150 | head -12
timeout -k 5 200 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,1280,8192 --shape 8192,5120,8192 \
  --only default,w320,w320cl2,cl2 --soak ${SOAK:-600} --soak-rounds 2 --json "$OUT/gemm-wide-cl2-s11.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^custom|^soak median|skipped|ERROR" "$OUT/bench.log" | cut -c1-170
ARGS="--only w320cl2" COUNT=5 SHAPE=2048,5120,8192 OUT="$OUT/ncu" timeout -k 5 150 bash bench/ncu_gemm_vs_cublas.sh > "$OUT/ncu.out" 2>&1
grep -E "launch|gpu__time|cycles_elapsed|tex_op_read|ltcfabric|inst_executed.sum|Cluster Size" "$OUT/ncu.out" | head -40
rm -f "$OUT/ncu/details.csv"
echo "total: $(el) s"
