#!/usr/bin/env bash
# p1_s20i.sh — ONE GPU, session 20 call 9: the one-CTA LL entry (no ticket atomic; each thread's
# first units loaded before the entry's counter / abort-word reads). Call 8 (LL loopback, one
# GPU): 3.30-3.62 us a call in graphs at 4 KB (PDL 2.99-3.28), an empty kernel 0.66: ~2.7-3 us
# of our own, a chain of dependent round trips. test_coll at one rank (loopback cases: 1-CTA
# and 16-CTA LL), test_coll at 2 ranks sharing the GPU (the LL kernel between two processes),
# then the bench rows.
# Prediction (before the run): 4 KB loopback graphs 3.3-3.6 -> 2.3-2.8 us (two round trips of
# ~0.4-0.6 us off); 16 KB+ (16 CTAs) unchanged.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20i.sh   (carry build/bench/bench_coll build/tests/gpu/test_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$?"; grep -E "FAIL|checks passed|loopback" "$OUT/test_coll.log" | cut -c1-160 | head -8
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/bench/bench_coll --zc --max-bytes 65536 --json "$OUT/coll-p1-s20i.jsonl" \
  > "$OUT/coll.log" 2>&1
echo "== bench_coll --zc (1 rank) rc=$?"
grep -E " (ll_loop|ll_loop_pdl) .*graph|^floor" "$OUT/coll.log" | cut -c1-110
MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=2 MELD_TIMEOUT_MS=15000 GT_SPAWN_TIMEOUT_S=280 timeout -k 5 300 build/tests/gpu/test_coll \
  > "$OUT/test_coll_p2.log" 2>&1
echo "== test_coll (2 ranks sharing the GPU) rc=$?"; grep -E "FAIL|checks passed" "$OUT/test_coll_p2.log" | cut -c1-160 | head -8
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
