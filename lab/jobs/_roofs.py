"""Measured roofs: the best matmul rate through torch with operands in cache, and memory bandwidth.

Compute: ``torch.matmul`` (fp32, bf16, fp64; MKL or oneDNN as torch picks)
and ``torch._int_mm`` (int8 x int8 -> int32, oneDNN) on square matrices
whose three operands fit in the last-level cache, at a ladder of sizes; the
roof is the best single multiply measured (best-of, like STREAM reports its
best: interference only ever slows a call down), with the median beside it.
Each multiply is 2 n^3 operations.

Memory: one buffer far larger than the caches, read (``amax`` and ``sum``,
the better one) and copied (``copy_``; bytes = read + written, STREAM's
convention: the write-allocate traffic is not counted). With the CPUs of a
NUMA node: every thread of the process is pinned to the node's CPUs
(``sched_setaffinity`` per thread), the buffers are bound to the node with
``mbind(MPOL_BIND)`` where the kernel allows it, else placed by first touch
of those threads; ``/proc/self/numa_maps`` then says where the pages are.

Standard library only, Python 3.8+; torch is handed in.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

LADDER = (256, 384, 512, 768, 1024)     # those whose operands fit the cache are measured (the best: 256..512)
BYTES = {"fp32": 4, "bf16": 2, "fp64": 8, "int8": 1}
MIN_REPS = 3
MAX_REPS = 400
MPOL_BIND = 2
_MBIND_NR = {"x86_64": 237, "aarch64": 235, "ppc64le": 259, "s390x": 235, "riscv64": 235}


def ladder(dtype: str, cache_bytes: Optional[int], sizes: Optional[List[int]] = None) -> List[int]:
    """Matrix sizes whose three operands fit in ``cache_bytes`` (at least the smallest)."""
    if sizes:
        return list(sizes)
    if not cache_bytes:
        return [n for n in LADDER if n <= 512]
    if sizes is None and cache_bytes < 3 * 256 * 256 * BYTES.get(dtype, 4):
        return [128]
    fit = [n for n in LADDER if 3 * n * n * BYTES.get(dtype, 4) <= cache_bytes]
    return fit or [LADDER[0]]


def matmul_op(torch: Any, dtype: str, n: int) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(0)
    if dtype == "int8":
        a = torch.randint(-100, 100, (n, n), dtype=torch.int8, generator=g)
        b = torch.randint(-100, 100, (n, n), dtype=torch.int8, generator=g)
        return lambda: torch._int_mm(a, b)
    kind = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp64": torch.float64}[dtype]
    a = torch.randn(n, n, generator=g).to(kind)
    b = torch.randn(n, n, generator=g).to(kind)
    out = torch.empty(n, n, dtype=kind)
    return lambda: torch.matmul(a, b, out=out)


def timed_rates(op: Callable[[], Any], work: float, seconds: float, stop: Any) -> List[float]:
    """Rates (work per second) of single calls, for at least ``seconds`` and MIN_REPS calls, but never much
    over 3 x ``seconds``: on a machine others keep busy one call can take ten times as long."""
    op()                                           # warm-up: allocation, kernel choice
    rates: List[float] = []
    began = time.perf_counter()
    while len(rates) < MAX_REPS and not stop.is_set():
        t0 = time.perf_counter()
        op()
        dt = time.perf_counter() - t0
        rates.append(work / max(dt, 1e-9))
        spent = time.perf_counter() - began
        if (len(rates) >= MIN_REPS and spent >= seconds) or spent >= 3 * seconds:
            break
    return rates


def compute_roof(torch: Any, dtype: str, threads: int, sizes: List[int], seconds: float, stop: Any,
                 meter: Any = None) -> Dict[str, Any]:
    """The best in-cache matmul rate at ``threads``: one point per size, the roof the best of them."""
    torch.set_num_threads(threads)
    start = meter.start() if meter is not None else None
    points = []
    for n in sizes:
        if stop.is_set():
            break
        op = matmul_op(torch, dtype, n)
        rates = timed_rates(op, 2.0 * n ** 3, seconds, stop)
        if rates:
            points.append({"dtype": dtype, "threads": threads, "size": n, "reps": len(rates),
                           "gflops": round(max(rates) / 1e9, 2), "median_gflops": round(statistics.median(rates) / 1e9, 2),
                           "intensity": round(2.0 * n / (3.0 * BYTES.get(dtype, 4)), 2)})
    best = max(points, key=lambda p: p["gflops"], default=None)
    out: Dict[str, Any] = {"dtype": dtype, "threads": threads, "points": points,
                           "interference": meter.since(start) if meter is not None else None}
    if best is not None:
        out.update(gflops=best["gflops"], median_gflops=best["median_gflops"], size=best["size"],
                   method=f"torch {'_int_mm' if dtype == 'int8' else 'matmul'} {dtype}, n = {best['size']} "
                          f"(operands in cache), best of {best['reps']} calls")
    return out


# ----------------------------------------------------------------------------- memory


def threads_of_process() -> List[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def pin_all_threads(cpus: List[int]) -> Optional[str]:
    """Every thread of this process onto ``cpus``; an error text when the OS refuses."""
    if not hasattr(os, "sched_setaffinity"):
        return "pinning needs Linux"
    try:
        os.sched_setaffinity(0, cpus)
        for tid in threads_of_process():
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:        # a thread that ended meanwhile
                continue
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def mbind(address: int, length: int, node: int) -> Optional[str]:
    """Bind the pages of [address, address + length) to NUMA ``node`` (MPOL_BIND); an error text when refused."""
    import ctypes
    import platform

    nr = _MBIND_NR.get(platform.machine())
    if nr is None:
        return f"no mbind system call number known for {platform.machine()}"
    page = os.sysconf("SC_PAGE_SIZE")
    start = (address + page - 1) // page * page
    end = (address + length) // page * page
    if end <= start:
        return "buffer too small to bind"
    words = node // 64 + 1
    mask = (ctypes.c_ulong * words)()
    mask[node // 64] = 1 << (node % 64)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_void_p(start), ctypes.c_ulong(end - start), ctypes.c_int(MPOL_BIND),
                      mask, ctypes.c_ulong(words * 64 + 1), ctypes.c_uint(0))
    if rc != 0:
        return os.strerror(ctypes.get_errno())
    return None


def placement(address: int) -> Optional[Dict[int, float]]:
    """Share of the pages of the mapping holding ``address`` on each NUMA node (/proc/self/numa_maps)."""
    try:
        with open("/proc/self/maps") as fh:
            maps = fh.read().splitlines()
        with open("/proc/self/numa_maps") as fh:
            numa = fh.read().splitlines()
    except OSError:
        return None
    start = None
    for line in maps:
        lo, _, hi = line.split(" ", 1)[0].partition("-")
        if int(lo, 16) <= address < int(hi, 16):
            start = lo.lstrip("0") or "0"
            break
    if start is None:
        return None
    for line in numa:
        head, _, rest = line.partition(" ")
        if head.lstrip("0") == start:
            pages = {int(w[1:].split("=")[0]): int(w.split("=")[1]) for w in rest.split()
                     if w.startswith("N") and "=" in w and w[1:].split("=")[0].isdigit()}
            total = sum(pages.values())
            return {n: round(p / total, 4) for n, p in pages.items()} if total else None
    return None


def _buffer(torch: Any, nbytes: int, node: Optional[int]) -> Tuple[Any, Optional[str]]:
    x = torch.empty(nbytes // 4, dtype=torch.float32)
    err = mbind(x.data_ptr(), nbytes, node) if node is not None else None
    x.fill_(1.0)                                  # first touch, by the (pinned) worker threads
    return x, err


def _best_of_threads(torch: Any, op: Callable[[], Any], work: float, seconds: float, stop: Any,
                     threads: int) -> Tuple[List[float], int]:
    """Rates at ``threads``, then for half the time on one thread; the set with the best call, and its threads.

    A memory roof is the most the memory delivered. With several threads a copy waits at its barrier for the
    slowest one, and on a machine others keep busy one of them is often descheduled (on 2 shared CPUs a
    2-thread ``copy_`` reached a third of what one thread of numpy did): one thread is the floor of the roof.
    """
    rates = timed_rates(op, work, seconds, stop)
    if threads <= 1 or stop.is_set():
        return rates, threads
    torch.set_num_threads(1)
    try:
        one = timed_rates(op, work, seconds / 2, stop)
    finally:
        torch.set_num_threads(threads)
    if one and (not rates or max(one) > max(rates)):
        return one, 1
    return rates, threads


def bandwidth(torch: Any, nbytes: int, threads: int, seconds: float, stop: Any, node: Optional[int] = None,
              meter: Any = None) -> Dict[str, Any]:
    """Read and copy GB/s over ``nbytes`` buffers at ``threads`` (bound to ``node`` when given)."""
    torch.set_num_threads(threads)
    start = meter.start() if meter is not None else None
    x, err = _buffer(torch, nbytes, node)
    y, _ = _buffer(torch, nbytes, node)
    where = placement(x.data_ptr())
    results: Dict[str, Any] = {}
    reads = {"amax": lambda: torch.amax(x), "sum": lambda: torch.sum(x)}
    best_read: Optional[Tuple[str, List[float], int]] = None
    for name, op in reads.items():
        rates, used = _best_of_threads(torch, op, float(nbytes), seconds / 2, stop, threads)
        if rates and (best_read is None or max(rates) > max(best_read[1])):
            best_read = (name, rates, used)
    if best_read is not None:
        results["read"] = {"gbps": round(max(best_read[1]) / 1e9, 2), "threads": best_read[2],
                           "median_gbps": round(statistics.median(best_read[1]) / 1e9, 2), "kernel": best_read[0]}
    rates, used = _best_of_threads(torch, lambda: y.copy_(x), 2.0 * nbytes, seconds, stop, threads)
    if rates:
        results["copy"] = {"gbps": round(max(rates) / 1e9, 2), "median_gbps": round(statistics.median(rates) / 1e9, 2),
                           "kernel": "copy_", "threads": used}
    del x, y
    return {"results": results, "mbind_error": err, "placement": where,
            "interference": meter.since(start) if meter is not None else None}
