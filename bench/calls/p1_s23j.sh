#!/usr/bin/env bash
# p1_s23j.sh — ONE GPU, session 23 call 10. Carry: build_b/bench/bench_inproc build_o/bench/bench_inproc
#   build/bench/bench_inproc.
# Call 9 (O: meld_raise_abort out of line in every wait of collectives.cu): LL -0.05..-0.10 us,
# ZC +0.06..+0.10. L: only the LL wait's raise out of line (coll_ll_raise_abort), the ZC kernels
# as B (PTX within 12 lines of B's). B = main at 37a735f.
# B L O O L B, 2 in-process ranks: LL (ordinary) 4 KB, 64 KB; forced ZC 4 KB, 1 MB.
# Prediction: L's LL rows as O's (-0.05..-0.1), its ZC rows as B's.
# Usage (device): OUT=... bash bench/calls/p1_s23j.sh
. "$(dirname "$0")/../device_env.sh"
i=0
for v in b l o o l b; do
  i=$((i + 1)); bin=build/bench; [ $v = b ] && bin=build_b/bench; [ $v = o ] && bin=build_o/bench
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536 --kinds ord \
    --json "$OUT/inproc.jsonl" --label "s23j_${v}$i" > "$OUT/ip_${v}$i.log" 2>&1
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,1048576 --kinds sym --zc \
    --json "$OUT/inproc.jsonl" --label "s23j_${v}$i" > "$OUT/ipz_${v}$i.log" 2>&1
  echo "== $v$i at $(el) s: $(grep -hE '^(all|reduce)' "$OUT/ip_${v}$i.log" "$OUT/ipz_${v}$i.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $2, $3, $4}')"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
