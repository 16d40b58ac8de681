#!/usr/bin/env bash
# p1_s29f.sh — ONE GPU, session 29: the attention's final default work order (not causal: one K/V
# group at a time; causal: as many groups as fit K/V in 24 MB of L2; chosen from call 5's A/B)
# timed twice on the 8 suite shapes with torch's backends in the same call; test_attn first.
# Prediction: within 2% of call 5's best variant on every row: S 4096 0.460 / 0.270 / 0.462 /
# 0.265 ms, S 16384 7.00 / 3.67 / 7.02 / 3.63 ms; ahead of cuDNN on every row.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/bench/bench_attn
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
BENCH_ATTN_AB=default,default BENCH_SETTLE_MS=300 timeout -k 5 250 build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -v "rel err" "$L/bench_attn.log" | tail -18
BENCH_SETTLE_MS=300 timeout -k 5 200 python3 bench/attn_torch.py --json "$OUT/attn.jsonl" > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; grep -E "^1," "$L/attn_torch.log" | grep -v efficient
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
