#!/usr/bin/env bash
# p1_s20f.sh — ONE GPU, session 20 call 6: one-rank collectives as one cudaMemcpyAsync (new:
# calls 4-5 found the one-rank default was the ZC kernel, 6.2-8.7 us a call in CUDA graphs and
# ~22K SM cycles for 4 KB, where NCCL's one-rank call takes ~1 us). test_coll at one rank (its
# public-API cases now take the copy; the hinted cases still run the kernels), then bench_coll
# at one rank: the default (now the copy), the LL kernel forced (with and without PDL: its
# fixed path, which every P pays), the ZC kernel forced, and the floor (an empty kernel, plain and cooperative).
# Prediction (before the run): default ~1 us a call in graphs (NCCL's ~1.0-1.1); the LL kernel
# 3-4 us, the empty kernel 1.5-2 us; PDL -0.2..-0.5 us on the LL rows in graphs.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20f.sh   (carry build/bench/bench_coll build/tests/gpu/test_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$?"; grep -E "FAIL|checks passed" "$OUT/test_coll.log" | head -8
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/bench/bench_coll --zc --max-bytes 262144 --json "$OUT/coll-p1-s20f.jsonl" \
  > "$OUT/coll.log" 2>&1
echo "== bench_coll --zc (1 rank) rc=$?"
grep -E "graph|^floor" "$OUT/coll.log" | cut -c1-130
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
