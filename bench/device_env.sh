# device_env.sh — the common start of the bench/*.sh device scripts (sourced, not run): strict
# variables, $OUT (where results go; the device tool's folder, else /tmp/out), no NVLink
# multicast for NCCL / torch / NVSHMEM, `el` (seconds since the script began), `tl` (a step's
# time limit within the script's deadline) and `build`.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
# tl N: a step's `timeout` in seconds: N, or the seconds left before DEADLINE (seconds since the
# script began; default 570, inside the device's 600 s a command) where fewer (at least 1), so a
# late or hung step is cut short and the script's last lines (archive, summary) still run.
tl() { local l=$(( ${DEADLINE:-570} - $(el) )); [ "$l" -lt "$1" ] || l=$1; [ "$l" -ge 1 ] || l=1; echo "$l"; }
# Binaries packed by bench/pack_bins.sh and carried: unpacked once per device copy.
# The binaries' commit (bench/pack_bins.sh): the device's .git is the session's first commit, so
# without carried binaries pass BENCH_COMMIT=$(git rev-parse --short HEAD) in the call's command.
if [ -f build/carry/COMMIT ] && [ -z "${BENCH_COMMIT:-}" ]; then export BENCH_COMMIT; BENCH_COMMIT=$(cat build/carry/COMMIT); fi
if [ -f build/carry/bins.tar.xz ] && [ ! -f build/carry/.unpacked ]; then
  tar xJf build/carry/bins.tar.xz && touch build/carry/.unpacked && echo "unpacked build/carry/bins.tar.xz: $(el) s"
fi
# build TARGET...: make them (log in $OUT/build.log); on failure print the errors and stop.
# PREBUILT=1: nothing is built (the binaries were built on the CPU machine and carried with the
# device tool's `carry`, e.g. build/bench and build/tests/gpu: ~80-100 s of device time a call).
build() {
  if [ "${PREBUILT:-0}" = 1 ]; then echo "build: prebuilt (PREBUILT=1)"; return 0; fi
  make -j"$(nproc)" "$@" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
  echo "build: $(el) s"
}
# ip_row LABEL NAME ENV BIN ARGS...: one bench_inproc run under `timeout` with ENV ("VAR=VAL ...",
# or - for none), JSON lines labelled LABEL_NAME into $OUT/inproc.jsonl, its log in
# $OUT/ip_NAME.log, and one summary line (op, kind, bytes, graph us a call per row).
ip_row() {
  local label=$1 name=$2 env=$3 bin=$4; shift 4
  [ "$env" = - ] && env=IP_ROW_NO_ENV=1
  env $env timeout -k 5 60 "$bin" "$@" --json "$OUT/inproc.jsonl" --label "${label}_$name" > "$OUT/ip_$name.log" 2>&1
  echo "== $name rc=$?: $(grep -E '^(all|reduce)' "$OUT/ip_$name.log" | awk '{printf "%s %s %s %s | ", substr($1,1,6), $2, $3, $4}')"
}
# fused_row P ENV SHAPES NAME [ARGS...]: one bench_inproc --fused run (sustained: settle 100 ms,
# 3 samples, 2 passes) with P ranks under ENV ("VAR=VAL ...", e.g. IP_ROW_NO_ENV=1 for none) and
# ARGS (e.g. --ab MELD_VAR=a,b --fused-pairs 2), JSON lines labelled ${FR_LABEL}_NAME_n into
# $OUT/inproc.jsonl, its log in $L/NAME_n.log (n counts the script's rows), and one line: each
# variant's mean ms and its ratio to meld_gemm's.
fr_n=0
fused_row() {
  fr_n=$((fr_n + 1)); local log="$L/$4_$fr_n.log" p=$1 e=$2 sh=$3 name=$4
  shift 4
  env $e BENCH_SETTLE_MS=100 timeout -k 5 150 build/bench/bench_inproc --ranks $p --sizes $((2048 * p)) --samples 3 \
    --fused "$sh" --json "$OUT/inproc.jsonl" --label "${FR_LABEL:-row}_${name}_$fr_n" "$@" > "$log" 2>&1
  echo "== P=$p $name [$e $*] rc=$? at $(el) s: $(grep -E 'mean of' "$log" | grep -v ' gemm ' | awk '{printf "%s/%s %s %s %s | ", substr($1,6), $6, $7, $8, $9}')"
}
# test_ranks BIN P...: the ranks-as-threads GPU test BIN at each rank count under `timeout` (log
# $OUT/<name>_P.log), one line each: its exit status and its checks / failures.
test_ranks() {
  local bin=$1 name; name=$(basename "$1"); shift
  for p in "$@"; do
    timeout -k 5 150 "$bin" "$p" > "$OUT/${name}_$p.log" 2>&1
    echo "== $name $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/${name}_$p.log" | cut -c1-300 | head -5
  done
}
# moe_rows SAMPLES: bench_moe --ranks 1 on its rows (BENCH_MOE_ROWS / _VARIANTS / _AB as exported),
# sustained (BENCH_SETTLE_MS, default 200), JSON lines into $OUT/moe.jsonl, log
# $OUT/bench_moe_p1.log, and its table's lines.
moe_rows() {
  BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} timeout -k 5 300 build/bench/bench_moe --ranks 1 --samples "$1" \
    --json "$OUT/moe.jsonl" > "$OUT/bench_moe_p1.log" 2>&1
  echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1|FAIL|rror" "$OUT/bench_moe_p1.log" | head -60
}
# moe_trace ROW [VAR=VAL ...]: one bench_moe run of row ROW (nocopy, 2 samples, no settle) with
# MELD_TRACE into $OUT (deleted after), the routing kernel's phase medians and the kernel
# boundaries around it (tools/trace_phases.py); VAR=VAL set for the run (e.g. MELD_MOE_ROUTE=3).
# (Session 34's call scripts wrote this out by hand; new scripts use this.)
moe_trace() {
  local row=$1; shift
  local f=$OUT/trace_$row.json
  env "$@" MELD_TRACE="$f" BENCH_MOE_ROWS="$row" BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 timeout -k 5 120 \
    build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm_trace.log" 2>&1
  echo "== trace $row $* rc=$? at $(el) s"
  local g; g=$(ls "$OUT"/trace_"$row"*.json 2>/dev/null | head -1)
  [ -n "$g" ] && python3 tools/trace_phases.py "$g" route | grep -v "^role"
  rm -f "$OUT"/trace_"$row"*.json
}
# moe_torch_rows: bench/moe_torch.py (torch's dispatch + _grouped_mm and its layer) into the same
# JSON, log $OUT/moe_torch.log, its lines.
moe_torch_rows() {
  BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} timeout -k 5 240 python3 bench/moe_torch.py --json "$OUT/moe.jsonl" \
    > "$OUT/moe_torch.log" 2>&1
  echo "== moe_torch rc=$? at $(el) s"; grep -E "^P1|rror" "$OUT/moe_torch.log"
}
