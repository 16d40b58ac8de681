#!/usr/bin/env python3
"""moe_torch.py — the one-GPU MoE baseline for bench_moe's rows with every expert local (bench_moe
--ranks 1): torch's dispatch (the (token, slot) pairs sorted by expert, the rows gathered with
index_select) + torch._grouped_mm (bf16, the expert weights in nn.Linear layout [E, n, hidden] as
its [E, hidden, n] view), and the grouped GEMM alone. The routing is bench_moe's (uniform or
Zipf(1.0), same seed scheme: not the same numbers, the same distribution). Per row: 5 warm-ups,
BENCH_SETTLE_MS of calls, 20 timed calls (CUDA events), the median. Useful TFLOP/s =
2 x rows x n x hidden. JSON lines to --json (op "moe_dispatch_gemm", peer "torch_grouped_mm").
Also the whole SwiGLU layer (meld_moe_ffn's peer, "torch layer"): the dispatch, _grouped_mm with
[gate; up] (n = 2 ffn), silu(gate) * up, _grouped_mm with down_proj [E, hidden, ffn], and the
combine (the rows times their weights, index_add_ into fp32 per token, rounded to bf16): op
"moe_ffn", useful TFLOP/s = 3 x rows x n x hidden.

  python3 bench/moe_torch.py [--json FILE] [--quick]
Rows: bench_moe's (DeepSeek-V3 at 512 / 4096 / 8192 tokens, Zipf, 32 experts, Mixtral, decode);
--quick three of them; BENCH_MOE_ROWS filters like bench_moe's (--long: accepted, no effect).
"""
import argparse, json, os, statistics, time

import torch

from bench_torch_common import bench_keys


def time_fn(fn, settle_ms):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.time()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    est = (time.time() - t0) / 3 * 1e3
    n = int(settle_ms / max(est, 1e-4)) + 1 if settle_ms > 0 else 0
    for _ in range(min(n, 100000)):
        fn()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def routing(T, E, k, zipf, gen):
    w = torch.ones(E) if zipf == 0 else torch.arange(1, E + 1, dtype=torch.float64).pow(-zipf)
    ids = torch.multinomial(w.float().expand(T, E), k, replacement=False, generator=gen)
    return ((ids * 37 + 11) % E).to(torch.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--quick", action="store_true", help="the first DeepSeek-V3 row, 32 experts and decode only")
    args = ap.parse_args()
    settle = int(os.environ.get("BENCH_SETTLE_MS", "0"))
    rows = [("dsv3", 512, 7168, 4096, 256, 8, 0.0), ("dsv3", 4096, 7168, 4096, 256, 8, 0.0),
            ("dsv3-zipf", 4096, 7168, 4096, 256, 8, 1.0)]
    sel = [x for x in os.environ.get("BENCH_MOE_ROWS", "").split(",") if x]  # (bench_moe's row filter)
    rows.append(("dsv3", 8192, 7168, 4096, 256, 8, 0.0))  # (the BENCH suite's third size; not in --quick)
    rows.append(("dsv3-32e", 4096, 7168, 4096, 32, 8, 0.0))
    rows.append(("mixtral", 4096, 4096, 28672, 8, 2, 0.0))
    rows.append(("dsv3-32e", 128, 7168, 4096, 32, 8, 0.0))
    if sel:  # "name_T<tokens>" or "name T<tokens>" or a bare name
        rows = [r for r in rows if any(x in (f"{r[0]}_T{r[1]}", f"{r[0]} T{r[1]}", r[0]) for x in sel)]
    if args.quick:
        rows = [r for r in rows if (r[0], r[1]) in (("dsv3", 512), ("dsv3-32e", 4096), ("dsv3-32e", 128))]
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(1)
    keys = bench_keys()  # (gpu, driver, cuda, torch, date, commit: BENCH.md)
    print(f"{'row variant':44s} {'ms':>10s} {'TFLOP/s':>9s}")
    for name, T, H, N, E, k, zipf in rows:
        x = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
        w = torch.randn(E, N, H, device=dev, dtype=torch.bfloat16) * 0.02
        ids = routing(T, E, k, zipf, gen).to(dev)
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=E)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = x.index_select(0, order // k)
        wt = w.transpose(1, 2)

        def dispatch_gemm():
            fl = ids.flatten()
            o = torch.argsort(fl, stable=True)
            of = torch.cumsum(torch.bincount(fl, minlength=E), 0).to(torch.int32)
            return torch._grouped_mm(x.index_select(0, o // k), wt, offs=of, out_dtype=torch.bfloat16)

        def gemm():
            return torch._grouped_mm(xs, wt, offs=offs, out_dtype=torch.bfloat16)

        rows_n = T * k
        y = gemm()  # checked: the first rows of the first expert in use against an fp32 product
        e0 = int(flat[order[0]])
        ref = xs[:4].float() @ w[e0].float().t()
        err = ((y[:4].float() - ref).norm() / ref.norm()).item()
        print(f"{name} T{T}: torch grouped_mm rel err {err:.2e} (expert {e0})")
        F = N // 2
        w2t = (torch.randn(E, H, F, device=dev, dtype=torch.bfloat16) * 0.02).transpose(1, 2)
        wts = torch.rand(T, k, device=dev, dtype=torch.float32)

        def layer():
            fl = ids.flatten()
            o = torch.argsort(fl, stable=True)
            of = torch.cumsum(torch.bincount(fl, minlength=E), 0).to(torch.int32)
            tok = o // k
            h = torch._grouped_mm(x.index_select(0, tok), wt, offs=of, out_dtype=torch.bfloat16)
            a = torch.nn.functional.silu(h[:, :F]) * h[:, F:]
            y2 = torch._grouped_mm(a, w2t, offs=of, out_dtype=torch.bfloat16)
            out = torch.zeros(T, H, device=dev, dtype=torch.float32)
            out.index_add_(0, tok, y2.float() * wts.flatten()[o].unsqueeze(1))
            return out.to(torch.bfloat16)

        for var, fn in (("torch dispatch+grouped_mm", dispatch_gemm), ("torch grouped_mm", gemm), ("torch layer", layer)):
            try:
                ms = time_fn(fn, settle)
            except Exception as e:  # noqa: BLE001 (an unsupported op: say so, go on)
                print(f"{name} T{T} {var}: {type(e).__name__}: {e}")
                continue
            tf = (3.0 if fn is layer else 2.0) * rows_n * N * H / (ms * 1e-3) / 1e12
            print(f"{'P1 ' + name + ' T' + str(T) + ' ' + var:44s} {ms:10.4f} {tf:9.1f}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"op": "moe_ffn" if fn is layer else "moe_dispatch_gemm", "shape": {"model": name, "tokens": T, "hidden": H, "n": N,
                                        "experts": E, "topk": k, "zipf": zipf, "rows_all_ranks": rows_n},
                                        "variant": var, "peer": "torch_grouped_mm", "nranks": 1, "nnodes": 1,
                                        "dtype": "bf16", "peer_ms": ms, "tflops_useful": round(tf, 1),
                                        "settle_ms": settle, "rel_err_sample": err, **keys}) + "\n")
        del x, w, xs, w2t
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
