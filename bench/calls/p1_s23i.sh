#!/usr/bin/env bash
# p1_s23i.sh — ONE GPU, session 23 call 9. Carry: build_b/bench/bench_inproc build/bench/bench_inproc
#   build/tests/gpu/test_inproc.
# O: meld_raise_abort out of line where meld_fail_record already is (collectives.cu: failure
# paths only; every wait inlined a copy of it): lean LL kernels' PTX 25-29% smaller (reduce, 4
# units 5230 -> 3723 lines), the ZC kernels 5-13%. B = main at 37a735f.
# (1) test_inproc with O (its timeout and mismatch cases raise the abort through it).
# (2) B O O B, 2 in-process ranks: LL (ordinary buffers) 4 KB, 64 KB; forced ZC 4 KB, 1 MB.
# Prediction: LL -0.02..-0.1 us (the split by action, a third smaller, gave -0.01..-0.08), ZC ~0.
# Usage (device): OUT=... bash bench/calls/p1_s23i.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-200 | head -4
i=0
for v in b o o b; do
  i=$((i + 1)); bin=build/bench; [ $v = b ] && bin=build_b/bench
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536 --kinds ord \
    --json "$OUT/inproc.jsonl" --label "s23i_${v}$i" > "$OUT/ip_${v}$i.log" 2>&1
  MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,1048576 --kinds sym --zc \
    --json "$OUT/inproc.jsonl" --label "s23i_${v}$i" > "$OUT/ipz_${v}$i.log" 2>&1
  echo "== $v$i at $(el) s: $(grep -hE '^(all|reduce)' "$OUT/ip_${v}$i.log" "$OUT/ipz_${v}$i.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $2, $3, $4}')"
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
