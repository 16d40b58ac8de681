#!/usr/bin/env bash
# ab_inproc.sh — an A/B of bench_inproc builds in one device job (the pattern of the one-GPU call
# scripts since session 22): runs each variant's binary in the given order with the same
# arguments, one log per run ($OUT/ip_<variant><n>.log), JSON lines labelled <label>_<variant><n>,
# and prints one summary line per run (op, kind, bytes, graph us).
# Usage: bench/ab_inproc.sh LABEL "b n n b" "b=build_b/bench n=build/bench" [bench_inproc args...]
#   (a variant's directory holds its bench_inproc; $OUT as in device_env.sh; MELD_TIMEOUT_MS
#   defaults to 3000 and every run is under `timeout`, so a hang costs a minute at most)
set -u
label=${1:?label}; order=${2:?order}; dirs=${3:?variant=dir list}; shift 3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export MELD_TIMEOUT_MS=${MELD_TIMEOUT_MS:-3000}
i=0
for v in $order; do
  i=$((i + 1)); dir=""
  for d in $dirs; do [ "${d%%=*}" = "$v" ] && dir=${d#*=}; done
  [ -n "$dir" ] || { echo "ab_inproc.sh: no directory for variant $v in \"$dirs\""; exit 2; }
  timeout -k 5 60 "$dir/bench_inproc" "$@" --json "$OUT/inproc.jsonl" --label "${label}_$v$i" > "$OUT/ip_$v$i.log" 2>&1
  echo "== $v$i rc=$?: $(grep -E '^(all|reduce)' "$OUT/ip_$v$i.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $2, $3, $4}')"
done
