#!/usr/bin/env bash
# p1_s11b.sh — ONE GPU, session 11, call 2: the 128 x 320 tile with its 64-column third deferred
# into the next tile's first k-block (16 registers; now the wide default), against the wide tile
# without it (w320nd), the old 128 x 256 default (n256) and cuBLASLt, burst and --soak 600; a K
# sweep (burst) at 2048 x 5120 to split per-tile fixed cost from per-k-block rate; counters.
# Prediction (before the run): the deferral gains ~1% (it hides a fifth of the epilogue; the
# 128 x 256 half-deferral was worth ~2.7% of cycles).
# Usage (device): OUT=... bash bench/calls/p1_s11b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_gemm build/bench/bench_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 150 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "test_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed|wide320.*nodefer|1088x512.*wide" "$OUT/test_gemm.log" | cut -c1-150 | head -12
timeout -k 5 200 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,1280,8192 \
  --only default,w320nd,n256 --soak ${SOAK:-600} --json "$OUT/gemm-wide-defer-s11.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^custom|^soak|skipped|ERROR" "$OUT/bench.log" | cut -c1-170
timeout -k 5 120 build/bench/bench_gemm --custom-only --shape 2048,5120,4096 --shape 2048,5120,16384 --shape 2048,5120,32768 \
  --only default,w320nd,n256,dp --rounds 5 --json "$OUT/gemm-wide-ksweep-s11.jsonl" > "$OUT/bench_k.log" 2>&1
echo "k sweep rc=$? at $(el) s"; grep -E "^custom|skipped|ERROR" "$OUT/bench_k.log" | cut -c1-170
ARGS="--only w320nd" COUNT=5 SHAPE=2048,5120,8192 OUT="$OUT/ncu" timeout -k 5 150 bash bench/ncu_gemm_vs_cublas.sh > "$OUT/ncu.out" 2>&1
python3 - "$OUT/ncu/details.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]; ki, ni, vi, ii = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID")
want = ("gpu__time_duration.sum", "sm__cycles_elapsed.max", "lts__t_sectors_srcunit_tex_op_read.sum", "dram__bytes_read.sum", "smsp__inst_executed.sum")
seen = {}
for r in rows[1:]:
    if len(r) > max(ki, ni, vi) and r[ni] in want: seen.setdefault((r[ii], r[ki][:40]), {})[r[ni]] = r[vi]
print("id kernel", *[w.split("__")[1][:22] for w in want])
for k, v in seen.items(): print(*k, *[v.get(w) for w in want])
PY
echo "total: $(el) s"
