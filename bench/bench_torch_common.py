"""bench_torch_common.py - what the torch baselines share with the C benches (bench_common.h).

settle(fn): sustained timing. With BENCH_SETTLE_MS > 0, fn runs back-to-back for about that
long before the timed calls, so the GPU is timed at the clock its power cap holds under steady
load, as the C benches do with the same variable (docs/perf-notes.md, session 8). Every rank
makes rank 0's number of calls (fn may be collective)."""
import os

import torch
import torch.distributed as dist


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


def settle(fn, warm=5):
    per_call = _timed_block(fn, warm)  # the warm-ups
    settle_ms = int(os.environ.get("BENCH_SETTLE_MS", "0") or 0)
    if settle_ms > 0:
        for _ in range(_calls(settle_ms, per_call)):
            fn()


_nvml = None  # (library, device handle), or False when unavailable


def _energy_mj():
    """This GPU's energy counter in mJ (NVML through ctypes: nothing to install), or None."""
    global _nvml
    if _nvml is None:
        _nvml = False
        try:
            import ctypes
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                p = torch.cuda.get_device_properties(torch.cuda.current_device())
                bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".encode()
                h = ctypes.c_void_p()
                if lib.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(h)) == 0:
                    _nvml = (lib, h)
        except Exception:  # noqa: BLE001 - no NVML: no energy
            _nvml = False
    if not _nvml:
        return None
    import ctypes
    v = ctypes.c_ulonglong()
    return v.value if _nvml[0].nvmlDeviceGetTotalEnergyConsumption(_nvml[1], ctypes.byref(v)) == 0 else None


last_mj_per_call = None  # the energy one call took in the last soak_ms (this rank's GPU), or None


def soak_ms(fn, per_call_ms):
    """Sustained time per call: with BENCH_SOAK_MS > 0, fn runs back-to-back for about that long,
    twice, and the mean time per call is returned (None when off). Like the C benches' --soak
    (bench_soak.h), without the clock samples; the energy per call of the second block (from
    NVML's counter, read before and after it) is left in last_mj_per_call."""
    global last_mj_per_call
    last_mj_per_call = None
    total = int(os.environ.get("BENCH_SOAK_MS", "0") or 0)
    if total <= 0 or not per_call_ms or per_call_ms != per_call_ms:
        return None
    n = _calls(total, per_call_ms)
    first = _timed_block(fn, n)
    e0 = _energy_mj()
    second = _timed_block(fn, n)
    e1 = _energy_mj()
    if e0 is not None and e1 is not None and e1 > e0:
        last_mj_per_call = (e1 - e0) / n
    return (first + second) / 2
