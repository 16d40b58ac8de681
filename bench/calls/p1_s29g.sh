#!/usr/bin/env bash
# p1_s29g.sh — ONE GPU, session 29: the attention kernel now reads K/V in segments (the ring's
# parts; an iterator over (segment, block) in producer and consumers) and meld_ring_attention's
# first version (all-gather K and V, then one kernel over the P segments) runs for the first time:
# test_attn (the refactor at one segment), test_ring_attn 2,3,4 (ranks as threads sharing the
# GPU), then bench_attn's 8 rows (did the iterator cost speed? call 6: 0.463 / 0.270 / 0.462 /
# 0.261 / 6.96 / 3.69 / 6.95 / 3.63 ms).
# Prediction: all pass; bench within +-2% of call 6.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/bench/bench_attn
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 150 build/tests/gpu/test_ring_attn 2,3,4 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL|ranks as" "$L/test_ring_attn.log" | cut -c1-300 | head -12
grep -E "rel err" "$L/test_ring_attn.log" | head -4
BENCH_ATTN_AB=default,default BENCH_SETTLE_MS=300 timeout -k 5 250 build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -v "rel err" "$L/bench_attn.log" | tail -18
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
