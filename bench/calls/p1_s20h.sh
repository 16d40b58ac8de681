#!/usr/bin/env bash
# p1_s20h.sh — ONE GPU, session 20 call 8: the LL kernel in loopback (new, MELD_COLL_LOOPBACK=1:
# one rank as rank 0 of 2 whose virtual peer is itself; its lines go to its own pad and are
# polled back): the whole small-message path but NVLink, on one GPU. Call 7 found that at one
# rank the "LL" hint had fallen back to ROUNDS (coll_kernel): the 3.6-4.95 us of call 6 were
# ROUNDS's, not LL's. test_coll at one rank (loopback cases: every LL op, bf16/fp32, odd sizes,
# with and without PDL, back-to-back, graphs), then bench_coll at one rank: the copy (default),
# ROUNDS and ZC forced, the LL loopback with and without PDL (plain and graphs), the floor.
# Prediction (before the run): LL loopback 2-3 us a call in graphs at 4 KB (session 4 measured
# ~4.5 us on 2 GPUs, of which ~1-1.5 us should be the link), PDL 0-0.3 us less.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20h.sh   (carry build/bench/bench_coll build/tests/gpu/test_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$?"; grep -E "FAIL|checks passed|loopback" "$OUT/test_coll.log" | cut -c1-160 | head -12
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/bench/bench_coll --zc --max-bytes 262144 --json "$OUT/coll-p1-s20h.jsonl" \
  > "$OUT/coll.log" 2>&1
echo "== bench_coll --zc (1 rank) rc=$?"
grep -E " (auto|rounds_p1|zc|ll_loop|ll_loop_pdl) |^floor" "$OUT/coll.log" | cut -c1-110
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
