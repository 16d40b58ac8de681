#!/usr/bin/env bash
# p1_s35i.sh — ONE GPU, session 35 call 10: the lead-in now as extra settle calls of the process's
# first settled row (bench_common.h bench_leadin_calls): bench_moe's sample log at decode and T4096
# A/B (the first variant starts ~2 s after the process's first call; no 1.4x outlier), and
# bench_attn's rows (its settle now leads in too).
# Prediction: the first variant's samples start >= 2 s after its start mark; A/B spread <= 3%.
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000 BENCH_SAMPLE_LOG=1
G=MELD_MOE_GROUP_M
BENCH_MOE_ROWS=dsv3_T4096,dsv3-32e_T128 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$G=16,$G=16,$G=16 moe_rows 3
grep -E "^(variant|sample)" "$OUT/bench_moe_p1.log" | awk '/^variant/ {printf "\n%s %s %s ", $2, $3, $4} /^sample/ {printf "%s %s ", $3, $5}'; echo
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_lead.log"
unset BENCH_SAMPLE_LOG
BENCH_SETTLE_MS=200 timeout -k 5 120 build/bench/bench_attn > "$OUT/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; tail -12 "$OUT/bench_attn.log"
echo "== done at $(el) s"
