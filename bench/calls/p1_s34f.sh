#!/usr/bin/env bash
# RAN in session 34 call 6. The prefetch (MELD_MOE_PF) was REVERTED after it: decode fused 0.5465 ms
# with 8 k-blocks vs 0.5349 without (it competes with the copies for DRAM); no gain elsewhere.
# p1_s34f.sh — ONE GPU: (1) the dispatch GEMM's weight prefetch while a tile's rows are on their
# way (gemm_params_t.ready.pf_b, MELD_MOE_PF, default 8 k-blocks = 256 KB of the tile's B panel
# into L2 when its block is not ready at the producer's first look): the copy's first blocks
# took ~14 us a unit at decode (call 2), and fused - nocopy was 17-21 us there (calls 3, 5);
# (2) the BENCH suite's DeepSeek-V3 row at 8192 tokens a rank, never measured (meld and torch).
# Prediction: decode fused -8..-12 us with the prefetch (DRAM streams ~34 MB of weights in the
# wait), T4096 rows within noise; test_moe passes; T8192: route ~90 us (65536 pairs: staging
# does not fit, ballots), meld_moe_ffn ~15 ms, torch's layer ~27 ms.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_VARIANTS=fused,nocopy,ffn BENCH_MOE_AB=MELD_MOE_PF=0,MELD_MOE_PF=16 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_pf.log"
BENCH_MOE_ROWS=dsv3_T8192 BENCH_MOE_VARIANTS=fused,nocopy,ffn,cublas-loop moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_t8192.log"
BENCH_MOE_ROWS=dsv3_T8192 moe_torch_rows
f=$OUT/trace_t8192.json
MELD_TRACE=$f BENCH_MOE_ROWS=dsv3_T8192 BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 timeout -k 5 120 \
  build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm_trace.log" 2>&1
echo "== trace T8192 rc=$? at $(el) s"
g=$(ls "$OUT"/trace_t8192*.json 2>/dev/null | head -1)
[ -n "$g" ] && python3 tools/trace_phases.py "$g" route | grep -v "^role"
rm -f "$OUT"/trace_t8192*.json
echo "== done at $(el) s"
