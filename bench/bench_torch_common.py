"""bench_torch_common.py - what the torch baselines share with the C benches (bench_common.h).

settle(fn): sustained timing. With BENCH_SETTLE_MS > 0, fn runs back-to-back for about that
long before the timed calls (the first row also for leadin_ms()), so the GPU is timed at the clock
its power cap holds under steady load, as the C benches do with the same variables
(docs/perf-notes.md, sessions 8 and 35). Every rank makes rank 0's number of calls (fn may be
collective)."""
import os
import subprocess
import time

import torch
import torch.distributed as dist


def bench_keys():
    """BENCH.md's keys for a JSON line, as bench_common.h writes them for the C benches: gpu,
    driver, cuda, date (UTC), commit (BENCH_COMMIT, which bench/device_env.sh sets from the
    carried binaries' commit, else git), and torch's version."""
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except Exception:  # (no such tool, no output)
            return None
    return {"gpu": torch.cuda.get_device_name(0),
            "driver": sh(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
            "cuda": torch.version.cuda, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "commit": os.environ.get("BENCH_COMMIT") or sh(["git", "rev-parse", "--short", "HEAD"]) or "unknown"}


def _calls(total_ms, per_call_ms):
    """Calls of per_call_ms that fill total_ms, rank 0's number on every rank (fn may be collective)."""
    n = torch.tensor([min(100000, int(total_ms / max(per_call_ms, 1e-4)) + 1)], device="cuda")
    if dist.is_initialized():
        dist.broadcast(n, 0)
    return int(n.item())


def _timed_block(fn, n):
    """Mean ms per call of n back-to-back calls, ranks aligned first."""
    torch.cuda.synchronize()
    if dist.is_initialized():
        dist.barrier()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n


_led = False


def leadin_ms():
    """The process's lead-in before its first timed row (BENCH_LEADIN_MS; default 2000 when
    BENCH_SETTLE_MS is on, else 0): ~1 s after a process's load begins the power-cap controller
    overshoots and the SM clock dips to ~765 MHz for ~0.5 s (session 35, nvidia-smi every 50 ms);
    bench_common.h's bench_leadin_ms is the same rule."""
    e = os.environ.get("BENCH_LEADIN_MS", "")
    if e:
        return max(0, int(e))
    return 2000 if int(os.environ.get("BENCH_SETTLE_MS", "0") or 0) > 0 else 0


def settle(fn, warm=5):
    global _led
    per_call = _timed_block(fn, warm)  # the warm-ups
    if not _led and leadin_ms() > 0:  # (the first row only; unrecorded)
        for _ in range(_calls(leadin_ms(), per_call)):
            fn()
    _led = True
    settle_ms = int(os.environ.get("BENCH_SETTLE_MS", "0") or 0)
    if settle_ms > 0:
        for _ in range(_calls(settle_ms, per_call)):
            fn()


def soak_ms(fn, per_call_ms):
    """Sustained time per call: with BENCH_SOAK_MS > 0, fn runs back-to-back for about that long,
    twice, and the mean time per call is returned (None when off). Like the C benches' --soak
    (bench_soak.h), without the clock samples."""
    total = int(os.environ.get("BENCH_SOAK_MS", "0") or 0)
    if total <= 0 or not per_call_ms or per_call_ms != per_call_ms:
        return None
    n = _calls(total, per_call_ms)
    return sum(_timed_block(fn, n) for _ in range(2)) / 2
