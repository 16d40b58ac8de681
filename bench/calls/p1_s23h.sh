#!/usr/bin/env bash
# p1_s23h.sh — ONE GPU, session 23 call 8. Carry: build_b/bench/bench_inproc build/bench/bench_inproc
#   build/tests/gpu/test_inproc.
# The LL late argument check read the peer's post only at the end of the call (one L2 round trip
# on thread 0, the last thread to finish). P: with two ranks that thread loads the post right
# after its sends, its latency hidden behind the receive; at the end it uses that value if the
# post had arrived, else reads again. B = main at e6dd3ad.
# (1) test_inproc with P and a new case: mismatched counts in an LL all-reduce (fresh comm):
#     rank 0 reports "arguments differ", rank 1's wait ends with the abort; both within 20 s.
# (2) B P P B, 2 in-process ranks, LL on ordinary buffers, 4 KB .. 256 KB (P's binary also has
#     bench_inproc's shared sampler, (3)).
# Prediction: the new case passes in < 1 s; P -0.1..-0.4 us at every size (an L2 round trip).
# Usage (device): OUT=... bash bench/calls/p1_s23h.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks|FAIL|mismatched" "$OUT/test_inproc.log" | cut -c1-300 | head -8
i=0
for v in b p p b; do
  i=$((i + 1)); bin=build/bench; [ $v = b ] && bin=build_b/bench
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536,262144 --kinds ord \
    --json "$OUT/inproc.jsonl" --label "s23h_${v}$i" > "$OUT/ip_${v}$i.log" 2>&1
  echo "== $v$i rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}$i.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $3, $4, $6}')"
done
# (3) bench_inproc's timing loops now share one sampler (ip_time_samples): a small fused row runs it.
MELD_TIMEOUT_MS=5000 timeout -k 5 60 build/bench/bench_inproc --ranks 2 --samples 3 --fused-calls 5 \
  --fused rs:2048,2048,2048 > "$OUT/fused_small.log" 2>&1
echo "== fused small rc=$? at $(el) s"; grep -E "mean of|FAIL" "$OUT/fused_small.log"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
