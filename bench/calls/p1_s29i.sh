#!/usr/bin/env bash
# p1_s29i.sh — ONE GPU, session 29: the kernel specialized on one K/V segment (meld_attention: the
# first version's block counter and 4-D maps) vs several (the ring). Call 8 measured the general
# iterator 1-5% slower than d24ffd5 in the same call. test_attn, test_ring_attn 2,3,4, then the
# same A/B as call 8 (d24ffd5's bench_attn_old vs this tree's), twice.
# Prediction: tests pass; new = old within +-1%.
. "$(dirname "$0")/../device_env.sh"
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 150 build/tests/gpu/test_ring_attn 2,3,4 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_ring_attn.log" | cut -c1-300 | head -6
for pass in 1 2; do
  for b in bench_attn_old bench_attn; do
    BENCH_SETTLE_MS=300 timeout -k 5 120 build/bench/$b --json "$OUT/attn_$b.jsonl" > "$L/${b}_$pass.log" 2>&1
    echo "== $b pass $pass rc=$? at $(el) s"; grep -E "^1," "$L/${b}_$pass.log" | awk '{printf "%s %s | ", $1, $3}'; echo
  done
done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
