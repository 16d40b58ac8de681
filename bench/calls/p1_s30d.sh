#!/usr/bin/env bash
# p1_s30d.sh — ONE GPU, session 30: where the fused ring's 8-11% over compute-only goes (call c:
# P=2 non-causal 1.085-1.11x; comm CTAs 2 / 4 / 8 alike from 4). Timing diagnostics (WRONG
# RESULTS, timing only): MELD_RING_ATTN_DIAG=1 the fused kernel without pushes and waits;
# MELD_RING_ATTN=unfused+DIAG=2 the gathered kernel alone (multi-segment iterator, not
# persistent); MELD_ATTN_ORDER=heads.
# Prediction: DIAG=1 within 2% of fused (the communication is hidden), i.e. the excess is the
# kernel: persistent CTAs on a fixed SM share and the segment iterator (session 29: 1-5%);
# gathered-alone 1.01-1.05x compute.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_ring_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
for p in 2 4; do
  BENCH_RING_AB="MELD_RING_ATTN_DIAG=1,MELD_RING_ATTN=unfused+MELD_RING_ATTN_DIAG=2,MELD_ATTN_ORDER=heads" BENCH_SETTLE_MS=200 \
    timeout -k 5 200 build/bench/bench_ring_attn --ranks $p --json "$OUT/ring_attn.jsonl" > "$L/bench_ring_attn$p.log" 2>&1
  echo "== bench_ring_attn P=$p rc=$? at $(el) s"; grep -E "^P|FAIL|rror" "$L/bench_ring_attn$p.log" | cut -c1-200 | head -40
done
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
