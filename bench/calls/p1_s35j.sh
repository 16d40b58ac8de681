#!/usr/bin/env bash
# p1_s35j.sh — ONE GPU, session 35 call 11: (1) T8192 and decode, routing kernel / in the fused
# kernel alternating (call 4 read T8192 mixed: 7.80 / 7.76 vs 7.74 / 7.98 ms); (2) the whole layer
# (meld_moe_ffn) at decode and T4096 both ways, one process each, alternating; (3) bench_inproc's
# first fused row with the lead-in now in its settle (2 ranks, one shape).
# (Call 11 ran (2) as `env VAR=.. moe_rows`, which env cannot run: (2) re-ran alone in call 12 with
# ONLY_FFN=1.)
# Prediction: T8192 within +-1%; the layer at decode -8..-12 us in the fused kernel; (3) runs.
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000
R=MELD_MOE_ROUTE_IN
[ "${ONLY_FFN:-0}" = 1 ] || BENCH_MOE_ROWS=dsv3_T8192,dsv3-32e_T128 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$R=0,$R=1,$R=0,$R=1,$R=0 moe_rows 3
[ "${ONLY_FFN:-0}" = 1 ] || cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_ab.log"
for r in 1 0 1 0; do
  echo "== ffn $R=$r"; export $R=$r; BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T4096 BENCH_MOE_VARIANTS=ffn moe_rows 3 | grep ffn
  unset $R
done
L=$OUT; mkdir -p "$L"
[ "${ONLY_FFN:-0}" = 1 ] || fused_row 2 IP_ROW_NO_ENV=1 rs:8192,4096,4096 rs2
echo "== done at $(el) s"
