"""bench_torch_common.py - what the torch baselines share with the C benches (bench_common.h).

settle(fn): sustained timing. With BENCH_SETTLE_MS > 0, fn runs back-to-back for about that
long before the timed calls, so the GPU is timed at the clock its power cap holds under steady
load, as the C benches do with the same variable (docs/perf-notes.md, session 8). Every rank
makes rank 0's number of calls (fn may be collective)."""
import os

import torch
import torch.distributed as dist


def settle(fn, warm=5):
    settle_ms = int(os.environ.get("BENCH_SETTLE_MS", "0") or 0)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(warm):
        fn()
    b.record()
    torch.cuda.synchronize()
    if settle_ms <= 0:
        return
    per_call = max(a.elapsed_time(b) / warm, 1e-4)
    n = torch.tensor([min(100000, int(settle_ms / per_call) + 1)], device="cuda")
    if dist.is_initialized():
        dist.broadcast(n, 0)
    for _ in range(int(n.item())):
        fn()




def soak_ms(fn, per_call_ms):
    """Sustained time per call: with BENCH_SOAK_MS > 0, fn runs back-to-back for about that long,
    twice, and the mean time per call is returned (None when off). Like the C benches' --soak
    (bench_soak.h), without the clock samples. Every rank makes rank 0's number of calls."""
    total = int(os.environ.get("BENCH_SOAK_MS", "0") or 0)
    if total <= 0 or not per_call_ms or per_call_ms != per_call_ms:
        return None
    n = torch.tensor([min(100000, int(total / max(per_call_ms, 1e-4)) + 1)], device="cuda")
    if dist.is_initialized():
        dist.broadcast(n, 0)
    n = int(n.item())
    times = []
    for _ in range(2):
        torch.cuda.synchronize()
        if dist.is_initialized():
            dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / n)
    return sum(times) / len(times)
