#!/usr/bin/env python3
"""attn_torch.py — the attention baselines for bench_attn's shapes: torch's scaled_dot_product_attention
with each backend that runs (flash, cuDNN, efficient), bf16, layout [B, S, H, D] viewed as [B, H, S, D]
(as a [B, S, H, D] tensor is stored, like meld's), GQA by enable_gqa. Per row: 5 warm-ups,
BENCH_SETTLE_MS of back-to-back calls, 30 timed calls (CUDA events), the median; FLOPs as bench_attn
(4 x visible pairs x D). JSON lines to --json (op "attn", peer = the backend).

  python3 bench/attn_torch.py [--json FILE] [--quick] [--shape B,S,H,HKV,CAUSAL[,D] ...] [--custom-only]
"""
import argparse, json, os, statistics, time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench_torch_common import bench_keys


def shapes(args):
    out = []
    for s in args.shape:  # B,S,H,HKV,CAUSAL[,D]
        v = [int(x) for x in s.split(",")]
        out.append(tuple(v + [128] * (6 - len(v))))
    if not args.custom_only:
        for S in ([4096] if args.quick else [4096, 16384]):
            for hkv in (32, 8):
                for c in (0, 1):
                    out.append((1, S, 32, hkv, c, 128))
    return out


def time_fn(fn, settle_ms):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.time()
    for _ in range(4):
        fn()
    torch.cuda.synchronize()
    est = (time.time() - t0) / 4 * 1e3
    n = int(settle_ms / max(est, 1e-4)) + 1 if settle_ms > 0 else 0
    for _ in range(min(n, 100000)):
        fn()
    ts = []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(30):
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--custom-only", action="store_true")
    args = ap.parse_args()
    settle = int(os.environ.get("BENCH_SETTLE_MS", "0") or 0)
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    jf = open(args.json, "a") if args.json else None
    print(f"{'shape (B,S,H,HKV,causal)':28s} {'backend':10s} {'ms':>10s} {'TFLOP/s':>10s}")
    for (B, S, H, HKV, causal, D) in shapes(args):
        g = torch.Generator(device="cuda").manual_seed(7)
        q = (torch.rand(B, S, H, D, device="cuda", generator=g) * 2 - 1).bfloat16()
        k = (torch.rand(B, S, HKV, D, device="cuda", generator=g) * 2 - 1).bfloat16()
        v = (torch.rand(B, S, HKV, D, device="cuda", generator=g) * 2 - 1).bfloat16()
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        pairs = S * (S + 1) / 2 if causal else S * S
        ref = None
        for name, be in backends:
            try:
                with sdpa_kernel([be]):
                    fn = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal), enable_gqa=HKV != H)
                    out = fn()
                    ms = time_fn(fn, settle)
            except Exception as e:  # a backend that does not take this shape
                print(f"{B},{S},{H},{HKV},{causal},{D:<16} {name:10s} {'-':>10s} ({type(e).__name__})")
                continue
            if ref is None:
                ref = out.float()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            tf = 4.0 * B * H * pairs * D / (ms * 1e-3) / 1e12
            print(f"{f'{B},{S},{H},{HKV},{causal},{D}':28s} {name:10s} {ms:10.4f} {tf:10.1f}  (vs first backend {err:.1e})")
            if jf:
                jf.write(json.dumps({"op": "attn", "shape": {"batch": B, "seq": S, "heads": H, "heads_kv": HKV,
                                                             "head_dim": D, "causal": causal},
                                     "nranks": 1, "peer": "torch_sdpa_" + name, "peer_ms": ms, "tflops": round(tf, 1),
                                     "settle_ms": settle, **bench_keys()}) + "\n")
                jf.flush()
        del q, k, v, qt, kt, vt
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
