#!/usr/bin/env python3
"""test_plot_coll.py — bench/plot_coll.py's report of the fewest comm CTAs that reach 90% of the
best bandwidth (issue 5), on synthetic curves with a known answer, and its reading of
bench_coll's all_gather_ctas rows. Prints the "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)"
lines tests/run.sh sums."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import plot_coll  # noqa: E402
from pycheck import check, finish  # noqa: E402



# 90% of the best (360) is 324: 8 CTAs reach 330, 4 CTAs only 300.
check(plot_coll.fewest_ctas([(1, 60.0), (4, 300.0), (8, 330.0), (16, 350.0), (132, 360.0)]) == (8, 360.0),
      "first CTA count at 90% of the best")
# the best itself at few CTAs, a dip after it: the fewest count still wins
check(plot_coll.fewest_ctas([(2, 100.0), (16, 200.0), (32, 190.0)]) == (16, 200.0), "best in the middle")
check(plot_coll.fewest_ctas([(4, 100.0), (8, 90.0)], frac=0.9) == (4, 100.0), "exactly 90% counts")
check(plot_coll.fewest_ctas([(8, None)]) == (None, None), "no bandwidth: no answer")
check(plot_coll.fewest_ctas([]) == (None, None), "no points")
rows = [{"op": "all_gather_ctas", "shape": {"ctas": c, "threads": 384}, "busbw": b, "nccl_busbw": 250.0}
        for c, b in ((16, 340.0), (1, 40.0), (8, 320.0))]
rows.append({"op": "all_gather", "shape": {"bytes": 1 << 20}, "busbw": 1.0})
curves = plot_coll.cta_curves(rows)
check(list(curves) == [384] and [p[0] for p in curves[384]] == [1, 8, 16], f"curves sorted by CTAs: {dict(curves)}")

zc = [{"op": "all_reduce", "shape": {"bytes": 1 << 26, "variant": v, "mode": m}, "busbw": b}
      for v, m, b in (("zc_c16", "plain", 306.0), ("zc_c8", "plain", 305.0), ("zc_c8", "graph", 1.0),
                      ("zc", "plain", 300.0), ("zc_cx", "plain", 1.0))]
pts = plot_coll.zc_cta_points(zc)
check(dict(pts) == {("all_reduce", 1 << 26): [(8, 305.0), (16, 306.0)]}, f"ZC forced CTA counts: {dict(pts)}")
check(plot_coll.fewest_ctas(pts[("all_reduce", 1 << 26)]) == (8, 306.0), "ZC: 8 CTAs at 90%")

finish()
