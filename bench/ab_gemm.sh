#!/usr/bin/env bash
# ab_gemm.sh — one device call's A/B of bench_gemm builds (build/, build_NAME/ from
# bench/build_variant.sh): each build's bench_gemm at the same shapes, default plans, in the
# order given and then reversed (A B B A), each against cuBLASLt in its own run; one summary
# line per run: M x N x K: meld ms, cuBLASLt ms, cuBLASLt / meld.
#   OUT=... bench/ab_gemm.sh "build build_old" "2048,1280,8192 128,4096,7168" [bench_gemm args...]
. "$(dirname "$0")/device_env.sh" # set -u, $OUT, no multicast, el
builds=($1) shapes=($2)
shift 2
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
order=("${builds[@]}")
for ((j = ${#builds[@]} - 1; j >= 0; j--)); do order+=("${builds[j]}"); done
i=0
for b in "${order[@]}"; do
  i=$((i + 1))
  timeout -k 5 120 "$b/bench/bench_gemm" --custom-only --only default "${args[@]}" "$@" \
    --json "$OUT/ab-$i-$b.jsonl" > "$OUT/ab-$i-$b.log" 2>&1
  echo "== $i $b rc=$?"
  grep -E "^custom" "$OUT/ab-$i-$b.log" | awk '{printf "%s x %s x %s: %s %s %s | ", $2, $3, $4, $(NF-6), $(NF-4), $(NF-2)}'
  echo
done
