#!/usr/bin/env bash
# p1_s29d.sh — ONE GPU, session 29: the attention work order. Calls 2-3 ordered the grid heads
# fastest (132 CTAs at once read 132 heads' K/V: at S 16384 each head's K+V is 8 MB, so a
# non-causal MHA row streams ~32 GB from HBM, ~8 ms at ~4 TB/s: about its 7.5-7.8 ms); now query
# tiles go fastest (the CTAs running at once share one head's K/V in L2). test_attn first, then
# A/B MELD_ATTN_ORDER=heads vs the new default, twice, on the 8 suite shapes, then torch's
# backends on the same shapes (peers, same call).
# Prediction: S 16384 MHA non-causal 7.5-7.8 -> 6.6-7.1 ms (ahead of cuDNN's 7.1-7.2), causal
# -3..-8%, GQA rows -0..-4% (their K/V was shared by 4 heads already), S 4096 +-2%.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/bench/bench_attn
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
BENCH_ATTN_AB=MELD_ATTN_ORDER=heads,default,MELD_ATTN_ORDER=heads,default BENCH_SETTLE_MS=300 timeout -k 5 250 \
  build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -v "rel err" "$L/bench_attn.log" | tail -34
BENCH_SETTLE_MS=300 timeout -k 5 200 python3 bench/attn_torch.py --json "$OUT/attn.jsonl" > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; grep -E "^1," "$L/attn_torch.log" | grep -v efficient
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
