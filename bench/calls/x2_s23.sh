#!/usr/bin/env bash
# x2_s23.sh — 2 GPUs, prepared at the end of session 22 (one H200 only); replaces x2_s21.sh (removed;
# in git history: its part 4, the relaxed post, is in main since session 22). Issue 5 on NVLink with the
# session 21-22 kernels: lean LL + PDL defaults, per-op ZC kernels, one-CTA exit, relaxed post.
# (1) test_coll at 2 ranks; test_inproc with one rank per GPU in ONE process (the one-process
# multi-GPU mode: peers by address, peer access enabled; first run on 2 GPUs);
# (2) bench_coll --zc 4 KB .. 64 MB: "auto" vs "auto_s20" (session 20's defaults) vs NCCL in the
# same run, graphs up to 16 MB: the latency goal (<= 0.7 of NCCL's graph time at <= 256 KB) and
# the 64 MB busbw (s9: AG 299, RS 287, AR 307, A2A 302; goal 330 / AR 320);
# (3) bench_inproc --ranks 2 on the 2 GPUs (one process): LL and forced ZC rows, to set beside the
# one-GPU rows of session 22 (bench/results/inproc-p1-s22h.jsonl): what NVLink adds per call;
# (4) the ZC trace of 4 back-to-back 64 MB all-gathers and reduce-scatters.
# (5) (added in session 23) bench_inproc --fused, one rank per GPU: the fused ops against meld_gemm
# with both GPUs in flight, sustained, 2 pairs of passes; the gemm row's ms / ms_min_rank show the
# two GPUs' own speeds apart. On one GPU (session 23, 2 ranks on half the SMs each) fused / gemm
# was AG 1.02-1.10, RS 1.03, AR zero copy 1.04-1.06; session 9 on 2 GPUs: AG 1.05-1.09, RS
# 1.16-1.18, AR zero copy 1.24. Prediction: the 2-GPU excess over the one-GPU figures reappears
# (RS / AR >= 1.10) and the two GPUs' gemm times differ by 1-4%.
# Predictions (session 22): tests pass; LL 4 KB graph ~2.8-3.2 us (one GPU, 2 ranks in flight:
# 2.40-2.76; session 4 on 2 GPUs: 4.2-4.7 with session 20's kernels, which cost 3.95-4.26 on one
# GPU), i.e. ~0.45-0.55 of NCCL; auto_s20 1.3-1.6 us above auto; ZC 4 KB 7-9 us (s4: 9.9-10.4);
# 64 MB busbw +2-5% over session 9 (a ~2-3 us shorter fixed cost of ~112 us).
# Session 23 update (one GPU, 2 ranks in flight): LL 4 KB now 2.24-2.67 us there (2.40-2.76 in
# session 22) and forced ZC 4 KB 3.8-5.3 (6.1-7.8), 1 MB 6.1-8.2 (7.8-9.6): predictions now LL 4 KB
# graph ~2.6-3.1 us on NVLink (~0.4-0.5 of NCCL), ZC 4 KB 5-7 us, 64 MB busbw +3-6% over session 9.
# Session 24 update: bench_coll --zc now also times the CE engine (copy engines pull; rows "ce",
# "ce_inplace") for all-gather and all-to-all from 1 MB, and bench_inproc --ce runs below.
# Prediction: CE all-gather / all-to-all 64 MB busbw 335-360 GB/s (copy engine 387-391 over NV18,
# minus a ~8-12 us fixed cost of two kernels, the fork and the join), ZC 305-315; CE slower than
# ZC below ~4 MB (its fixed cost on one GPU: 6.05 us at 4 KB vs ZC 5.3). Unknown: the 387-391 GB/s
# of sessions 1-2 were copy-engine copies in one direction; the CE engine READS the peer (pull).
# If CE pulls come out far below that, the answer is not a push (a copy engine cannot skip its
# copy when the handshake fails, so a push could write a peer that never joined) but
# MELD_COLL_CE staying opt-in.
# Usage (device, nvidia-h200-x2): OUT=... [PREBUILT=1: carry build/bench/bench_coll
#   build/bench/bench_inproc build/tests/gpu] bash bench/calls/x2_s23.sh
# (bench/calls/x2_first.sh runs parts 1, 2 and 5 first, with test_gemm_rs / test_ag_gemm, in ~540 s.)
# Estimated wall (session 23's one-GPU logs, session 9's 2-GPU ones): build ~100-120 s cold (0 with
# PREBUILT=1), tests ~60 s, bench_coll ~30-60, bench_inproc rows ~45, traces ~20, fused ~60-90, A/Bs
# ~40-60: ~350-450 s; every step capped by tl (bench/device_env.sh: the script ends by 570 s).
# test_inproc runs at 2 ranks only (TEST_INPROC_RANKS=2: one rank per GPU, this call's intent; its
# default became 2,3,4 in session 24, i.e. here 3 and 4 ranks sharing the 2 GPUs).
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s23}
d=$(date -u +%Y-%m-%d)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
build build/tests/gpu/test_coll build/tests/gpu/test_inproc build/bench/bench_coll build/bench/bench_inproc
PREBUILT=1 TEST_INPROC_RANKS=2 MELD_TIMEOUT_MS=5000 TEST_TIMEOUT_S=200 timeout -k 5 "$(tl 260)" tests/gpu/run.sh test_coll test_inproc > "$OUT/tests.log" 2>&1
echo "== test_coll, test_inproc (2 GPUs) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu|rel err|missing" "$OUT/tests.log" | head -14
MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 200)" build/bench/bench_coll --zc --max-bytes $((64 << 20)) --json "$OUT/coll-zc-x2-s23-$d.jsonl" > "$OUT/bench_coll.log" 2>&1
echo "== bench_coll --zc rc=$? at $(el) s"
grep -E " (4096|65536|262144|67108864) " "$OUT/bench_coll.log" | grep -E "auto|nccl|zc_c16 " | cut -c1-120
MELD_TIMEOUT_MS=3000 timeout -k 5 "$(tl 60)" build/bench/bench_inproc --ranks 2 --sizes 4096,65536,262144,1048576 --kinds ord \
  --json "$OUT/inproc-x2-s23-$d.jsonl" --label x2 > "$OUT/inproc_ord.log" 2>&1
MELD_TIMEOUT_MS=3000 timeout -k 5 "$(tl 60)" build/bench/bench_inproc --ranks 2 --sizes 4096,65536,262144,1048576 --kinds sym --zc \
  --json "$OUT/inproc-x2-s23-$d.jsonl" --label x2 > "$OUT/inproc_zc.log" 2>&1
MELD_TIMEOUT_MS=3000 timeout -k 5 "$(tl 60)" build/bench/bench_inproc --ranks 2 --only all_gather --sizes 1048576,16777216,67108864,268435456 \
  --kinds sym --ce --json "$OUT/inproc-x2-s23-$d.jsonl" --label x2_ce > "$OUT/inproc_ce.log" 2>&1
echo "== bench_inproc (2 GPUs, one process) at $(el) s"; grep -hE "^(all|reduce)|FAIL" "$OUT"/inproc_*.log
for op in all_gather reduce_scatter; do
  MELD_PORT=$((47913 + ${#op})) MELD_TRACE="$OUT/coll-trace-$op.json" MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 40)" build/bench/bench_coll --zc --trace \
    --only $op --max-bytes $((64 << 20)) > "$OUT/trace_$op.log" 2>&1
  echo "== trace $op rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/coll-trace-$op*.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | head -12
done
MELD_WORKSPACE_BYTES=402653184 BENCH_SETTLE_MS=500 MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 300)" build/bench/bench_inproc --ranks 2 \
  --samples 3 --fused-pairs 2 --fused ag:8192,5120,8192/ag:8192,14336,4096/rs:8192,8192,8192/rs:8192,4096,14336/ar:8192,8192,8192 \
  --json "$OUT/inproc-fused-x2-s23-$d.jsonl" --label x2 > "$OUT/inproc_fused.log" 2>&1
echo "== bench_inproc --fused (2 GPUs) rc=$? at $(el) s"; grep -E "mean of|FAIL" "$OUT/inproc_fused.log"
# (6) (added in session 27) the AR's early copy, the default since session 27 where C is ordinary
# memory (result slots): one GPU, 2 ranks in flight, 8192^3 -3%; session 9 on 2 GPUs 1.068 vs
# 1.082 ms. Prediction: -1..-3% on NVLink (the tail's copy of half of C by one warp per CTA).
# (7) the 2-rank interleaved order for GEMM+RS (opt-in since session 13, never run on 2 GPUs:
# session 9's trace had every CTA pushing in the first half at once). Both as A/Bs in one process
# (bench_inproc --ab: the values in the same passes).
ab_row() { # NAME SHAPES --ab ...
  local name=$1 shapes=$2; shift 2
  MELD_WORKSPACE_BYTES=402653184 BENCH_SETTLE_MS=300 BENCH_VARIANTS=gemm,fused MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 200)" \
    build/bench/bench_inproc --ranks 2 --samples 3 --fused-pairs 2 --fused "$shapes" "$@" \
    --json "$OUT/inproc-fused-x2-s23-$d.jsonl" --label "x2_$name" > "$OUT/inproc_$name.log" 2>&1
  echo "== $name rc=$? at $(el) s"; grep -E "mean of|FAIL" "$OUT/inproc_$name.log"
}
ab_row early_copy ar:8192,8192,8192/ar:8192,8192,1024 --ab MELD_GEMM_AR_EARLY_COPY=0,1
ab_row rs_order rs:8192,8192,8192/rs:8192,14336,4096 --ab MELD_GEMM_RS_ORDER=rotate,ileave  # (the order needs >= 2 waves a group: N 4096 would not take it)
# (a device call brings back at most 8 files: the logs and traces in one archive, even where a
# trace is missing, which made the old `tar ... && rm` keep every log loose)
cd "$OUT" && tar czf logs.tgz $(ls *.log coll-trace-* 2>/dev/null); rm -f *.log coll-trace-*
echo "== done at $(el) s"
