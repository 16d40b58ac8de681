#!/usr/bin/env bash
# p1_s30h.sh — ONE GPU, session 30, last: the ring's argument hash now includes head_dim, and each
# fused path of test_ring_attn ends with ranks that disagree (rank 0 causal, the others not): the
# call must fail fast on every rank with "arguments differ". test_attn, test_ring_attn 2,3,4,8.
# Prediction: all pass; the mismatch fails in < 0.1 s. (Rerun after call 9: the gathered path at 8
# ranks timed out at its first graph replay; it now uses the comm scratch, no memory nodes.)
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/tests/gpu/test_ring_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 240 build/tests/gpu/test_ring_attn 2,3,4,8 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4,8 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn.log" | cut -c1-300 | head -8
grep -E "mismatch|differ" "$L/test_ring_attn.log" | head -3 | cut -c1-300
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
