#!/usr/bin/env bash
# p1_s23d.sh — ONE GPU, session 23 call 3. Carry: build/bench/bench_inproc build_b/bench/bench_inproc
#   build_u2/bench/bench_inproc (the carry limit leaves room for these three only: no tests here,
#   no one-rank rows; the tests run in the next call).
# The lean LL kernel split by action (the LL prefetch of call 2 showed the kernel's time moves
# with its code: +0.13..+0.4 us for a few added instructions), like the ZC kernels' split by op:
#   B = main at 335b8a5 (one lean LL kernel, copy and reduce paths, 6.8K PTX lines),
#   N = two lean kernels, copy (3.4K) and reduce (5.2K),
#   U = N with COLL_LL_U 2 (half the unrolled units: smaller still, fewer loads in flight).
# Order B N U U N B. 2 in-process ranks (LL, ordinary buffers).
# Prediction: N 4 KB -0.1..-0.3 us, 64 KB / 1 MB equal; U 4 KB a further -0.1..-0.2, 1 MB
# +0.3..+1 us (fewer loads in flight per thread).
# Usage (device): OUT=... bash bench/calls/p1_s23d.sh
. "$(dirname "$0")/../device_env.sh"
i=0
for v in b n u u n b; do
  i=$((i + 1)); bin=build/bench; [ $v = b ] && bin=build_b/bench; [ $v = u ] && bin=build_u2/bench
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536,1048576 --kinds ord \
    --json "$OUT/inproc.jsonl" --label "s23d_${v}$i" > "$OUT/ip_${v}$i.log" 2>&1
  echo "== $v$i rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}$i.log" | awk '{printf "%s %s %s | ", substr($1,1,6), $3, $4}')"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
