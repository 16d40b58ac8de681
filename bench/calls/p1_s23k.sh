#!/usr/bin/env bash
# p1_s23k.sh — ONE GPU, prepared in session 23 (refused: too little device time left); the next
# session's first one-GPU call. Carry:
#   build/bench/bench_inproc build/tests/gpu/test_inproc.
# T: the abort raise inline again by default, out of line only in the LL kernels' waits
# (meld_raise_abort_outline; meld_wait_impl<true> for LL's argument check). Its PTX: the lean LL
# kernels identical to call 9-10's O (abort raise out of line everywhere in collectives.cu), the
# ZC kernels identical to B (37a735f), modulo register and label numbering. So no A/B here: the
# tests, and T's rows beside call 10's (same kind of machine; expected LL = O's, ZC = B's:
# LL 4 KB 2.67 / 2.24 / 2.37, 64 KB 2.85 / 2.46 / 2.60; ZC 4 KB ~5.27 / ~3.8 / ~5.17, 1 MB 7.65 / 6.0 / 8.16).
# Usage (device): OUT=... bash bench/calls/p1_s23k.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-200 | head -4
bench/ab_inproc.sh s23k "t t" "t=build/bench" --ranks 2 --sizes 4096,65536 --kinds ord
bench/ab_inproc.sh s23kz "t t" "t=build/bench" --ranks 2 --sizes 4096,1048576 --kinds sym --zc
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
