#!/usr/bin/env bash
# p1_s30f.sh — ONE GPU, session 30: head_dim 64. The attention kernels are now one source
# compiled per head_dim (attention_kernels.cuh -> attention_d64.cu / attention_d128.cu; O of
# D / 2 registers, PV by m64n64k16 RS, 56 / 224 registers at D 64). (1) test_attn (d64 cases
# added; every D 128 case as before), test_ring_attn 2,3,4 (two D 64 ring cases); (2) bench_attn
# D 128 rows (regression: call e's default 0.480 / 0.274 / 0.470 / 0.268 / 7.02 / 3.66 / 7.00 /
# 3.70) and the same rows at D 64, with torch's backends at D 64.
# Prediction: tests pass; D 128 within +-2%; D 64 at 55-70% of D 128's TFLOP/s (half the MMA
# work per softmax element: the exp and the mask weigh twice as much), ahead of torch flash.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/bench/bench_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -8
timeout -k 5 200 build/tests/gpu/test_ring_attn 2,3,4 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn.log" | cut -c1-300 | head -8
S64="--shape 1,4096,32,32,0,64 --shape 1,4096,32,32,1,64 --shape 1,4096,32,8,0,64 --shape 1,4096,32,8,1,64 --shape 1,16384,32,32,0,64 --shape 1,16384,32,32,1,64"
BENCH_SETTLE_MS=300 timeout -k 5 200 build/bench/bench_attn $S64 --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -E "^1," "$L/bench_attn.log"
BENCH_SETTLE_MS=300 timeout -k 5 200 python3 bench/attn_torch.py $S64 --custom-only --json "$OUT/attn.jsonl" > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; grep -E "^1," "$L/attn_torch.log" | grep -v efficient
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
