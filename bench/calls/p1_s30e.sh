#!/usr/bin/env bash
# p1_s30e.sh — ONE GPU, session 30: meld_attention with persistent CTAs (MELD_ATTN_PERSIST=1, the
# fused ring's CTA loop without communication; opt-in), and the producer / consumer refactor that
# shares that loop with the fused ring. (1) test_attn (now also every case persistent, each
# pipeline, back-to-back and graph); test_ring_attn 2,4; (2) bench_attn's 8 rows, default vs
# persistent in the same pass; (3) bench_ring_attn P=2 (fused as in call c: 1.92 / 2.48 / 1.88 /
# 2.36 ms; zigzag 1.94 / 1.11 / 1.89 / 1.12).
# Prediction: tests pass; persistent non-causal within +-1.5% of the default, causal -1..-4% (the
# tail); if it is slower, the fused ring's excess over compute (call d) is the persistent loop's.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/bench/bench_attn build/bench/bench_ring_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 200 build/tests/gpu/test_ring_attn 2,4 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,4 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn.log" | cut -c1-300 | head -6
BENCH_ATTN_AB="default,MELD_ATTN_PERSIST=1,default,MELD_ATTN_PERSIST=1" BENCH_SETTLE_MS=300 timeout -k 5 200 \
  build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -E "^1," "$L/bench_attn.log"
BENCH_SETTLE_MS=200 timeout -k 5 150 build/bench/bench_ring_attn --ranks 2 --json "$OUT/ring_attn.jsonl" > "$L/bench_ring_attn2.log" 2>&1
echo "== bench_ring_attn P=2 rc=$? at $(el) s"; grep -E "^P|FAIL|rror" "$L/bench_ring_attn2.log" | cut -c1-200 | head -20
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
