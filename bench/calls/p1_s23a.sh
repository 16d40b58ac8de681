#!/usr/bin/env bash
# p1_s23a.sh — ONE GPU, prepared at the end of session 22 (no device time left). Verifies and
# times two CPU-built changes with two ranks in flight (bench_inproc):
#  (b) main at b05d1a9: the ZC kernel's trace calls only when tracing (each of its 4 calls a ZC
#      call made tested t->events through a pointer into parameter space: a generic load, cost
#      unknown); A = a44dda6..83dde73's binary (before it);
#  (e) branch exp/pull-relaxed-done: pull-only ZC calls (reduce-scatter, one-shot all-reduce)
#      post their done with a relaxed store instead of st.release.sys.
# Build on the CPU first (each ~4 min on 2 cores):
#   git worktree add /tmp/wt_a 83dde73 && make -C /tmp/wt_a build/bench/bench_inproc build/bench/bench_coll &&
#     mkdir -p build_a/bench && cp /tmp/wt_a/build/bench/bench_{inproc,coll} build_a/bench/
#   git worktree add /tmp/wt_e exp/pull-relaxed-done && (git -C /tmp/wt_e rebase main) && make -C /tmp/wt_e build/bench/bench_inproc &&
#     mkdir -p build_exp/bench && cp /tmp/wt_e/build/bench/bench_inproc build_exp/bench/
#   make build/bench/bench_inproc build/bench/bench_coll build/tests/gpu/test_inproc build/tests/gpu/test_coll
# Predictions (session 22): tests pass; (b) 0 to -1 us a ZC call (forced, one rank and 2
# ranks), LL rows equal; (e) reduce-scatter ZC -0.3..-0.8 us at 2 ranks, other ops equal.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s23a.sh (carry build/bench build/tests/gpu/test_inproc
#   build/tests/gpu/test_coll build_a build_exp)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_inproc.log" | head -6
PREBUILT=1 MELD_TIMEOUT_MS=3000 timeout -k 5 60 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_coll.log" | head -4
for pass in 1 2; do
  for v in a b e; do
    bin=build/bench; [ $v = a ] && bin=build_a/bench; [ $v = e ] && bin=build_exp/bench
    MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin/bench_inproc --ranks 2 --sizes 4096,65536,1048576 --kinds sym --zc \
      --json "$OUT/inproc.jsonl" --label "s23a_${v}$pass" > "$OUT/ip_${v}$pass.log" 2>&1
    echo "== $v$pass rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/ip_${v}$pass.log" | awk '{printf "%s %s %s | ", substr($1,1,6), $3, $4}')"
    if [ $v != e ]; then
      MELD_TIMEOUT_MS=3000 timeout -k 5 30 $bin/bench_coll --zc --only all_reduce --max-bytes 65536 > "$OUT/coll_${v}$pass.log" 2>&1
      echo "   one rank: $(grep -E '(ll_loop_lean_pdl|zc).*graph' "$OUT/coll_${v}$pass.log" | awk '{printf "%s %s %s | ", $2, $3, $5}')"
    fi
  done
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
