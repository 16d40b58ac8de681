#!/usr/bin/env bash
# p1_s28c.sh — ONE GPU, session 28's third call: where the own tiles' epilogue time goes at more
# than 2 ranks (p1_s28a's trace: the AR's own epilogues 28.6 us median at 4 ranks vs 4.2 for a
# push), with existing knobs, 4 ranks as threads, interleaved order (the default now):
# (1) a trace of the fused GEMM+RS (no copies) at 4 ranks: its own epilogue alone;
# (2) A/B MELD_GEMM_RS_PRELOAD=4,1 (1: every source by register loads, 64 in flight, no TMA
#     staging of src[0]); (3) MELD_GEMM_RS_PF=0,1 (the partial prefetch; the rule had it off
#     at K 8192 under the rotation); (4) MELD_GEMM_STORE_HINT=0,1 (C / copy stores evict_first);
# (5) 2 ranks at the issues' shapes (AG 8192 x 7168 x 8192, RS / AR 8192 x 14336 x 4096).
# Prediction: (1) RS own epilogue 10-15 us (3 sources; the AR's extra ~14 us are its 3 copies by
# the threads' stores); (2) +2..+5% (s15: register loads lost at 2 ranks); (3) PF 1 at K 8192
# -1..+2% (ileave spreads own tiles, the lines may live), K 1024 0 (already on); (4) +-1%.
# Usage (device, nvidia-h200): PREBUILT=1 bash bench/calls/p1_s28c.sh  (carry build/carry)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s28c L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log rs4_* 2>/dev/null); }
BENCH_VARIANTS=fused MELD_TRACE="$L/rs4_ileave.json" timeout -k 5 60 build/bench/bench_inproc \
  --ranks 4 --trace 3 --fused rs:8192,8192,8192 > "$L/trace_rs4.log" 2>&1
echo "== trace RS 4 ranks rc=$? at $(el) s"
python3 tools/trace_stats.py "$L"/rs4_ileave.rank0.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | head -14
snap
S=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
fused_row 4 IP_ROW_NO_ENV=1 $S p4pre --ab MELD_GEMM_RS_PRELOAD=4,1 --fused-pairs 2; snap
fused_row 4 IP_ROW_NO_ENV=1 $S p4pf --ab MELD_GEMM_RS_PF=0,1 --fused-pairs 2; snap
fused_row 4 IP_ROW_NO_ENV=1 $S p4hint --ab MELD_GEMM_STORE_HINT=0,1 --fused-pairs 2; snap
fused_row 2 BENCH_VARIANTS=gemm,fused,unfused ag:8192,7168,8192/rs:8192,14336,4096/ar:8192,14336,4096 p2issue --fused-pairs 2; snap
echo "== done at $(el) s"
snap; rm -rf "$L"
