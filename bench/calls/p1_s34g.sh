#!/usr/bin/env bash
# p1_s34g.sh — ONE GPU: the routing kernel on several CTAs from 16384 pairs (one per 4096 pairs, up
# to 16; MELD_MOE_ROUTE_CTAS): each counts and places its range, one barrier (a pad scratch word,
# deadline) exchanges the per-CTA counts. One CTA took 43 us at dsv3 T4096 (ballots + staging,
# call 4) and 115 us at T8192 (place walk 91 us: its pairs do not fit shared memory; call 6).
# test_moe's paths now run 1 / 3 / 16 routing CTAs and end with a capacity overflow / mismatched
# ranks / a topk id out of range (found by the last routing CTA).
# Prediction: test_moe 1,2,4,8 pass; route ~15-20 us at T4096 (8 CTAs) and T8192 (16 CTAs);
# dispatch + GEMM -25 us (T4096) / -95 us (T8192).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
grep -h "expected failure" "$OUT"/test_moe_*.log | cut -c1-200 | sort | uniq -c | head
for row in dsv3_T4096 dsv3_T8192 dsv3-32e_T128; do
  f=$OUT/trace_$row.json
  MELD_TRACE=$f BENCH_MOE_ROWS=$row BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 timeout -k 5 120 \
    build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm_trace.log" 2>&1
  echo "== trace $row rc=$? at $(el) s"
  g=$(ls "$OUT"/trace_"$row"*.json 2>/dev/null | head -1)
  [ -n "$g" ] && python3 tools/trace_phases.py "$g" route | grep -v "^role"
  rm -f "$OUT"/trace_"$row"*.json
done
BENCH_MOE_ROWS=dsv3_T512,dsv3_T4096,dsv3-zipf_T4096,dsv3_T8192,dsv3-32e_T4096,mixtral_T4096,dsv3-32e_T128 \
  BENCH_MOE_VARIANTS=fused,nocopy,ffn,cublas-loop BENCH_MOE_AB=MELD_MOE_ROUTE_CTAS=1 moe_rows 3
echo "== done at $(el) s"
