"""gemm_fp8_torch.py - meld.gemm_fp8 against torch._scaled_mm (cuBLASLt's FP8 GEMM) in one process,
same inputs, interleaved, sustained (BENCH.md).

Per shape (M, N, K): e4m3 A [M, K] and B [N, K] (torch.float8_e4m3fn, values of randn clamped to
+-4), per-tensor fp32 scales in device memory, bf16 C [M, N]:
  meld      meld.gemm_fp8(a, b, sa, sb)                      (fp32 accumulation in the FP8 mode)
  fast      torch._scaled_mm(a, b.t(), sa, sb, bf16, use_fast_accum=True)   (the same mode)
  accum     torch._scaled_mm(..., use_fast_accum=False)      (cuBLASLt's periodic promotion)
  bf16      meld.gemm and torch.matmul on the same values in bf16 (the 2x the FP8 path is for)
Each variant: BENCH_SETTLE_MS of back-to-back calls first (default 300 here), then R rounds of
N timed calls in rotating order; the median round's ms is reported. Also the relative Frobenius
error of meld's C and of fast's C against fp32 (a.float() @ b.float().t() * sa * sb).
Prints a table (ratio = torch ms / meld ms: > 1 means meld is faster) and writes JSON lines
(--json FILE) with BENCH.md's keys.
--rowwise: rowwise scales instead (scale_a [M, 1], scale_b [1, N], torch._scaled_mm's rowwise
mode): meld, fast and accum with them, and meld_tensor = meld with per-tensor scales (what the
rows cost); no bf16 rows.
Usage: python3 bench/gemm_fp8_torch.py [--shapes 8192x8192x8192,...] [--json FILE] [--rounds R] [--rowwise]"""
import argparse
import json
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import meld  # noqa: E402
from bench_torch_common import _timed_block as timed, bench_keys, leadin_ms  # noqa: E402

SHAPES = "8192x8192x8192,4096x4096x4096,2048x5120x8192,8192x7168x8192,8192x28672x4096,16x8192x8192,128x8192x8192"


def rel_err(got, want):
    return float((got.float() - want).norm() / want.norm())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--json", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--rowwise", action="store_true")
    args = ap.parse_args()
    settle_ms = int(os.environ.get("BENCH_SETTLE_MS", "300") or 0)
    keys = bench_keys()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    first = True
    print(f"# {keys['gpu']}, torch {keys['torch']}, CUDA {keys['cuda']}; settle {settle_ms} ms a variant, "
          f"{args.rounds} rounds x {args.calls} calls, median round; ratio = torch ms / meld ms")
    print(f"{'shape':>20} {'variant':>11} {'ms':>9} {'TFLOP/s':>8} {'vs meld':>8} {'rel err':>9}"
          f"{'  (rowwise scales)' if args.rowwise else ''}")
    out = open(args.json, "a") if args.json else None
    for s in args.shapes.split(","):
        m, n, k = (int(x) for x in s.split("x"))
        a = torch.randn(m, k, device=dev).clamp(-4, 4).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).clamp(-4, 4).to(torch.float8_e4m3fn)
        sa = torch.tensor([0.5], device=dev)
        sb = torch.tensor([0.25], device=dev)
        c_meld = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
        if args.rowwise:
            st, sa = sa, torch.rand(m, 1, device=dev) + 0.25
            sb = torch.rand(1, n, device=dev) + 0.25
            want = (a.float() @ b.float().t()) * sa * sb
            var = {
                "meld": lambda: meld.gemm_fp8(a, b, sa, sb, out=c_meld),
                "fast": lambda: torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True),
                "accum": lambda: torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=False),
                "meld_tensor": lambda: meld.gemm_fp8(a, b, st, st, out=c_meld),
            }
        else:
            a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
            want = (a.float() @ b.float().t()) * (0.5 * 0.25)
            var = {
                "meld": lambda: meld.gemm_fp8(a, b, sa, sb, out=c_meld),
                "fast": lambda: torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True),
                "accum": lambda: torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=False),
                "bf16_meld": lambda: meld.gemm(a16, b16),
                "bf16_torch": lambda: torch.matmul(a16, b16.t()),
            }
        errs = {}
        ok = {}
        for name, fn in var.items():
            try:
                r = fn()
                torch.cuda.synchronize()
                ok[name] = True
                if name == "meld":
                    errs[name] = rel_err(c_meld, want)
                elif name in ("fast", "accum"):
                    errs[name] = rel_err(r, want)
            except Exception as e:  # (a torch without this path: say so, keep the others)
                ok[name] = False
                print(f"{s:>20} {name:>11} unavailable: {str(e).splitlines()[0][:100]}")
        names = [x for x in var if ok[x]]
        for name in names:  # warm-ups, the process's lead-in, the settle
            fn = var[name]
            per = timed(fn, 3)
            total = settle_ms + (leadin_ms() if first else 0)
            first = False
            if total > 0:
                timed(fn, max(1, int(total / max(per, 1e-3))))
        rounds = {x: [] for x in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                rounds[name].append(timed(var[name], args.calls))
        ms = {x: statistics.median(rounds[x]) for x in names}
        flop = 2.0 * m * n * k
        for name in names:
            ratio = ms[name] / ms["meld"] if "meld" in ms else float("nan")
            e = errs.get(name)
            print(f"{s:>20} {name:>11} {ms[name]:9.4f} {flop / ms[name] / 1e9:8.1f} {ratio:8.3f} "
                  f"{(f'{e:.2e}' if e is not None else '-'):>9}")
            if out:
                row = dict(keys, op="gemm_fp8", impl=name, m=m, n=n, k=k, dtype="fp8_e4m3", out_dtype="bf16",
                           scaling="tensor" if not args.rowwise or name == "meld_tensor" else "rowwise",
                           ms=ms[name], tflops=flop / ms[name] / 1e9, rounds_ms=rounds[name],
                           rel_err_fp32=e, settle_ms=settle_ms, ratio_to_meld=ratio,
                           meld_tile_n=os.environ.get("MELD_GEMM_TILE_N", "plan"))
                out.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    if out:
        out.close()


if __name__ == "__main__":
    main()
