#!/usr/bin/env bash
# x2_first.sh — TWO GPUs (nvidia-h200-x2): the FIRST call to make when a 2-GPU machine is lent
# (none since session 9; everything of sessions 10-37 on the collectives and the fused ops has run
# on one H200 only). The most important parts of bench/calls/x2_s23.sh first, in <= ~540 s of wall
# time (each step capped by a phase deadline; a step that does not fit is skipped, not cut short
# at random by the device's 600 s):
#   (1) issues 5-7 correctness on 2 GPUs: test_coll (2 rank processes: every collective vs the
#       reference, 1000 back-to-back, graphs, symmetric / registered buffers, missing peer),
#       test_inproc 2 (one rank per GPU in ONE process: collectives, CE, fused GEMM+RS / GEMM+AR /
#       AG+GEMM; first run on 2 GPUs), test_gemm_rs and test_ag_gemm (2 rank processes: the fused
#       ops over CUDA IPC; last run on 2 GPUs in session 9, at 4f72ac1);
#   (2) issue 5's bandwidth / latency table: bench_coll --zc 4 KB .. 64 MB, "auto" vs "auto_s20"
#       (session 20's defaults) vs NCCL in the same run (graphs up to 16 MB), ZC at 8-32 CTAs, CE;
#   (3) issues 6-7: bench_inproc --fused, one rank per GPU: fused AG+GEMM / GEMM+RS / GEMM+AR
#       against meld_gemm (the compute alone) and meld's unfused sequence, sustained, 2 pairs of
#       passes (x2_s23.sh part 5, same shapes and settings);
#   (4) while time is left: x2_s23.sh's A/Bs (part 6: the AR's early copy; part 7: the 2-rank
#       interleaved RS order), then part 3's bench_inproc LL / ZC rows (what NVLink adds a call).
#   Left to x2_s23.sh: its CE bench_inproc rows and the ZC traces (part 4).
# Predictions (x2_s23.sh, written sessions 22-27; docs/perf-notes.md "At a glance", sessions 9, 23):
#   - every test passes;
#   - (2) latency goal <= 0.7 of NCCL's graph time at <= 256 KB: LL 4 KB graph ~2.6-3.1 us on
#     NVLink (~0.4-0.5 of NCCL; session 4 on 2 GPUs: 4.2-4.7 us with session 20's kernels),
#     auto_s20 1.3-1.6 us above auto; ZC 4 KB 5-7 us (s4: 9.9-10.4);
#   - (2) 64 MB busbw +3-6% over session 9 (AG 299, RS 287, AR 307, A2A 302 GB/s; goal 330, AR
#     320); CE all-gather / all-to-all 64 MB 335-360 GB/s (ZC 305-315), CE slower than ZC below
#     ~4 MB; if CE pulls come out far below that, MELD_COLL_CE stays opt-in;
#   - (3) the 2-GPU excess over the one-GPU figures reappears: fused / gemm RS and AR >= 1.10
#     (one GPU, session 23: AG 1.02-1.10, RS 1.03, AR zero copy 1.04-1.06; session 9 on 2 GPUs: AG
#     1.05-1.09, RS 1.16-1.18, AR zero copy 1.24), the two GPUs' gemm times differ by 1-4% (the
#     gemm rows' ms / ms_min_rank in the JSON);
#   - (4) the early copy -1..-3% at 8192^3 (session 9 on 2 GPUs: 1.068 vs 1.082 ms); the RS
#     interleaved order: no written prediction (never run on 2 GPUs; the question is whether
#     spreading the pushes over the call beats session 9's all-CTAs-push-at-once rotation).
# Estimated wall: build ~100-120 s cold (0 with PREBUILT=1), tests ~60-120 s, bench_coll ~30-60,
# fused ~60-90, A/Bs ~40-60, inproc rows ~30: ~320-480 s cold; phases end by 320 / 400 / 500 /
# 530 s.
# Usage (device, nvidia-h200-x2): OUT=... bash bench/calls/x2_first.sh, or with binaries built here:
#   bench/pack_bins.sh build/tests/gpu/test_coll build/tests/gpu/test_inproc build/tests/gpu/test_gemm_rs \
#     build/tests/gpu/test_ag_gemm build/bench/bench_coll build/bench/bench_inproc
#   then carry build/carry and run PREBUILT=1 bash bench/calls/x2_first.sh
# Out ($OUT, at most 8 files come back): build.log, logs.tgz (every log, rewritten after each
# step), summary.txt, coll-zc-x2-first-DATE.jsonl, inproc-fused-x2-first-DATE.jsonl,
# inproc-x2-first-DATE.jsonl. The summary table is printed last.
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el, tl, build
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-first}
d=$(date -u +%Y-%m-%d)
L=$(mktemp -d /tmp/x2_first.XXXXXX) # logs live outside $OUT: one archive comes back, whatever happens
pack() { tar czf "$OUT/logs.tgz" -C "$L" . 2>/dev/null; }
# ph END N: a step's timeout, N or what is left before END (seconds since the start), at least 1
ph() { DEADLINE=$1 tl "$2"; }
# fits END S: true when at least S seconds are left before END (else the step is reported skipped)
fits() { [ $(( $1 - $(el) )) -ge "$2" ]; }
{ nvidia-smi -L; nvidia-smi topo -m; } > "$L/gpus.txt" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "== $ngpu GPU(s), commit $BENCH_COMMIT"; [ "$ngpu" -ge 2 ] || echo "WARNING: this call needs 2 GPUs (nvidia-h200-x2)"
build build/tests/gpu/test_coll build/tests/gpu/test_inproc build/tests/gpu/test_gemm_rs build/tests/gpu/test_ag_gemm \
  build/bench/bench_coll build/bench/bench_inproc
# ---- (1) correctness, issues 5-7 (phase ends at 320 s) ----
T1=320
gtest() { # NAME CAP [VAR=VAL ...]: one GPU test program through tests/gpu/run.sh (built above)
  local name=$1 cap=$2; shift 2
  if ! fits $T1 15; then echo "== $name skipped (phase 1 out of time at $(el) s)"; echo "skipped" > "$L/$name.log"; return; fi
  env "$@" PREBUILT=1 MELD_TIMEOUT_MS=5000 TEST_TIMEOUT_S=$((cap - 5)) timeout -k 5 "$(ph $T1 "$cap")" \
    tests/gpu/run.sh "$name" > "$L/$name.log" 2>&1
  echo "== $name rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu|missing" "$L/$name.log" | cut -c1-200 | head -8
  pack
}
gtest test_coll 100
gtest test_inproc 100 TEST_INPROC_RANKS=2
gtest test_gemm_rs 90
gtest test_ag_gemm 60
# ---- (2) issue 5's table vs NCCL (phase ends at 400 s) ----
T2=400
if fits $T2 25; then
  MELD_TIMEOUT_MS=5000 timeout -k 5 "$(ph $T2 150)" build/bench/bench_coll --zc --max-bytes $((64 << 20)) \
    --json "$OUT/coll-zc-x2-first-$d.jsonl" > "$L/bench_coll.log" 2>&1
  echo "== bench_coll --zc rc=$? at $(el) s"
else echo "== bench_coll skipped at $(el) s"; fi
pack
# ---- (3) the fused ops vs meld_gemm and the unfused sequence (phase ends at 500 s) ----
T3=500
if fits $T3 30; then
  MELD_WORKSPACE_BYTES=402653184 BENCH_SETTLE_MS=500 MELD_TIMEOUT_MS=5000 timeout -k 5 "$(ph $T3 180)" \
    build/bench/bench_inproc --ranks 2 --samples 3 --fused-pairs 2 \
    --fused ag:8192,5120,8192/ag:8192,14336,4096/rs:8192,8192,8192/rs:8192,4096,14336/ar:8192,8192,8192 \
    --json "$OUT/inproc-fused-x2-first-$d.jsonl" --label x2 > "$L/inproc_fused.log" 2>&1
  echo "== bench_inproc --fused rc=$? at $(el) s"
else echo "== bench_inproc --fused skipped at $(el) s"; fi
pack
# ---- (4) while time is left (until 530 s) ----
T4=${DEADLINE:-530}
ab_row() { # NAME SHAPES --ab ... (x2_s23.sh parts 6-7)
  local name=$1 shapes=$2; shift 2
  if ! fits $T4 30; then echo "== $name skipped at $(el) s"; return; fi
  MELD_WORKSPACE_BYTES=402653184 BENCH_SETTLE_MS=300 BENCH_VARIANTS=gemm,fused MELD_TIMEOUT_MS=5000 timeout -k 5 "$(ph $T4 90)" \
    build/bench/bench_inproc --ranks 2 --samples 3 --fused-pairs 2 --fused "$shapes" "$@" \
    --json "$OUT/inproc-fused-x2-first-$d.jsonl" --label "x2_$name" > "$L/inproc_$name.log" 2>&1
  echo "== $name rc=$? at $(el) s"
  pack
}
ab_row early_copy ar:8192,8192,8192/ar:8192,8192,1024 --ab MELD_GEMM_AR_EARLY_COPY=0,1
ab_row rs_order rs:8192,8192,8192/rs:8192,14336,4096 --ab MELD_GEMM_RS_ORDER=rotate,ileave
for kind in ord zc; do # x2_s23.sh part 3: LL on ordinary buffers, forced ZC on symmetric ones
  if ! fits $T4 20; then echo "== inproc $kind skipped at $(el) s"; continue; fi
  if [ $kind = ord ]; then a=(--kinds ord); else a=(--kinds sym --zc); fi
  MELD_TIMEOUT_MS=3000 timeout -k 5 "$(ph $T4 45)" build/bench/bench_inproc --ranks 2 --sizes 4096,65536,262144,1048576 \
    "${a[@]}" --json "$OUT/inproc-x2-first-$d.jsonl" --label x2 > "$L/inproc_$kind.log" 2>&1
  echo "== bench_inproc $kind rc=$? at $(el) s"
  pack
done
# ---- summary (last) ----
{
  echo "== x2_first summary: commit $BENCH_COMMIT, $ngpu GPU(s), $(el) s"
  grep -m2 '^GPU' "$L/gpus.txt"
  echo "-- (1) tests: checks, tests/gpu/run.sh's count, lines with FAIL"
  for t in test_coll test_inproc test_gemm_rs test_ag_gemm; do
    printf "%-14s %s | %s FAIL lines\n" "$t" "$(grep -hE '^test_[a-z_]+: [0-9]+ checks|^== gpu:|^skipped' "$L/$t.log" 2>/dev/null |
      tail -2 | tr '\n' ' ')" "$(grep -c 'FAIL' "$L/$t.log" 2>/dev/null)"
  done
  echo "-- (2) bench_coll --zc: graph us meld/nccl (ratio; goal <= 0.7) at 4 KB and 256 KB; 64 MB busbw GB/s (plain)"
  for op in all_gather reduce_scatter all_reduce all_to_all; do
    awk -v o=$op '$1 == o && $4 == "graph" && ($3 == 4096 || $3 == 262144) && ($2 == "auto" || $2 == "auto_s20") {
        s = s sprintf(" %s %s %.2f/%.2f (%.2f)", $3 == 4096 ? "4K" : "256K", $2, $5, $6, $9) }
      $1 == o && $4 == "plain" && $3 == 67108864 && ($2 == "auto" || $2 == "zc_c16" || $2 == "ce") {
        b = b sprintf(" %s %.0f", $2, $7); n = $8 }
      END { printf "%-15s%s | 64MB%s nccl %s\n", o, s, b, n == "" ? "-" : sprintf("%.0f", n) }' "$L/bench_coll.log" 2>/dev/null
  done
  echo "-- (3)-(4) fused ops, one rank per GPU: ms (mean of passes, slower rank) and / gemm"
  grep -hE "mean of" "$L"/inproc_fused.log "$L"/inproc_early_copy.log "$L"/inproc_rs_order.log 2>/dev/null |
    awk '{ printf "%-8s %s x %s x %s  %-16s %8.4f  %6.3f\n", $1, $2, $4, $6, $7, $8, $9 }'
  grep -hE "FAIL" "$L"/inproc_*.log 2>/dev/null | head -5
  echo "-- (4) bench_inproc 2 ranks, graph us a call (LL ord / forced ZC)"
  grep -hE "^(all|reduce)" "$L"/inproc_ord.log "$L"/inproc_zc.log 2>/dev/null | awk '{ printf "%s %s %s %s | ", $1, $2, $3, $4 } END { print "" }'
} > "$L/summary.txt" 2>&1
cp "$L/summary.txt" "$OUT/summary.txt"; pack; rm -rf "$L"
cat "$OUT/summary.txt"
