#!/usr/bin/env bash
# p1_s28b.sh — ONE GPU, session 28's second call. The interleaved owner order is now the default
# for GEMM+RS / GEMM+AR at 3 or more ranks (p1_s28a: -1..-9% at 3-4 ranks, +-1% at 8).
# (1) correctness with the new default: test_inproc 8,2,3,4 (its opt_cases now run the default,
# rotate, ileave, the several-owner push, ileave + push, asserting which order each plan takes),
# then 5 and 6 ranks (first time: uneven SM shares of 26 / 22 SMs);
# (2) the group size (MELD_GEMM_RS_ILEAVE_G, new tuning override): 8 ranks G 4 (default) / 2 / 1,
# 4 ranks G 8 (default) / 4 / 2, 3 ranks (B 21) G 7 (default) / 3 / 1;
# (3) fused vs unfused GEMM+AR at 4 ranks with the new default (issue 8's question in-process).
# Prediction: (2) smaller groups spread own tiles further: 8 ranks G 2 -1..-3% for the AR
# (result slots), RS +-1% (L2 reuse of B falls with G: 8192 x 1024 B tiles are shared by all
# CTAs anyway); G 1 at 4 ranks breaks the wave rule (32 < 33 tickets): +1..+5%. (3) unfused
# still ahead with ordinary C in-process (the slots' copies: 3 x 32 MB a rank on one HBM).
# Usage (device, nvidia-h200): PREBUILT=1 bash bench/calls/p1_s28b.sh  (carry build/carry)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s28b L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log 2>/dev/null); }
timeout -k 5 150 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -4
timeout -k 5 120 build/tests/gpu/test_inproc 5,6 > "$L/test_inproc56.log" 2>&1
echo "== test_inproc 5,6 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc56.log" | cut -c1-300 | head -4
snap
S=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
fused_row 8 IP_ROW_NO_ENV=1 $S p8g --ab MELD_GEMM_RS_ILEAVE_G=4,2,1 --fused-pairs 2; snap
fused_row 4 IP_ROW_NO_ENV=1 $S p4g --ab MELD_GEMM_RS_ILEAVE_G=8,4,2 --fused-pairs 2; snap
S3=rs:8064,8192,8256/rs:8064,8192,1032/ar:8064,8192,8256/ar:8064,8192,1032
fused_row 3 IP_ROW_NO_ENV=1 $S3 p3g --ab MELD_GEMM_RS_ILEAVE_G=7,3,1 --fused-pairs 2; snap
fused_row 4 BENCH_VARIANTS=gemm,fused,unfused,fused_symc ar:8192,8192,8192/ar:8192,8192,1024 p4unf --fused-pairs 2; snap
echo "== done at $(el) s"
snap; rm -rf "$L"
