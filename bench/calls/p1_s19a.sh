#!/usr/bin/env bash
# p1_s19a.sh — ONE GPU, session 19 call 1: where the small-M (decode) GEMM's time goes.
# Session 3: gemm_skinny.cuh reads B at 3.0-3.5 TB/s; 128 x 4096 x 7168 (96 CTAs, clusters of 3)
# is the decode GEMM+AR shape still at parity with cuBLAS + NCCL. (1) bench_stream: the same
# N x K read with nothing computed, by the kernel's box pattern at each cluster size, with
# longer per-row runs (3-D boxes), contiguous bulk copies and plain loads: the floor per pattern
# and CTA count. (2) bench_gemm at the decode shapes: the kernel's cluster sizes vs cuBLASLt.
# (3) the smoke runs left from session 18: bench_coll --zc-reg and bench_ag_gemm at 2 ranks
# sharing the GPU (times meaningless; their no-NCCL mode is new).
# Prediction (before the run): bulk >= 128 CTAs 3.9-4.1 TB/s, ldg ~3.8-4.0; tma2d R128 rises
# with CTAs: S 1 (32 CTAs at N 4096) ~1.5, S 3 (96) ~3.0, S 4 (128) ~3.4; 3-D boxes (c 2) +5-10%
# over 2-D at the same CTAs if DRAM row locality matters; bench_gemm rows as session 3
# (128 x 4096 x 7168 S 3 ~25 us vs cuBLASLt ~24); both smoke runs rc 0 with NaN NCCL columns.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19a.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
timeout -k 5 60 build/bench/bench_stream --json "$OUT/stream.jsonl" > "$OUT/stream.log" 2>&1
echo "bench_stream rc=$? at $(el) s"
args=()
for s in 16,4096,7168 128,4096,7168 16,8192,8192 128,8192,8192 128,8192,4096 128,4096,14336 512,4096,7168; do
  args+=(--shape "$s"); done
timeout -k 5 150 build/bench/bench_gemm --custom-only --only default,skinny_s1,skinny_s2,skinny_s3,skinny_s4 "${args[@]}" \
  --json "$OUT/gemm-decode.jsonl" > "$OUT/bench_gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"
export MELD_SHARE_GPU=1 MELD_TIMEOUT_MS=15000
run() { # name limit cmd...
  local n=$1 lim=$2; shift 2
  local left=$(( 320 - $(el) )); [ "$left" -lt 15 ] && { echo "$n: skipped (time)"; return; }
  [ "$lim" -gt "$left" ] && lim=$left
  GT_SPAWN_TIMEOUT_S=$((lim - 5)) timeout -k 5 "$lim" "$@" > "$OUT/$n.log" 2>&1
  echo "$n rc=$? at $(el) s: $(wc -l < "$OUT/$n.log") lines"
  grep -iE "error|fail|usage" "$OUT/$n.log" | grep -v "WARN" | cut -c1-160 | head -5
}
run coll 60 build/bench/bench_coll --zc-reg --max-bytes $((1 << 20)) --json "$OUT/coll.jsonl"
run ag 60 build/bench/bench_ag_gemm --shape 2048,10240,8192 --json "$OUT/ag.jsonl"
unset MELD_SHARE_GPU
cat "$OUT/stream.log"
grep -vE "^$" "$OUT/bench_gemm.log" | cut -c1-170 | tail -50
tail -5 "$OUT/coll.log" "$OUT/ag.log" 2>/dev/null | cut -c1-160
echo "total: $(el) s"
