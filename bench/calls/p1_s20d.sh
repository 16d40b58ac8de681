#!/usr/bin/env bash
# p1_s20d.sh — ONE GPU, session 20 call 4: does programmatic dependent launch (opt-in
# MELD_COLL_PDL=1, session 4) shorten back-to-back small collectives? The launch overlap it
# buys is the GPU's own, so one rank shows it: bench_coll --zc at one rank, 4 KB .. 256 KB, the
# default plan with and without PDL, plain launches and CUDA graphs of 20 calls. (At one rank
# the calls move no bytes between GPUs: this times the launch / entry / exit path alone.)
# Prediction (before the run): graph per-call time 1-2 us lower with PDL at every op and size
# (session 4's estimate: ~1-2 us of the 4.5 us LL graph latency is launch); plain launches
# unchanged within 0.5 us.
# Run twice (calls 4 and 6): call 4 found the one-rank default is the ZC kernel (6.2-8.7 us a
# call in graphs; Nsight, call 5: ~22K SM cycles for a 4 KB copy in one CTA); call 6 adds the LL
# kernel forced by the hint (with and without PDL) and the floor (an empty kernel, plain and
# cooperative launch, in the same graph batches). Prediction for call 6: LL 3-4 us a call in
# graphs, the empty kernel 1.5-2.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20d.sh   (carry build/bench/bench_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/bench/bench_coll --zc --max-bytes 262144 --json "$OUT/coll-p1-s20d.jsonl" \
  > "$OUT/coll.log" 2>&1
echo "== bench_coll --zc (1 rank) rc=$? at $(el) s"
grep -E " (auto|auto_pdl|ll|ll_pdl) |^floor" "$OUT/coll.log" | cut -c1-130
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
