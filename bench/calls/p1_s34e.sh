#!/usr/bin/env bash
# RAN in session 34 call 5 and REVERTED after it: no measurable gain (the route -> fused gap 6.9 vs 6.6 us,
# dispatch + GEMM within noise); the code is in no commit, MELD_MOE_PDL does not exist.
# p1_s34e.sh — ONE GPU: programmatic launches of the MoE kernels (MELD_MOE_PDL, default 1: every
# MoE kernel starts with griddepcontrol.wait + launch_dependents; cooperative + programmatic
# attributes, an ordinary launch where the driver refuses the pair). Call 2 traced the kernel
# boundaries of dispatch + GEMM (one rank): the fused kernel's first event 6.6 us after the
# routing kernel's last, the routing kernel's entry 4.1-5.0 us after the fused kernel's last tile.
# Prediction: the driver takes the pair (no "refused" warning); the route -> fused gap -> <= 4 us;
# dispatch + GEMM at decode -3..-6 us, meld_moe_ffn at decode -6..-12 us (3 boundaries); T4096
# rows within noise. test_moe 1 passes with and without (2-8 ranks share the GPU: PDL off there).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1
MELD_MOE_PDL=0 test_ranks build/tests/gpu/test_moe 1
test_ranks build/tests/gpu/test_moe 2 4
grep -i "refused" "$OUT"/test_moe_*.log | head -3
for row in "dsv3-32e_T128" "dsv3_T4096"; do
  for pdl in 1 0; do
    f=$OUT/trace_$row.json
    MELD_MOE_PDL=$pdl MELD_TRACE=$f BENCH_MOE_ROWS=$row BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 timeout -k 5 120 \
      build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm.log" 2>&1
    echo "== trace $row pdl=$pdl rc=$? at $(el) s"
    g=$(ls "$OUT"/trace_"$row"*.json 2>/dev/null | head -1)
    [ -n "$g" ] && python3 tools/trace_phases.py "$g" route | grep -E "entry|exit|per call|->"
    rm -f "$OUT"/trace_"$row"*.json
  done
done
BENCH_MOE_VARIANTS=fused,nocopy BENCH_MOE_AB=MELD_MOE_PDL=0 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_dispatch.log"
BENCH_MOE_VARIANTS=ffn BENCH_MOE_AB=MELD_MOE_PDL=0,MELD_MOE_PDL=1 moe_rows 3
echo "== done at $(el) s"
