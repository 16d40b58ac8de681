#!/usr/bin/env bash
# p1_s35b.sh — ONE GPU, session 35 call 2: is the slow first A/B variant (call 1, p1_s35a.sh: at
# dsv3 T4096 the first A/B variant after "nocopy" 1.49-1.63x whatever its value, in both orders)
# a power-controller transient ~1-1.5 s after the process's load began? The GPU's clock, power and
# clock-event reasons every 50 ms (nvidia-smi, in the background) beside each sample's time
# (BENCH_SAMPLE_LOG). (1) G16 four times, no lead-in; (2) the same with a 3 s lead-in
# (BENCH_LEADIN_MS); (3) T8192 G16 / G32 / G16 / G32 with the lead-in, two passes.
# Prediction: the SM clock dips (to ~1 GHz) where the slow samples are, and the lead-in removes
# the slow variant. Then (4) bench/ncu_sass.sh on the routing kernel at decode (option fixed).
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000 BENCH_SAMPLE_LOG=1
q="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
nvidia-smi --query-gpu=$q --format=csv,noheader -lms 50 > "$OUT/smi.csv" 2> "$OUT/smi.err" &
smi=$!
sleep 1
kill -0 $smi 2>/dev/null || { q=${q/clocks_event_reasons/clocks_throttle_reasons}
  nvidia-smi --query-gpu=$q --format=csv,noheader -lms 50 > "$OUT/smi.csv" 2>> "$OUT/smi.err" & smi=$!; }
echo "== smi started: $(date +%T.%N | cut -c1-12)"
mrow() { # NAME: moe_rows 3 with the exported variables, its log kept as bench_moe_NAME.log
  echo "== $1 starts $(date +%T.%N | cut -c1-12)"; moe_rows 3; cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_$1.log"
  grep -E "^(variant|sample)" "$OUT/bench_moe_$1.log" | awk '{printf "%s ", $0} /^sample 2/ {print ""}' | sed 's/variant //' | cut -c1-200
}
G=MELD_MOE_GROUP_M
BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$G=16,$G=16,$G=16,$G=16 mrow g16x4
BENCH_LEADIN_MS=3000 BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$G=16,$G=16,$G=16,$G=16 mrow g16x4_lead
for pass in A B; do
  BENCH_LEADIN_MS=3000 BENCH_MOE_ROWS=dsv3_T8192 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$G=16,$G=32,$G=16,$G=32 mrow t8192_$pass
done
kill $smi 2>/dev/null
echo "== clock summary (per 0.5 s: min SM MHz, max W, reasons seen)"
python3 - "$OUT/smi.csv" <<'PY'
import sys, collections
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
from datetime import datetime
def ts(s):
    try: return datetime.strptime(s.strip(), "%Y/%m/%d %H:%M:%S.%f")
    except ValueError: return None
b = collections.OrderedDict()
for r in rows:
    t = ts(r[0]);
    if not t: continue
    k = t.replace(microsecond=t.microsecond // 500000 * 500000).strftime("%H:%M:%S.%f")[:10]
    sm = float(r[1].split()[0]) if r[1].split()[0].replace('.','').isdigit() else 0
    pw = float(r[3].split()[0]) if r[3].split()[0].replace('.','').isdigit() else 0
    e = b.setdefault(k, [9e9, 0, set()]); e[0] = min(e[0], sm); e[1] = max(e[1], pw); e[2].add(r[5].strip())
for k, (sm, pw, rs) in b.items():
    if pw > 150: print(f"{k} {sm:6.0f} MHz {pw:5.0f} W {' '.join(sorted(rs))}")
PY
unset BENCH_SAMPLE_LOG
BENCH_MOE_ROWS=dsv3-32e_T128 BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 bash bench/ncu_sass.sh route moe_route_kernel 5 -- \
  build/bench/bench_moe --ranks 1 --calls 1 --samples 1
echo "== done at $(el) s"
