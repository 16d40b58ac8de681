#!/usr/bin/env bash
# p1_s22a.sh — ONE GPU, prepared at the end of session 21 (no device time left) for the next
# session's first call. Verifies what session 21 wrote without a GPU: test_coll's refusal of
# MELD_COLL_PDL / MELD_COLL_LL_LEAN values other than 0 / 1 (loopback section), and the ZC
# kernel's four trace events (thread 0's entry split from the entry barrier). Then the ZC trace
# at one rank (16 forced calls, 4 KB and 1 MB) and the one-rank bench rows.
# Question: where do the ZC entry's ~2.4 us go with no peer to wait for (session 21 call 6:
# entry 2.4-2.5, move 1.1, exit 0.3 at 4 KB)? Thread 0's part (ticket atomic, counter and abort
# loads, argument post / verify: one L2 round trip of data, ~0.5 us) vs the barrier.
# Prediction (session 21): tests pass; thread 0's part >= 1.5 us (instruction fetch through a
# path spread over the kernel), the barrier < 0.3 us; bench rows as session 21 call 6 +- 0.1.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22a.sh   (carry build/bench/bench_coll build/tests/gpu/test_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 40 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$? at $(el) s"; grep -E "FAIL|checks passed|loopback" "$OUT/test_coll.log" | cut -c1-150 | head -6
for b in 4096 1048576; do
  MELD_TRACE="$OUT/trace_$b.json" MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --trace --only all_reduce \
    --max-bytes $b > "$OUT/trace_$b.log" 2>&1
  python3 tools/trace_stats.py $(ls "$OUT"/trace_$b*.json* | head -1) > "$OUT/stats_$b.log" 2>&1
  echo "== trace $b at $(el) s"; sed -n '/call 10:/,/call 12:/p' "$OUT/stats_$b.log"
done
for op in all_reduce all_gather; do
  MELD_TIMEOUT_MS=3000 timeout -k 5 30 build/bench/bench_coll --zc --only $op --max-bytes 65536 --json "$OUT/coll_$op.jsonl" > "$OUT/coll_$op.log" 2>&1
  echo "== bench_coll $op rc=$? at $(el) s"; grep -E "(ll_loop|zc).*graph" "$OUT/coll_$op.log" | awk '{printf "%s %s %s | ", $2, $3, $5}'; echo
done
cd "$OUT" && tar czf logs.tgz *.log trace_* && rm -f *.log trace_*
