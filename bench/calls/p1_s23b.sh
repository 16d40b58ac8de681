#!/usr/bin/env bash
# p1_s23b.sh — ONE GPU, session 23 call 1. Carry: build/bench build/tests/gpu/test_inproc
#   build/tests/gpu/test_coll build_a build_exp, built on the CPU: build_a = bench_inproc and
#   bench_coll of a worktree at 83dde73; build_exp = bench_inproc of branch exp/pull-relaxed-done
#   rebased on main (bench/build_variant.sh NAME @COMMIT does such builds). It absorbs
#   p1_s23a.sh, prepared in session 22 and never run by itself (removed; in git history).
# (1) main's tests: test_inproc (2 ranks as threads), test_coll (one rank).
# (2) the A/B prepared in session 22: a = 83dde73 (before the ZC trace guard), b = main, e = pull-relaxed-done.
#     Predictions (session 22): (b) 0 to -1 us a forced ZC call, LL equal; (e) reduce-scatter ZC
#     -0.3..-0.8 us at 2 ranks, others equal.
# (3) NEW: the fused ops with both ranks in flight on one GPU (bench_inproc --fused; each rank on
#     half the SMs, the peer's memory in place of NVLink), against meld_gemm of the rank's own
#     GEMM on the same SMs, sustained (BENCH_SETTLE_MS=300), two passes in opposite order.
#     Question: is the 2-GPU fused overhead of session 9 (meld / meld_gemm AG 1.05-1.09, RS
#     1.16-1.18, AR 1.24) the protocol and schedule with real concurrency, or NVLink / the link's
#     power? Loopback (one rank playing both) said AG +1-2%, RS +3-4%, AR zero copy +6%.
#     Prediction: fused / gemm AG 1.02-1.05, RS 1.04-1.08, AR slots 1.10-1.20, AR symc 1.05-1.10;
#     unfused AG ~1.05-1.10, RS/AR 1.05-1.15 (the collective at HBM speed). All rows rel_err < 1e-2.
# Usage (device): OUT=... bash bench/calls/p1_s23b.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | head -6
PREBUILT=1 MELD_TIMEOUT_MS=3000 timeout -k 5 60 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_coll.log" | head -4
export MELD_WORKSPACE_BYTES=402653184
BENCH_SETTLE_MS=300 MELD_TIMEOUT_MS=5000 timeout -k 5 200 build/bench/bench_inproc --ranks 2 --samples 3 \
  --fused ag:8192,5120,8192/ag:8192,14336,4096/rs:8192,8192,8192/rs:8192,4096,14336/ar:8192,8192,8192 \
  --json "$OUT/inproc_fused.jsonl" --label s23b > "$OUT/fused.log" 2>&1
echo "== fused rc=$? at $(el) s"; grep -vE "^\[meld" "$OUT/fused.log" | tail -40
unset MELD_WORKSPACE_BYTES
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
