#!/usr/bin/env bash
# x2_moe.sh — TWO GPUs (nvidia-h200-x2), prepared in session 31 (not run): the MoE dispatch +
# grouped GEMM's and combine's first 2-GPU run, after bench/calls/x2_s23.sh and x2_ring.sh.
# (1) test_moe 2 (a GPU per rank thread: the copies and block counts cross NVLink); (2) bench_moe
# --ranks 2 (fused / nocopy / comm / cuBLAS loop / meld_gemm loop; comm CTAs 8 and 32 against 16;
# vector copies against bulk); session 32 added meld_moe_ffn: the variants ffn (the default: the
# combine's sends in the second GEMM with 2 ranks), ffn-send and ffn-apart (the combine kernel
# sends after the GEMM). EP-2 floor for the way back (dsv3-32e is not a row at 2 ranks; dsv3 T4096,
# 128 experts a rank): half of 32768 rows x 14 KB = 235 MB over NVLink ~0.67 ms, under a ~3.5 ms
# second GEMM: prediction ffn-send 3-8% faster than ffn-apart (the apart path pays the copy after
# the GEMM), the opposite of one rank.
# Session 33 (one H200): the GEMMs' tiles expert by expert, the second GEMM from a queue, the
# combine's own rows read in place (at 2 ranks only the peer's half travels back) and its sums
# over the whole grid; bench_moe also times gemm2 (the second GEMM alone) and dense.
# Floors (per rank): dsv3 T 4096 top-8: 32768 rows x 14 KB = 470 MB routed, half to the peer:
# 235 MB over NVLink at ~350 GB/s = 0.67 ms, under a ~7 ms GEMM (128 experts a rank, weight
# streaming); Mixtral: 67 MB, 0.1 ms. Prediction: tests pass; fused / nocopy 1.02-1.10 (the copies
# hidden but for their HBM traffic and SM share); comm CTAs 16 best or tied.
# Session 35 (one H200): the routing now runs in the fused kernel by default (MELD_MOE_ROUTE_IN=1;
# the counts exchange between the ranks inside it): added the A/B against the routing kernel.
# Prediction: in the fused kernel faster at decode (-8..-15 us: a kernel boundary and the
# exchange's round trip overlap nothing less), even elsewhere.
# Usage (device, nvidia-h200-x2): OUT=... [PREBUILT=1: bench/pack_bins.sh build/tests/gpu/test_moe
#   build/bench/bench_moe, carry build/carry] bash bench/calls/x2_moe.sh
# Estimated wall: build ~100-120 s cold (0 with PREBUILT=1), test_moe 2 ~5-10 s, bench_moe --ranks 2
# (7 rows x 15 variants, settle 300 ms) ~60-120 s: ~180-250 s; every step capped by tl
# (bench/device_env.sh: the script ends by 570 s).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
# (MELD_TIMEOUT_MS reaches neither meld program: their comms set timeout_ms themselves, 5 s in
# test_moe and 20 s in bench_moe, so a hang there costs those and `timeout`)
export MELD_TIMEOUT_MS=5000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 "$(tl 150)" build/tests/gpu/test_moe 2 > "$L/test_moe.log" 2>&1
echo "== test_moe 2 rc=$? at $(el) s"; grep -E "checks|FAIL|rror|GPU" "$L/test_moe.log" | cut -c1-300 | head -8
BENCH_MOE_AB="MELD_MOE_COMM_CTAS=8,MELD_MOE_COMM_CTAS=32,MELD_MOE_COPY=vec,MELD_MOE_ROUTE_IN=0" BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 300)" \
  build/bench/bench_moe --ranks 2 --json "$OUT/moe.jsonl" > "$L/bench_moe2.log" 2>&1
echo "== bench_moe P=2 rc=$? at $(el) s"; grep -E "^P|FAIL|rror|GPU" "$L/bench_moe2.log" | cut -c1-200 | head -60
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
