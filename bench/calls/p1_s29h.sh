#!/usr/bin/env bash
# p1_s29h.sh — ONE GPU, session 29: did the K/V segments (7dbb8aa: an iterator over (segment,
# block), 5-D K/V maps) cost speed? Call 7 read +1..+5% against call 6, on another machine start.
# Same call A/B: bench_attn of d24ffd5 (build/bench/bench_attn_old, built here from that commit)
# and of the current tree, alternated twice on the 8 suite rows.
# Prediction: within +-1.5% (per block the iterator adds ~20 instructions to ~1-2 us of work).
. "$(dirname "$0")/../device_env.sh"
L="$OUT/l"; mkdir -p "$L"
for pass in 1 2; do
  for b in bench_attn_old bench_attn; do
    BENCH_SETTLE_MS=300 timeout -k 5 120 build/bench/$b --json "$OUT/attn_$b.jsonl" > "$L/${b}_$pass.log" 2>&1
    echo "== $b pass $pass rc=$? at $(el) s"; grep -E "^1," "$L/${b}_$pass.log" | awk '{printf "%s %s | ", $1, $3}'; echo
  done
done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
