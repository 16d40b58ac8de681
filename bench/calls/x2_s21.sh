#!/usr/bin/env bash
# x2_s21.sh — 2 GPUs, prepared in session 21 (one H200 only): the collectives' session-21 defaults
# over NVLink. (1) test_coll at 2 ranks (lean LL + PDL by default, then PDL=0 / LEAN=0; the per-op
# ZC kernels on symmetric and registered buffers; a missing peer); (2) bench_coll --zc 4 KB ..
# 64 MB: "auto" (the defaults) vs "auto_s20" (PDL and lean off: session 20's default) vs NCCL in
# the same run, graphs up to 16 MB: issue 5's latency goal (<= 0.7 of NCCL's graph latency; LL
# measured 0.64-0.82 in session 4) and the 64 MB busbw with the per-op ZC kernels (s9: AG 299,
# RS 287, AR 307, A2A 302; goal 330 / AR 320, ~10 us fixed cost); (3) the ZC trace of 4 back-to-
# back 64 MB all-gathers and reduce-scatters (four events per CTA: thread 0's entry, the entry
# barrier, the move, the peers' done).
# Prediction (session 21): tests pass; 4 KB graph latency auto 1.0-1.3 us below auto_s20 (one GPU
# loopback: 1.1-1.2), i.e. ~0.5-0.6 of NCCL; 64 MB busbw +1-3% over session 9 (the ZC kernels'
# ~1-1.6 us shorter fixed path; one GPU, 4-64 KB); thread 0's entry >= 1.5 us of the fixed cost.
# (4) If build_exp/bench/bench_coll is there: the same bench rows from branch exp/relaxed-post
# (the entry's argument post as a relaxed store instead of st.release.sys; session 4's floor rows
# put ~1.5-3.5 us of every ZC / staged / fused call's entry on that fence), then main's again
# (A B A). Prediction: exp 1.5-3 us below main on every ZC row <= 1 MB, +1-2% busbw at 64 MB; LL
# rows equal (LL posts relaxed already). Build it on the CPU first:
#   git worktree add /tmp/exp exp/relaxed-post && (git -C /tmp/exp rebase main) &&
#   make -C /tmp/exp build/bench/bench_coll && mkdir -p build_exp/bench && cp /tmp/exp/build/bench/bench_coll build_exp/bench/
# Usage (device, nvidia-h200-x2): OUT=... [PREBUILT=1: carry build/bench/bench_coll build/tests/gpu/test_coll
#   (and build_exp/bench/bench_coll)] bash bench/calls/x2_s21.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s21}
d=$(date -u +%Y-%m-%d)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
build build/tests/gpu/test_coll build/bench/bench_coll
PREBUILT=1 MELD_TIMEOUT_MS=5000 TEST_TIMEOUT_S=200 timeout -k 5 220 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (2 ranks) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/test_coll.log" | head -4
timeout -k 5 200 build/bench/bench_coll --zc --max-bytes $((64 << 20)) --json "$OUT/coll-zc-x2-s21-$d.jsonl" > "$OUT/bench_coll.log" 2>&1
echo "== bench_coll --zc rc=$? at $(el) s"
grep -E " (4096|65536|67108864) " "$OUT/bench_coll.log" | grep -E "auto|zc_c16 " | cut -c1-120
for op in all_gather reduce_scatter; do
  MELD_PORT=$((47913 + ${#op})) MELD_TRACE="$OUT/coll-trace-$op.json" timeout -k 5 40 build/bench/bench_coll --zc --trace \
    --only $op --max-bytes $((64 << 20)) > "$OUT/trace_$op.log" 2>&1
  echo "== trace $op rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/coll-trace-$op*.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | head -12
done
if [ -x build_exp/bench/bench_coll ]; then
  for b in build_exp build; do
    timeout -k 5 200 $b/bench/bench_coll --zc --max-bytes $((64 << 20)) --json "$OUT/coll-zc-x2-s21-$b-$d.jsonl" > "$OUT/bench_coll_$b.log" 2>&1
    echo "== $b bench_coll --zc rc=$? at $(el) s"
    grep -E " (4096|1048576|67108864) " "$OUT/bench_coll_$b.log" | grep -E "auto |zc_c16 " | cut -c1-120
  done
fi
cd "$OUT" && tar czf logs.tgz *.log coll-trace-* && rm -f *.log coll-trace-*
