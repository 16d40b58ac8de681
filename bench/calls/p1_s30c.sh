#!/usr/bin/env bash
# p1_s30c.sh — ONE GPU, session 30, after call b (test_ring_attn 2,3,4 passed all four paths, 7920
# checks; 8 ranks failed only at the graph replay: a first graph launch waited for the device while
# the peers waited for it -> now uploaded before a barrier; bench_ring_attn's ranks took different
# settle counts -> now rank 0's). New since: the zigzag layout (args.zigzag; iterator halves,
# per-tile query origin; CPU-tested), the producer's wait state in fewer registers.
# (1) test_attn, test_ring_attn 2,3,4 then 8 (zigzag cases added); (2) bench_ring_attn P=2 with the
# S 16384 rows (--long), comm CTAs 2 / 4 against the default 8 (BENCH_RING_AB); P=4.
# Prediction: tests pass; fused 1.03-1.10x compute-only (call b's first row: 1.087), gathered
# 1.10-1.30x; fewer comm CTAs within +-2% at S 4096; zigzag causal 1.2-1.4x faster than contiguous
# at P=2 (each rank 1/2 of the work instead of the last rank's 3/4).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/bench/bench_ring_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 120 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 240 build/tests/gpu/test_ring_attn 2,3,4 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn.log" | cut -c1-300 | head -8
timeout -k 5 150 build/tests/gpu/test_ring_attn 8 > "$L/test_ring_attn8.log" 2>&1
echo "== test_ring_attn 8 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn8.log" | cut -c1-300 | head -8
BENCH_RING_AB="MELD_RING_ATTN_COMM_CTAS=2,MELD_RING_ATTN_COMM_CTAS=4" BENCH_SETTLE_MS=200 timeout -k 5 240 \
  build/bench/bench_ring_attn --ranks 2 --long --json "$OUT/ring_attn.jsonl" > "$L/bench_ring_attn2.log" 2>&1
echo "== bench_ring_attn P=2 rc=$? at $(el) s"; grep -E "^P|FAIL|rror" "$L/bench_ring_attn2.log" | cut -c1-200 | head -60
BENCH_SETTLE_MS=200 timeout -k 5 150 build/bench/bench_ring_attn --ranks 4 --json "$OUT/ring_attn.jsonl" > "$L/bench_ring_attn4.log" 2>&1
echo "== bench_ring_attn P=4 rc=$? at $(el) s"; grep -E "^P|FAIL|rror" "$L/bench_ring_attn4.log" | cut -c1-200 | head -20
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
