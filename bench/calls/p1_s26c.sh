#!/usr/bin/env bash
# p1_s26c.sh — ONE GPU, session 26 call 3. Carried (build/carry/bins.tar.xz):
#   build_h/: main at fa22749 (in-process sharing: the decode GEMM+AR plans within the rank's SM
#             share; CE side streams leave a queue for the protocol's side stream);
#   build_i/: branch exp/dec-post (H + the decode kernel's READY post: one fence.release.sys and
#             P - 1 relaxed stamps instead of P - 1 st.release.sys in series).
# Call 2 saw test_inproc at 8 ranks time out once (an all-to-all-v: rank 0's kernel started > 3 s
# late) and the opt-in decode GEMM+AR at 8 ranks time out in both builds (each rank's grid
# planned for the whole GPU).
# Predictions: test_inproc 8 passes 3 times of 3 (if the stall was queue aliasing); decode fused
# at 8 / 4 ranks runs; I -1..-4 us a call vs H at 8 ranks (6 serial releases -> 1), ~0 at 2.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
for i in 1 2 3; do
  timeout -k 5 100 build_h/tests/gpu/test_inproc 8 > "$OUT/test_inproc_h8_$i.log" 2>&1
  echo "== h test_inproc 8 (#$i) rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_h8_$i.log" | cut -c1-300 | head -3
done
timeout -k 5 100 build_i/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc_i.log" 2>&1
echo "== i test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_i.log" | cut -c1-300 | head -3
TEST_TIMEOUT_S=60 timeout -k 5 70 build_i/tests/gpu/test_gemm_rs > "$OUT/i_test_gemm_rs.log" 2>&1
echo "== i test_gemm_rs (1 rank: its decode loopback cases) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/i_test_gemm_rs.log" | cut -c1-200 | head -3
for pass in 1 2; do
  for v in h i; do
    for P in 8 4 2; do
      MELD_GEMM_AR_DECODE_FUSED=1 MELD_WORKSPACE_BYTES=67108864 timeout -k 5 60 build_$v/bench/bench_inproc --ranks $P --samples 3 \
        --fused-pairs 1 --fused-calls 50 --fused ar:128,4096,14336/ar:16,4096,7168 --json "$OUT/inproc.jsonl" \
        --label "s26c_dec${P}_$v$pass" > "$OUT/dec_${P}_$v$pass.log" 2>&1
      echo "== decode $v P=$P #$pass rc=$?: $(grep -E 'mean of' "$OUT/dec_${P}_$v$pass.log" | grep -E 'fused |gemm ' | awk '{printf "%s %s %s | ", $2, $7, $8}')"
    done
  done
done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
