#!/usr/bin/env bash
# p1_s29e.sh — ONE GPU, session 29: the attention work order by chunks of heads. Call 4: query
# tiles fastest (chunks of one head) took S 16384 MHA non-causal 7.6-7.8 -> 6.83 ms (K/V from L2,
# not HBM), but S 4096 GQA causal 0.260 -> 0.282 ms (the heaviest tiles of all heads no longer
# first). Now the default takes as many heads (whole K/V groups) together as fit their K/V in 24 MB
# of L2: S 16384 MHA 3 heads, GQA 12; S 4096 MHA 12, GQA all 32 (= the heads order there).
# test_attn (now also runs MELD_ATTN_ORDER=tiles / heads), then A/B heads / tiles / default,
# twice, on the 8 suite shapes, then torch's backends (same call).
# Prediction: default = the better of heads and tiles within 2% on every row: S 16384 rows at
# 6.8-6.9 (non-causal) and 3.55-3.65 ms (causal), S 4096 GQA causal ~0.260.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/bench/bench_attn
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
BENCH_ATTN_AB=MELD_ATTN_ORDER=heads,MELD_ATTN_ORDER=tiles,default,MELD_ATTN_ORDER=heads,MELD_ATTN_ORDER=tiles,default \
  BENCH_SETTLE_MS=300 timeout -k 5 300 build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -v "rel err" "$L/bench_attn.log" | tail -52
BENCH_SETTLE_MS=300 timeout -k 5 200 python3 bench/attn_torch.py --json "$OUT/attn.jsonl" > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; grep -E "^1," "$L/attn_torch.log" | grep -v efficient
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
