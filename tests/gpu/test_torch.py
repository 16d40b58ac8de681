#!/usr/bin/env python3
"""test_torch.py: the Python binding (python/meld) on the GPU, against torch references.

Usage: python3 tests/gpu/test_torch.py [--ranks 1,2] [--bench]
Spawns each rank count's processes (torchrun's variables; ranks beyond the GPUs present share
them with MELD_SHARE_GPU=1: the protocol, not speed). Every rank draws every rank's inputs from
seeds, so it computes the references of its outputs alone (fp32 torch, random inputs, outputs
poisoned first, relative Frobenius error). Checks: gemm (both layouts), gemm_fp8 (one rank:
against torch._scaled_mm and fp32, scales per tensor, rowwise or None, errors, torch.compile),
attention (D 64 / 128, GQA, causal, LSE), the four collectives (bf16 / fp32, in place, symmetric
memory), ag_gemm (+ the gathered A, bitwise), gemm_rs / gemm_ar (+ zero copy into symmetric
memory), their fp8 forms ag_gemm_fp8 / gemm_rs_fp8 / gemm_ar_fp8 (per-tensor and rowwise scales,
auto and unfused, errors), ring attention (contiguous and zigzag causal), the MoE layer in one
call and in pieces, CUDA-graph replays with new inputs, 200 back-to-back calls, and errors raised
as the right classes. --bench (one rank) times the binding's cost per call against a CUDA graph of
the same calls. Prints the
"[  PASSED  ] N test(s)." lines of tests/run.sh.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
import pycheck  # noqa: E402  (the Python tests' check / counts / summary lines)


def check(cond, what):
    pycheck.check(cond, f"[rank {os.environ.get('RANK', '?')}] {what}")


def relerr(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def close(x, ref, what, tol=1e-2):
    import torch
    ok = x.shape == ref.shape and bool(torch.isfinite(x.float()).all())
    e = relerr(x, ref) if ok else float("inf")
    check(ok and e <= tol, f"{what}: rel. error {e:.3g} (shape {tuple(x.shape)} vs {tuple(ref.shape)})")


def rnd(seed, *shape, dtype=None, scale=1.0):
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    t = torch.randn(*shape, generator=g) * scale
    return t.to(dtype or torch.bfloat16)


def poison(shape, dtype, dev):
    import torch
    return torch.full(shape, float("nan"), dtype=dtype, device=dev)


def ref_attention(q, k, v, causal, q_pos0=0, kv_pos0=0, scale=None):
    """fp32 [B, S, H, D] attention with position-based causal masks; also the LSE [B, H, Sq]."""
    import torch
    b, sq, h, d = q.shape
    g = h // k.size(2)
    qf = q.float().permute(0, 2, 1, 3)
    kf = k.float().repeat_interleave(g, dim=2).permute(0, 2, 1, 3)
    vf = v.float().repeat_interleave(g, dim=2).permute(0, 2, 1, 3)
    s = (qf @ kf.transpose(-1, -2)) * (scale or d ** -0.5)
    if causal is not False:
        qp = causal[0] if isinstance(causal, tuple) else q_pos0 + torch.arange(sq)
        kp = causal[1] if isinstance(causal, tuple) else kv_pos0 + torch.arange(k.size(1))
        s = s.masked_fill(kp.to(s.device)[None, :] > qp.to(s.device)[:, None], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ vf
    return o.permute(0, 2, 1, 3), lse


def test_single(dev):
    import torch
    import meld
    # gemm, both layouts, odd sizes
    a = rnd(1, 300, 264).to(dev)
    w = rnd(2, 520, 264).to(dev)
    out = poison((300, 520), torch.bfloat16, dev)
    c = meld.gemm(a, w, out=out)
    close(c, a.float() @ w.float().T, "gemm nk 300 x 520 x 264")
    c2 = meld.gemm(a, w.T.contiguous(), b_layout="kn")
    close(c2, a.float() @ w.float().T, "gemm kn")
    try:
        meld.gemm(a.half(), w)
        check(False, "gemm with fp16 a did not raise")
    except ValueError as e:
        check("a: dtype float16" in str(e), f"gemm fp16: {e}")
    try:
        meld.gemm(a, w[:, :200])
        check(False, "gemm with mismatched k did not raise")
    except meld.MeldArgumentError as e:
        check("b: shape" in str(e), f"gemm k mismatch: {e}")
    # attention: D 128 / 64, GQA, causal with positions, LSE
    for d, h, hkv, causal, q0, k0 in ((128, 8, 2, False, 0, 0), (128, 4, 4, True, 0, 0),
                                     (64, 8, 4, True, 256, 0)):
        q = rnd(10 + d, 2, 384, h, d).to(dev)
        k = rnd(11 + d, 2, 320, hkv, d).to(dev)
        v = rnd(12 + d, 2, 320, hkv, d).to(dev)
        o, lse = meld.attention(q, k, v, causal=causal, q_pos0=q0, kv_pos0=k0, return_lse=True,
                                out=poison((2, 384, h, d), torch.bfloat16, dev))
        ro, rl = ref_attention(q, k, v, causal, q0, k0)
        what = f"attention D{d} H{h}/{hkv} causal {causal} q_pos0 {q0}"
        close(o, ro, what)
        fin = torch.isfinite(rl)
        check(bool((lse[fin] - rl[fin]).abs().max() < 2e-2), f"{what}: LSE")


def fp8(seed, *shape):
    """Random e4m3 values (normal, clamped to [-4, 4]) on the CPU."""
    import torch
    return rnd(seed, *shape, dtype=torch.float32).clamp(-4, 4).to(torch.float8_e4m3fn)


def scaled_mm_ref(a, b, sa, sb):
    """torch._scaled_mm's a x b^T (cuBLASLt, fast accumulation, bf16 out) with per-tensor scales;
    M and N padded with zero rows to multiples of 16 for it (its shape rule), cut back after."""
    import torch

    def pad(t):
        rows = -(-t.size(0) // 16) * 16
        if rows == t.size(0):
            return t
        z = torch.zeros(rows, t.size(1), dtype=torch.uint8, device=t.device)
        z[:t.size(0)] = t.view(torch.uint8)
        return z.view(t.dtype)
    c = torch._scaled_mm(pad(a), pad(b).t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
    return c[:a.size(0), :b.size(0)]


def test_fp8(dev, seed=6000):
    """meld.gemm_fp8 (e4m3 in, bf16 out, per-tensor device scales) against torch._scaled_mm and
    fp32 torch, its argument errors, and torch.compile over it (one rank: no peer waits on it)."""
    import torch
    import meld
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        print(f"[rank 0] gemm_fp8 checks SKIPPED (torch {torch.__version__} has no "
              "float8_e4m3fn / _scaled_mm)", flush=True)
        return
    one = torch.ones(1, dtype=torch.float32, device=dev)
    for i, (m, n, k) in enumerate(((256, 512, 1024), (1000, 1000, 4112), (128, 4096, 4096))):
        a = fp8(seed + i, m, k).to(dev)
        b = fp8(seed + 10 + i, n, k).to(dev)
        ref = a.float() @ b.float().T
        for scaled in (True, False):
            sa = torch.tensor([0.75 + 0.5 * i], device=dev) if scaled else None
            sb = torch.tensor([0.3125], device=dev) if scaled else None
            f = (0.75 + 0.5 * i) * 0.3125 if scaled else 1.0
            what = f"gemm_fp8 {m} x {n} x {k} scales {'given' if scaled else 'None'}"
            c = meld.gemm_fp8(a, b, sa, sb, out=poison((m, n), torch.bfloat16, dev))
            check(c.dtype == torch.bfloat16, f"{what}: dtype {c.dtype}")
            close(c, ref * f, f"{what} vs fp32")
            try:
                close(c, scaled_mm_ref(a, b, sa if scaled else one, sb if scaled else one),
                      f"{what} vs torch._scaled_mm")
            except Exception as e:  # noqa: BLE001 (report, do not stop the other checks)
                check(False, f"{what}: torch._scaled_mm reference: {type(e).__name__}: "
                      f"{str(e)[:300]}")
        if i == 0:
            close(meld.gemm_fp8(a, b, sm_count=8), ref, f"gemm_fp8 {m} x {n} x {k} on 8 SMs")
        # rowwise scales (torch._scaled_mm's [M, 1] and [1, N]; both signs), and each alone
        ra = (rnd(seed + 30 + i, m, 1, dtype=torch.float32) + 0.1).to(dev)
        rb = (rnd(seed + 40 + i, 1, n, dtype=torch.float32) - 0.2).to(dev)
        what = f"gemm_fp8 {m} x {n} x {k} rowwise"
        c = meld.gemm_fp8(a, b, ra, rb, out=poison((m, n), torch.bfloat16, dev))
        close(c, ref * ra * rb, f"{what} vs fp32")
        close(meld.gemm_fp8(a, b, ra, None), ref * ra, f"{what} scale_a only")
        close(meld.gemm_fp8(a, b, torch.tensor([0.5], device=dev), rb), ref * 0.5 * rb,
              f"{what} scale_b only")
        if m % 16 == 0 and n % 16 == 0:
            try:
                close(c, torch._scaled_mm(a, b.t(), ra, rb, out_dtype=torch.bfloat16,
                                          use_fast_accum=True), f"{what} vs torch._scaled_mm")
            except Exception as e:  # noqa: BLE001
                check(False, f"{what}: torch._scaled_mm rowwise reference: {type(e).__name__}: "
                      f"{str(e)[:300]}")
    # meld.fp8_quantize: scales amax / 448 exactly, bytes those of torch's own rounding of
    # x * (448 / amax) (saturated), per row and per tensor; then a rowwise GEMM of quantized
    # operands against the bf16 product (e4m3's precision: a few %)
    x = rnd(seed + 300, 300, 1000).to(dev) * (2.0 ** (torch.arange(300, device=dev) % 9 - 4)).to(
        torch.bfloat16)[:, None]
    for rowwise in (True, False):
        q, sc = meld.fp8_quantize(x, rowwise=rowwise)
        amax = x.float().abs().amax(dim=1, keepdim=True) if rowwise else x.float().abs().amax().reshape(1)
        check(q.dtype == torch.float8_e4m3fn and tuple(sc.shape) == ((300, 1) if rowwise else (1,)),
              f"fp8_quantize rowwise={rowwise}: {q.dtype} {tuple(sc.shape)}")
        # (the correctly rounded quotient: torch's tensor / scalar on CUDA multiplies by 1/448, one
        # ulp off about half the time; a float64 quotient rounded to float32 is exact here)
        check(torch.equal(sc, (amax.double() / 448.0).float()), f"fp8_quantize rowwise={rowwise}: scales != amax / 448")
        want = (x.float() * (448.0 / amax)).clamp(-448, 448).to(torch.float8_e4m3fn)
        same = float((q.view(torch.uint8) == want.view(torch.uint8)).float().mean())
        check(same >= 0.999, f"fp8_quantize rowwise={rowwise}: {same:.5f} of the bytes as torch's")
    a16, b16 = rnd(seed + 301, 256, 1024).to(dev), rnd(seed + 302, 512, 1024).to(dev)
    (a8, sa8), (b8, sb8) = meld.fp8_quantize(a16), meld.fp8_quantize(b16)
    close(meld.gemm_fp8(a8, b8, sa8, sb8.reshape(1, -1)), a16.float() @ b16.float().T,
          "fp8_quantize + gemm_fp8 rowwise round trip", 0.08)
    a = fp8(seed + 100, 64, 40).to(dev)
    try:
        meld.gemm_fp8(a, fp8(seed + 101, 32, 40).to(dev))
        check(False, "gemm_fp8 with k 40 did not raise")
    except meld.MeldArgumentError as e:
        check("k = 40" in str(e) and "multiple of 16" in str(e), f"gemm_fp8 k 40: {e}")
    w = fp8(seed + 102, 32, 64).to(dev)
    try:
        meld.gemm_fp8(rnd(seed + 103, 64, 64).to(dev), w)
        check(False, "gemm_fp8 with a bf16 a did not raise")
    except ValueError as e:
        check(isinstance(e, meld.MeldArgumentError) and "a: dtype bfloat16" in str(e) and
              "float8_e4m3fn" in str(e), f"gemm_fp8 bf16 a: {e}")
    try:
        meld.gemm_fp8(fp8(seed + 104, 64, 64).to(dev), w, torch.ones(2, device=dev))
        check(False, "gemm_fp8 with a 2-element scale_a did not raise")
    except meld.MeldArgumentError as e:
        check("scale_a: shape (2,)" in str(e) and "64 contiguous" in str(e),
              f"gemm_fp8 2-element scale: {e}")
    # torch.compile (fullgraph: torch.ops.meld.gemm_fp8), default and reduce-overhead modes
    a = fp8(seed + 200, 256, 512).to(dev)
    b = fp8(seed + 201, 384, 512).to(dev)
    sa = torch.tensor([0.5], device=dev)
    sb = torch.tensor([2.5], device=dev)

    def step(a, b, sa, sb):
        return meld.gemm_fp8(a, b, sa, sb) * 0.5 + meld.gemm_fp8(a, b)

    want = step(a, b, sa, sb)
    close(want, (a.float() @ b.float().T) * 1.625, "gemm_fp8 eager step")
    for mode in ("default", "reduce-overhead"):
        torch._dynamo.reset()
        try:
            fn = torch.compile(step, fullgraph=True, mode=mode)
            got = fn(a, b, sa, sb)
            got = fn(a, b, sa, sb)  # (reduce-overhead: a replay)
            close(got, want, f"torch.compile {mode}: gemm_fp8", 1e-2)
        except Exception as e:  # noqa: BLE001
            check(False, f"torch.compile {mode} of gemm_fp8: {type(e).__name__}: {str(e)[:500]}")


def test_comm(comm, dev, seed=100):
    import torch
    import meld
    P, r = comm.nranks, comm.rank
    # collectives, bf16 and fp32, rank r's input = rnd(seed + r)
    for dt in (torch.bfloat16, torch.float32):
        xs = [rnd(seed + q, 96, 40, dtype=dt).to(dev) for q in range(P)]
        x = xs[r]
        g = comm.all_gather(x, out=poison((P * 96, 40), dt, dev))
        check(torch.equal(g, torch.cat(xs)), f"all_gather {dt}")
        tot = sum(t.float() for t in xs)
        ar = comm.all_reduce(x)
        close(ar, tot, f"all_reduce {dt}", 1e-2 if dt == torch.bfloat16 else 1e-6)
        y = x.clone()
        comm.all_reduce(y, out=y)
        close(y, tot, f"all_reduce in place {dt}", 1e-2 if dt == torch.bfloat16 else 1e-6)
        rs = comm.reduce_scatter(x)
        close(rs, tot.view(P, -1, 40)[r], f"reduce_scatter {dt}",
              1e-2 if dt == torch.bfloat16 else 1e-6)
        a2a = comm.all_to_all(x)
        check(torch.equal(a2a, torch.cat([xs[q].view(P, -1, 40)[r] for q in range(P)])),
              f"all_to_all {dt}")
    # all_to_allv: rank r sends (r + q) % 3 + 1 rows to q (rows of rank q's input, rank by rank)
    def cnt(a, b):
        return (a + b) % 3 + 1
    for dt in (torch.bfloat16, torch.float32):
        ins = [rnd(seed + 30 + q, sum(cnt(q, t) for t in range(P)), 24, dtype=dt).to(dev) for q in range(P)]
        got = comm.all_to_allv(ins[r], [cnt(r, q) for q in range(P)], [cnt(q, r) for q in range(P)])
        want = torch.cat([ins[q][sum(cnt(q, t) for t in range(r)):][:cnt(q, r)] for q in range(P)])
        check(torch.equal(got, want), f"all_to_allv {dt}")
    try:
        comm.all_to_allv(ins[r], [1] * (P + 1), [1] * P)
        check(False, "all_to_allv with a wrong count list did not raise")
    except ValueError as e:
        check("one per rank" in str(e), f"all_to_allv counts: {e}")
    # symmetric memory: all_gather into it (the zero-copy path), all_reduce from it
    sym = comm.alloc((P * 64, 128))
    x = rnd(seed + 50 + r, 64, 128).to(dev)
    comm.all_gather(x, out=sym)
    check(torch.equal(sym, torch.cat([rnd(seed + 50 + q, 64, 128).to(dev) for q in range(P)])),
          "all_gather into symmetric memory")
    comm.free(sym)
    # AllGather + GEMM (m_loc 256 and a 200-row tail), the gathered A bitwise
    for m_loc in (256, 200):
        shards = [rnd(seed + 200 + q, m_loc, 512).to(dev) for q in range(P)]
        w = rnd(seed + 300 + r, 384, 512).to(dev)
        c, ga = comm.ag_gemm(shards[r], w, out=poison((P * m_loc, 384), torch.bfloat16, dev),
                             gathered=True)
        full = torch.cat(shards)
        close(c, full.float() @ w.float().T, f"ag_gemm m_loc {m_loc}")
        check(torch.equal(ga, full), f"ag_gemm m_loc {m_loc}: gathered A")
    # GEMM + ReduceScatter / AllReduce: a [M, K_loc] per rank, the sum over ranks
    M, K, N = 512, 256, 384
    As = [rnd(seed + 400 + q, M, K).to(dev) for q in range(P)]
    Ws = [rnd(seed + 500 + q, N, K).to(dev) for q in range(P)]
    tot = sum(As[q].float() @ Ws[q].float().T for q in range(P))
    first, count = comm.gemm_rs_rows(M)
    rs = comm.gemm_rs(As[r], Ws[r])
    close(rs, tot[first:first + count], "gemm_rs")
    close(comm.gemm_rs(As[r], Ws[r], algo="unfused"), tot[first:first + count], "gemm_rs unfused")
    close(comm.gemm_ar(As[r], Ws[r], out=poison((M, N), torch.bfloat16, dev)), tot, "gemm_ar")
    csym = comm.alloc((M, N))
    csym.fill_(float("nan"))
    comm.gemm_ar(As[r], Ws[r], out=csym)
    close(csym, tot, "gemm_ar into symmetric memory (zero copy)")
    comm.free(csym)
    try:
        comm.gemm_ar(As[r], Ws[r], algo="fast")
        check(False, "gemm_ar with a bad algo did not raise")
    except ValueError as e:
        check("algo" in str(e), f"bad algo: {e}")
    test_comm_fp8(comm, dev, seed + 1600)
    # ring attention: contiguous parts (not causal) and zigzag (causal)
    S, H, D = 256, 4, 128
    qs = rnd(seed + 600, 1, P * S, H, D).to(dev)
    ks = rnd(seed + 601, 1, P * S, H, D).to(dev)
    vs = rnd(seed + 602, 1, P * S, H, D).to(dev)
    ro, _ = ref_attention(qs, ks, vs, False)
    mine = slice(r * S, (r + 1) * S)
    o = comm.ring_attention(qs[:, mine].contiguous(), ks[:, mine].contiguous(),
                            vs[:, mine].contiguous())
    close(o, ro[:, mine], "ring_attention contiguous")
    half = S // 2
    pieces = [slice(r * half, (r + 1) * half), slice((2 * P - 1 - r) * half, (2 * P - r) * half)]

    def part(t):
        return torch.cat([t[:, p] for p in pieces], dim=1).contiguous()
    rc, _ = ref_attention(qs, ks, vs, True)
    o, lse = comm.ring_attention(part(qs), part(ks), part(vs), causal=True, zigzag=True,
                                 return_lse=True)
    close(o, part(rc), "ring_attention zigzag causal")
    # the MoE layer: E = 4P experts, top-2, every rank's tokens and weights from seeds
    E, T, Hd, F, topk = 4 * P, 64, 256, 128, 2
    local = E // P

    def ids_of(q):
        g = torch.Generator().manual_seed(seed + 700 + q)
        return torch.stack([torch.randperm(E, generator=g)[:topk] for _ in range(T)]).int()
    xs = [rnd(seed + 800 + q, T, Hd).to(dev) for q in range(P)]
    ids = [ids_of(q).to(dev) for q in range(P)]
    wts = [torch.rand(T, topk, generator=torch.Generator().manual_seed(seed + 900 + q)).to(dev)
           for q in range(P)]
    w1 = rnd(seed + 1000, E, 2 * F, Hd, scale=0.05).to(dev)
    w2 = rnd(seed + 1001, E, Hd, F, scale=0.05).to(dev)
    mw1, mw2 = w1[r * local:(r + 1) * local].contiguous(), w2[r * local:(r + 1) * local].contiguous()
    xf = xs[r].float()
    h1 = torch.einsum("th,efh->tef", xf, w1.float())  # [T, E, 2F]
    act = torch.nn.functional.silu(h1[..., :F]) * h1[..., F:]
    act = act.bfloat16().float()  # (meld rounds the activation to bf16 once)
    y = torch.einsum("tef,ehf->teh", act, w2.float())  # [T, E, H]
    sel = y[torch.arange(T, device=dev)[:, None], ids[r].long()]  # [T, topk, H]
    ref = (sel * wts[r][..., None]).sum(1)
    out = comm.moe_ffn(xs[r], ids[r], wts[r], mw1, mw2, experts=E,
                       out=poison((T, Hd), torch.bfloat16, dev))
    close(out, ref, "moe_ffn", 2e-2)
    d = comm.moe_dispatch(xs[r], ids[r], mw1, experts=E, swiglu=True)
    y2 = d.grouped_gemm(d.y, mw2)
    close(d.combine(y2, wts[r]), ref, "moe_dispatch + grouped_gemm + combine", 2e-2)
    # CUDA graphs: all_reduce and ag_gemm captured once, replayed with new inputs
    sx = torch.empty(96, 40, dtype=torch.bfloat16, device=dev)
    sa = torch.empty(256, 512, dtype=torch.bfloat16, device=dev)
    w = rnd(seed + 1100 + r, 384, 512).to(dev)
    sx.copy_(rnd(seed, 96, 40))
    sa.copy_(rnd(seed, 256, 512))
    torch.cuda.synchronize(dev)
    s = torch.cuda.Stream(dev)
    s.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(s):  # (warm-up outside capture: the fused path's first call)
        comm.all_reduce(sx)
        comm.ag_gemm(sa, w)
    torch.cuda.current_stream(dev).wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gar = comm.all_reduce(sx)
        gc = comm.ag_gemm(sa, w)
    for it in range(3):
        xs_it = [rnd(seed + 1200 + 10 * it + q, 96, 40) for q in range(P)]
        as_it = [rnd(seed + 1300 + 10 * it + q, 256, 512) for q in range(P)]
        sx.copy_(xs_it[r])
        sa.copy_(as_it[r])
        graph.replay()
        close(gar, sum(t.float() for t in xs_it).to(dev), f"graph replay {it}: all_reduce")
        close(gc, torch.cat(as_it).to(dev).float() @ w.float().T, f"graph replay {it}: ag_gemm")
    # 200 back-to-back all_reduces with changing inputs, checked after one sync
    base = [rnd(seed + 1400 + q, 32, 64).to(dev) for q in range(P)]
    outs = [comm.all_reduce(base[r] * (i % 7 + 1)) for i in range(200)]
    torch.cuda.synchronize(dev)
    tot = sum(t.float() for t in base)
    errs = [relerr(o, tot * (i % 7 + 1)) for i, o in enumerate(outs)]
    check(max(errs) <= 1e-2, f"200 back-to-back all_reduces: worst rel. error {max(errs):.3g}")
    comm.check()
    check(True, "comm.check() clean at the end")


def test_comm_fp8(comm, dev, seed):
    """ag_gemm_fp8 / gemm_rs_fp8 / gemm_ar_fp8 (e4m3 in, per-tensor device scales, bf16 out)
    against fp32 torch on the same fp8 values, fused (auto) and unfused, and their argument
    errors. Every rank draws every rank's inputs from seeds, as the bf16 checks."""
    import torch
    import meld
    P, r = comm.nranks, comm.rank
    if not hasattr(torch, "float8_e4m3fn"):
        print(f"[rank {r}] fp8 comm checks SKIPPED (torch {torch.__version__} has no "
              "float8_e4m3fn)", flush=True)
        return

    def scale(v):
        return torch.tensor([v], dtype=torch.float32, device=dev)
    # AllGather + GEMM: one scale_a on every rank (the gathered rows are one quantization of A),
    # this rank's own scale_b (its own weight); K = 1040 (not a multiple of 128: a k tail)
    m_loc, N, K = 128, 384, 1040
    shards = [fp8(seed + q, m_loc, K).to(dev) for q in range(P)]
    w = fp8(seed + 20 + r, N, K).to(dev)
    sa_v, sb_v = 0.75, 0.5 + 0.25 * r
    full = torch.cat([t.float() for t in shards])
    ref = full @ w.float().T
    c, ga = comm.ag_gemm_fp8(shards[r], w, scale(sa_v), scale(sb_v),
                             out=poison((P * m_loc, N), torch.bfloat16, dev), gathered=True)
    check(c.dtype == torch.bfloat16 and ga.dtype == torch.float8_e4m3fn,
          f"ag_gemm_fp8: dtypes {c.dtype} / {ga.dtype}")
    close(c, ref * (sa_v * sb_v), f"ag_gemm_fp8 m_loc {m_loc} x {N} x {K} scales given")
    check(ga.shape == (P * m_loc, K) and
          torch.equal(ga.view(torch.uint8), torch.cat([t.view(torch.uint8) for t in shards])),
          "ag_gemm_fp8: gathered A (fp8, bitwise)")
    close(comm.ag_gemm_fp8(shards[r], w), ref, "ag_gemm_fp8 scales None")
    # GEMM + ReduceScatter / AllReduce: per-rank scales (each rank's product scaled, then summed)
    M, N, K = 256, 384, 1040
    As = [fp8(seed + 40 + q, M, K).to(dev) for q in range(P)]
    Ws = [fp8(seed + 60 + q, N, K).to(dev) for q in range(P)]
    sas = [0.5 + 0.25 * q for q in range(P)]
    sbs = [0.375 + 0.125 * q for q in range(P)]
    tot = sum((As[q].float() @ Ws[q].float().T) * (sas[q] * sbs[q]) for q in range(P))
    sa, sb = scale(sas[r]), scale(sbs[r])
    first, count = comm.gemm_rs_rows(M)
    for algo in ("auto", "unfused"):
        rs = comm.gemm_rs_fp8(As[r], Ws[r], sa, sb, out=poison((count, N), torch.bfloat16, dev),
                              algo=algo)
        check(rs.dtype == torch.bfloat16, f"gemm_rs_fp8 {algo}: dtype {rs.dtype}")
        close(rs, tot[first:first + count], f"gemm_rs_fp8 {M} x {N} x {K} {algo}")
        close(comm.gemm_ar_fp8(As[r], Ws[r], sa, sb, out=poison((M, N), torch.bfloat16, dev),
                               algo=algo), tot, f"gemm_ar_fp8 {M} x {N} x {K} {algo}")
    # rowwise: each rank's own [M, 1] and [1, N] scales
    ras = [(rnd(seed + 90 + q, M, 1, dtype=torch.float32) + 0.2).to(dev) for q in range(P)]
    rbs = [(rnd(seed + 95 + q, 1, N, dtype=torch.float32) - 0.1).to(dev) for q in range(P)]
    rtot = sum((As[q].float() @ Ws[q].float().T) * ras[q] * rbs[q] for q in range(P))
    close(comm.gemm_rs_fp8(As[r], Ws[r], ras[r], rbs[r]), rtot[first:first + count],
          f"gemm_rs_fp8 {M} x {N} x {K} rowwise")
    close(comm.gemm_ar_fp8(As[r], Ws[r], ras[r], rbs[r]), rtot, f"gemm_ar_fp8 {M} x {N} x {K} rowwise")
    # AllGather + GEMM rowwise: each rank's shard rows' scales [m_loc, 1] (gathered by the call)
    # and its own columns' [1, n_loc]; then a per-column scale_b alone
    ras_ag = [(rnd(seed + 97 + q, m_loc, 1, dtype=torch.float32) + 0.2).to(dev) for q in range(P)]
    cb = (rnd(seed + 99 + r, 1, w.size(0), dtype=torch.float32) + 0.3).to(dev)
    close(comm.ag_gemm_fp8(shards[r], w, ras_ag[r], cb), ref * torch.cat(ras_ag) * cb,
          "ag_gemm_fp8 rowwise")
    close(comm.ag_gemm_fp8(shards[r], w, scale(sa_v), cb), ref * sa_v * cb, "ag_gemm_fp8 rowwise scale_b")
    csym = comm.alloc((M, N))
    csym.fill_(float("nan"))
    comm.gemm_ar_fp8(As[r], Ws[r], sa, sb, out=csym)
    close(csym, tot, "gemm_ar_fp8 into symmetric memory (zero copy)")
    comm.free(csym)
    # argument errors (raised before the C call, alike on every rank: no peer waits)
    a40, w40 = fp8(seed + 80, 64, 40).to(dev), fp8(seed + 81, 32, 40).to(dev)
    for name, call in (("ag_gemm_fp8", lambda: comm.ag_gemm_fp8(a40, w40)),
                       ("gemm_rs_fp8", lambda: comm.gemm_rs_fp8(a40, w40)),
                       ("gemm_ar_fp8", lambda: comm.gemm_ar_fp8(a40, w40, algo="unfused"))):
        try:
            call()
            check(False, f"{name} with k 40 did not raise")
        except meld.MeldArgumentError as e:
            check("k = 40" in str(e) and "multiple of 16" in str(e), f"{name} k 40: {e}")
    try:
        comm.gemm_ar_fp8(As[r].float().bfloat16(), Ws[r])
        check(False, "gemm_ar_fp8 with a bf16 a did not raise")
    except ValueError as e:
        check(isinstance(e, meld.MeldArgumentError) and "a: dtype bfloat16" in str(e) and
              "float8_e4m3fn" in str(e), f"gemm_ar_fp8 bf16 a: {e}")
    try:
        comm.gemm_rs_fp8(As[r], Ws[r], torch.ones(2, device=dev))
        check(False, "gemm_rs_fp8 with a 2-element scale_a did not raise")
    except meld.MeldArgumentError as e:
        check("scale_a: shape (2,)" in str(e), f"gemm_rs_fp8 2-element scale: {e}")


def test_nn(comm, dev, seed=3000):
    """meld.nn's layers, forward and backward, against fp32 autograd of the whole block."""
    import torch
    import torch.nn.functional as F
    import meld.nn as mnn
    P, r = comm.nranks, comm.rank
    m, H, Fd = 256, 512, 768
    fl = Fd // P
    x_full = rnd(seed, P * m, H).to(dev)
    w1 = rnd(seed + 1, Fd, H, scale=H ** -0.5).to(dev)
    w2 = rnd(seed + 2, H, Fd, scale=Fd ** -0.5).to(dev)
    gz = rnd(seed + 3, P * m, H).to(dev)
    mine, cols = slice(r * m, (r + 1) * m), slice(r * fl, (r + 1) * fl)
    xf = x_full.float().requires_grad_()
    w1f, w2f = w1.float().requires_grad_(), w2.float().requires_grad_()
    zf = F.gelu(xf @ w1f.T) @ w2f.T
    (zf * gz.float()).sum().backward()
    grads = []
    for save in (True, False):
        col = mnn.ColumnParallelLinear(comm, H, Fd, save_gathered=save)
        row = mnn.RowParallelLinear(comm, Fd, H)
        with torch.no_grad():
            col.weight.copy_(w1[cols])
            row.weight.copy_(w2[:, cols])
        x = x_full[mine].clone().requires_grad_()
        z = row(F.gelu(col(x)))
        what = f"meld.nn (save_gathered {save})"
        close(z, zf[mine].detach(), f"{what}: forward")
        (z.float() * gz[mine].float()).sum().backward()
        close(x.grad, xf.grad[mine], f"{what}: input grad", 2e-2)
        close(col.weight.grad, w1f.grad[cols], f"{what}: column weight grad", 2e-2)
        close(row.weight.grad, w2f.grad[:, cols], f"{what}: row weight grad", 2e-2)
        grads.append((x.grad, col.weight.grad, row.weight.grad))
    for i, (a, b) in enumerate(zip(*grads)):  # (not bitwise: a split-K GEMM adds in L2 in arrival order)
        close(a, b, f"meld.nn: save_gathered False vs True, gradient {i}", 1e-2)
    try:
        mnn.ColumnParallelLinear(comm, H, P * 100 + 1)
        check(P == 1, "ColumnParallelLinear with out_features not a multiple of P did not raise")
    except ValueError as e:
        check(P > 1 and "out_features" in str(e), f"ColumnParallelLinear: {e}")


def test_compile(comm, dev, seed=4000):
    """torch.compile(fullgraph=True) over meld's ops (torch.ops.meld.*: no graph break), default
    and reduce-overhead (CUDA graphs) modes, against the eager calls."""
    import torch
    import torch.nn.functional as F
    import meld
    P, r = comm.nranks, comm.rank
    x = rnd(seed + r, 256, 512).to(dev)
    w1 = rnd(seed + 10 + r, 384, 512, scale=512 ** -0.5).to(dev)
    w2 = rnd(seed + 20 + r, 512, 384, scale=384 ** -0.5).to(dev)
    q = rnd(seed + 30 + r, 1, 256, 4, 128).to(dev)

    def step(x, w1, w2, q):
        h = F.gelu(comm.ag_gemm(x, w1))
        y = comm.gemm_rs(h, w2)
        z = comm.all_reduce(y) * 0.5 + comm.all_gather(y)[: y.size(0)]
        o = comm.ring_attention(q, q, q, causal=True, zigzag=True)
        v = comm.all_to_allv(x[: 3 * comm.nranks], [3] * comm.nranks, [3] * comm.nranks)
        return z, meld.gemm(z, w1), o, meld.attention(q, q, q), v

    ref = step(x, w1, w2, q)
    for mode in ("default", "reduce-overhead"):
        torch._dynamo.reset()
        try:
            fn = torch.compile(step, fullgraph=True, mode=mode)
            got = fn(x, w1, w2, q)
            got = fn(x, w1, w2, q)  # (reduce-overhead: a replay)
            for i, (a, b) in enumerate(zip(got, ref)):
                close(a, b, f"torch.compile {mode}: output {i}", 1e-2)
        except Exception as e:  # noqa: BLE001 (report, do not stop the other checks)
            check(False, f"torch.compile {mode}: {type(e).__name__}: {str(e)[:500]}")


def test_compile_nn(comm, dev, seed=5000):
    """torch.compile (default mode, graph breaks allowed) over a block of meld.nn layers, forward
    and backward, against the same block eagerly."""
    import torch
    import torch.nn.functional as F
    import meld.nn as mnn
    r = comm.rank
    col = mnn.ColumnParallelLinear(comm, 512, 768)
    row = mnn.RowParallelLinear(comm, 768, 512)
    with torch.no_grad():
        col.weight.copy_(rnd(seed + r, *col.weight.shape, scale=512 ** -0.5))
        row.weight.copy_(rnd(seed + 10 + r, *row.weight.shape, scale=768 ** -0.5))

    def block(x):
        return row(F.gelu(col(x)))

    outs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        fn = torch.compile(block) if compiled else block
        x = rnd(seed + 20 + r, 256, 512).to(dev).requires_grad_()
        col.weight.grad = row.weight.grad = None
        try:
            y = fn(x)
            y = fn(x) if compiled else y
            (y.float() * 0.01).sum().backward()
            outs.append((y.detach(), x.grad, col.weight.grad, row.weight.grad))
        except Exception as e:  # noqa: BLE001
            check(False, f"torch.compile of meld.nn (compiled {compiled}): {type(e).__name__}: {str(e)[:500]}")
            return
    for i, (a, b) in enumerate(zip(*outs)):
        close(b, a, f"torch.compile of meld.nn: {['output', 'input grad', 'column grad', 'row grad'][i]}", 1e-2)


def bench(comm, dev):
    """The binding's host cost per call (eager) against the same calls replayed in a graph."""
    import torch
    import meld
    rows = []
    x = rnd(1, 2048).to(dev)  # 4 KB all-reduce
    a = rnd(2, 8192, 8192).to(dev)
    w = rnd(3, 8192, 8192).to(dev)
    cases = [("all_reduce 4 KB", lambda: comm.all_reduce(x), 200),
             ("gemm 8192^3", lambda: meld.gemm(a, w), 20),
             ("torch.matmul 8192^3", lambda: a @ w.T, 20)]
    for name, fn, n in cases:
        for _ in range(3):
            fn()
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host_us = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize(dev)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            fn()
        e1.record()
        torch.cuda.synchronize(dev)
        eager_us = e0.elapsed_time(e1) / n * 1e3
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream(dev)
        s.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream(dev).wait_stream(s)
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
        g.replay()
        torch.cuda.synchronize(dev)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize(dev)
        graph_us = e0.elapsed_time(e1) / n * 1e3
        rows.append((name, host_us, eager_us, graph_us))
    print("PYBENCH | call | host us / call (Python) | eager us / call | graph us / call |")
    for name, h, e, g in rows:
        print(f"PYBENCH | {name} | {h:.2f} | {e:.2f} | {g:.2f} |")


def rank_main(args):
    import torch
    import meld
    ngpu = torch.cuda.device_count()
    dev = int(os.environ["LOCAL_RANK"]) % ngpu
    torch.cuda.set_device(dev)
    with meld.Comm.from_env() as comm:
        check(comm.nranks == int(os.environ["WORLD_SIZE"]) and comm.device == dev,
              f"comm: {comm}")
        if comm.rank == 0:
            test_single(dev)
        if comm.nranks == 1:  # (alone: its compiles would keep a peer waiting past its timeout)
            test_fp8(dev)
        test_comm(comm, dev)
        test_nn(comm, dev)
        test_compile(comm, dev)
        test_compile_nn(comm, dev)
        if args.bench and comm.nranks == 1:
            bench(comm, dev)
    # a second comm from a torch.distributed group (gloo: ranks may share a GPU), its id
    # broadcast by torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    with meld.Comm.from_process_group(workspace_bytes=8 << 20) as comm2:
        P, r = comm2.nranks, comm2.rank
        check(comm2.workspace_bytes == 8 << 20, f"from_process_group: workspace {comm2.workspace_bytes}")
        xs = [rnd(77 + q, 1000, dtype=torch.float32).to(dev) for q in range(P)]
        close(comm2.all_reduce(xs[r]), sum(xs), "from_process_group: all_reduce", 1e-6)
        # split: every rank in one child in reverse order (key -r), then rank 0 alone and the
        # others in no child (color None)
        with comm2.split(0, key=-r) as ch:
            check(ch.nranks == P and ch.rank == P - 1 - r and ch.workspace_bytes == 8 << 20,
                  f"split: {ch}")
            close(ch.all_reduce(xs[r]), sum(xs), "split: all_reduce on the child", 1e-6)
        ch = comm2.split(0 if r == 0 else None)
        check((ch is not None) == (r == 0), f"split with color None: {ch}")
        if ch is not None:
            check(ch.nranks == 1, f"split alone: {ch}")
            ch.destroy()
    dist.destroy_process_group()
    passed, failed = pycheck.counts()
    print(f"[rank {os.environ['RANK']}] {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p < 65000:
            with socket.socket() as s2:
                try:
                    s2.bind(("127.0.0.1", p + 1))
                    return p
                except OSError:
                    continue


def launch(nranks, args):
    import torch
    ngpu = torch.cuda.device_count()
    env = dict(os.environ, WORLD_SIZE=str(nranks), LOCAL_WORLD_SIZE=str(nranks),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    if nranks > ngpu:
        env.update(MELD_SHARE_GPU="1",  # (time slices: waits get at least 15 s)
                   MELD_TIMEOUT_MS=str(max(15000, int(os.environ.get("MELD_TIMEOUT_MS", "0")))))
    procs = []
    logs = []
    for r in range(nranks):
        log = tempfile.TemporaryFile(mode="w+")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, __file__, "--child"] +
                                      (["--bench"] if args.bench else []),
                                      env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                                      stdout=log, stderr=subprocess.STDOUT))
    bad = 0
    deadline = time.time() + float(os.environ.get("GT_SPAWN_TIMEOUT_S", "300"))
    for p in procs:
        try:
            bad += p.wait(timeout=max(1.0, deadline - time.time())) != 0
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            bad += 1
            print(f"FAIL: a rank of {nranks} did not finish in time (killed)")
    for log in logs:  # each rank's output, and its counts summed into ours
        log.seek(0)
        text = log.read()
        sys.stdout.write(text)
        m = re.search(r"^\[rank \d+\] (\d+) passed, (\d+) failed$", text, flags=re.M)
        if m:
            pycheck.add(int(m.group(1)), int(m.group(2)))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        return rank_main(args)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("test_torch.py: SKIPPED (torch is not installed)")
        return 0
    for n in [int(v) for v in args.ranks.split(",")]:
        bad = launch(n, args)
        check(bad == 0, f"{n} rank(s): {bad} rank(s) failed")
        print(f"== test_torch.py at {n} rank(s): {'pass' if bad == 0 else 'FAIL'}", flush=True)
    pycheck.finish()


if __name__ == "__main__":
    sys.exit(main())
