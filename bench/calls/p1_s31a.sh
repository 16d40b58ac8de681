#!/usr/bin/env bash
# p1_s31a.sh — ONE GPU, session 31, first call: session 30's CPU-only review mends (attn_gather_part,
# attn_q_free, the Makefile's attention-only dependencies) run for the first time.
# test_attn, test_ring_attn 2,3,4,8, test_inproc 2. Prediction: all pass (no behaviour change meant).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 120 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_attn.log" | cut -c1-300 | head -8
timeout -k 5 240 build/tests/gpu/test_ring_attn 2,3,4,8 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4,8 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn.log" | cut -c1-300 | head -8
timeout -k 5 120 build/tests/gpu/test_inproc 2 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 2 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -6
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
