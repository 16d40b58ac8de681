#!/usr/bin/env bash
# p1_s30b.sh — ONE GPU, session 30: the fused ring attention's first GPU run. (1) test_attn (the
# kernel's consumer now takes a block offset and a Q release: meld_attention must be unchanged);
# (2) test_ring_attn 2,3,4 then 8 (paths: fused, one K/V head a launch with one comm CTA, PIPE 0,
# gathered; graph replays); (3) bench_attn's 8 rows (regression vs call 1 of this session:
# 0.471 / 0.275 / 0.473 / 0.269 / 6.95 / 3.87 / 6.87 / 3.71 ms); (4) bench_ring_attn with 2 and 4
# ranks as threads (fused / gathered / compute-only bound, sustained).
# Prediction: tests pass; bench_attn within +-2%; fused within 1.03-1.12x of compute-only and
# faster than gathered at every row (gathered pays the all-gather in series: +10-25%).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/bench/bench_attn build/bench/bench_ring_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 120 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 200 build/tests/gpu/test_ring_attn 2,3,4 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn.log" | cut -c1-300 | head -8
timeout -k 5 150 build/tests/gpu/test_ring_attn 8 > "$L/test_ring_attn8.log" 2>&1
echo "== test_ring_attn 8 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn8.log" | cut -c1-300 | head -8
BENCH_SETTLE_MS=300 timeout -k 5 200 build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -E "^1," "$L/bench_attn.log"
for p in 2 4; do
  BENCH_SETTLE_MS=200 timeout -k 5 200 build/bench/bench_ring_attn --ranks $p --json "$OUT/ring_attn.jsonl" > "$L/bench_ring_attn$p.log" 2>&1
  echo "== bench_ring_attn P=$p rc=$? at $(el) s"; grep -E "^P|FAIL|rror" "$L/bench_ring_attn$p.log" | head -16
done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
