#!/usr/bin/env bash
# p1_s22b.sh — ONE GPU, session 22 call 2. Changes since call 1 (p1_s22a.sh, at a28fd34):
#  (a) meld_call_end: a one-CTA call counts nothing (no acq_rel atomic on the done word: the CTA
#      is the last); ZC, ROUNDS, RING and GEMM+RS kernels of one CTA.
#  (b) ranks as threads of one process: peers of the same process use each other's buffers by
#      address (CUDA IPC cannot open its own process's handles: single-process multi-GPU use
#      failed before); bench/bench_inproc.cu runs P ranks as threads. On one GPU their kernels
#      run AT THE SAME TIME (processes sharing a GPU take turns), so the 2-rank protocol is timed
#      as it runs, with the GPU's own memory in place of NVLink.
# Parts: (1) all 7 GPU test programs at one rank (B); (2) bench_coll ZC forced + LL loopback,
# A (a28fd34) B A B, all-reduce and all-gather 4-64 KB; (3) bench_inproc 2 ranks: ord (LL) and
# sym (ZC), 3 ops, 4 KB / 64 KB / 1 MB, checked; then 3 ranks (sizes multiple of 6);
# (4) the relaxed argument post (build_exp = this tree + branch exp/relaxed-post) vs B at
# 2 in-process ranks, B E B E, ZC rows.
# Predictions (before the run): (1) pass. (2) ZC 4 KB all-reduce 5.1 -> 4.5-4.8 us (the
# acq_rel atomic and its release), LL rows equal (+-0.05). (3) rel_err <= 1e-2 everywhere
# (bf16 rank-order sums: 0 for gathers, ~1e-3 for sums); graph per call at 4 KB: ord (lean LL,
# P = 2) 2.6-3.2 us (loopback 2.42), sym (ZC) 5-7 us (handshake, done flags through L2,
# system-scope release); 3 ranks +0.3-1 us. (4) relaxed post: ZC 4 KB -0.3..-1.0 us.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22b.sh
#   (carry build/bench/bench_coll build/bench/bench_inproc build/tests/gpu build_a build_exp)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=120 timeout -k 5 200 tests/gpu/run.sh > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-150 | head -12
for pass in 1 2; do
  for v in a b; do
    bin=build/bench/bench_coll; [ $v = a ] && bin=build_a/bench/bench_coll
    for op in all_reduce all_gather; do
      MELD_TIMEOUT_MS=3000 timeout -k 5 30 $bin --zc --only $op --max-bytes 65536 > "$OUT/coll_${v}${pass}_$op.log" 2>&1
      echo "== $v$pass $op rc=$? at $(el) s: $(grep -E '(ll_loop_lean_pdl|zc).*graph' "$OUT/coll_${v}${pass}_$op.log" | awk '{printf "%s %s %s | ", $2, $3, $5}')"
    done
  done
done
for P in 2 3; do
  sizes=4096,65536,1048576; [ $P = 3 ] && sizes=6144,98304,1572864
  MELD_TIMEOUT_MS=3000 timeout -k 5 90 build/bench/bench_inproc --ranks $P --sizes $sizes --json "$OUT/inproc.jsonl" --label "b_p$P" > "$OUT/inproc_p$P.log" 2>&1
  echo "== inproc P=$P rc=$? at $(el) s"; cat "$OUT/inproc_p$P.log" | tail -22
done
for pass in 1 2; do
  for v in b e; do
    bin=build/bench/bench_inproc; [ $v = e ] && bin=build_exp/bench/bench_inproc
    MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin --ranks 2 --kinds sym --sizes 4096,65536 --json "$OUT/inproc.jsonl" --label "${v}$pass" > "$OUT/inproc_${v}$pass.log" 2>&1
    echo "== $v$pass rc=$? at $(el) s: $(grep -E '^(all|reduce)' "$OUT/inproc_${v}$pass.log" | awk '{printf "%s %s %s %s | ", $1, $3, $4, $6}')"
  done
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
