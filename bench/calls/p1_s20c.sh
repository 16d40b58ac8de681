#!/usr/bin/env bash
# p1_s20c.sh — ONE GPU, session 20 call 3: are the comm warps' copies slow for want of bytes in
# flight (HBM latency under the GEMM's load) or from contention (their loads and stores share
# the SM's L1 / shared-memory path with the mainloop)? Mode 2 (MELD_AG_GEMM_COMM_WARPS=2, hint
# comm_warps 2): one lane L2-prefetches the warp's piece after next (cp.async.bulk.prefetch.L2,
# no registers, no shared memory), and the first two before the loop.
# Prediction (before the run): if latency-bound, pieces ~2x faster (call 1: first-round median
# 58 us, later 17 us), closing most of the gap to comm CTAs (2048 x 5120 x 8192: cw 0.2845 ->
# ~0.276 ms sustained vs comm CTAs 0.2732); if contention-bound, no change.
# (Ran as call 3 at the commit that added mode 2; the mode was reverted after it: no gain.)
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20c.sh
#   (carry build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/t1.log" 2>&1
echo "== test_ag_gemm 1 rank rc=$? at $(el) s"; grep -E "FAIL|checks passed|L2 prefetch" "$OUT/t1.log" | cut -c1-130 | head -12
export BENCH_VARIANTS=fused_p1,loopback_p1,loopback_p1_cw,loopback_p1_cw2
for S in 2048,5120,8192 8192,5120,8192; do
  timeout -k 5 150 build/bench/bench_ag_gemm --shape $S --soak 600 --json "$OUT/ag-p1-s20c.jsonl" > "$OUT/ag-${S//,/x}.log" 2>&1
  echo "== bench_ag_gemm $S rc=$? at $(el) s"
  grep -E "soak ag_gemm.*(meld_gemm|fused_p1|loopback)|^ +(fused_p1|loopback)" "$OUT/ag-${S//,/x}.log" | cut -c1-150
done
unset BENCH_VARIANTS
for cw in 1 2; do
  MELD_AG_GEMM_COMM_WARPS=$cw MELD_TRACE="$OUT/ag_loop_cw$cw.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --loopback \
    --shape 2048,5120,8192 > "$OUT/ag_trace_cw$cw.log" 2>&1
  echo "== trace cw=$cw rc=$?"
  python3 - "$OUT"/ag_loop_cw$cw*.json <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e.get("ph") == "X"]
for ep in sorted({e["args"]["epoch"] for e in ev}):
    es = [e for e in ev if e["args"]["epoch"] == ep]
    t0 = min(e["ts"] for e in es)
    comm = [e for e in es if e["name"] == "comm"]
    if not comm: continue
    n = len(comm); first = [e["dur"] for e in comm if e["args"]["item"] < 264]; rest = [e["dur"] for e in comm if e["args"]["item"] >= 264]
    span = max(e["ts"] + e["dur"] for e in es) - t0
    print("call %d: %d pieces, first round median %.1f us (max %.1f), later median %.1f, last piece end %.1f, span %.1f"
          % (ep, n, statistics.median(first), max(first), statistics.median(rest) if rest else 0,
             max(e["ts"] + e["dur"] for e in comm) - t0, span))
PY
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
