"""GEMM job: ``python -I gemm.py --json-args '{"threads": [1, 2]}'``.

Times torch matmul (MKL / oneDNN) in fp32 and bf16 and numpy matmul (its BLAS)
in fp32 and fp64 at each thread count. An n x n x n GEMM is 2 n^3
floating-point operations. At each thread count the backends are timed in
turn, one multiply each (ABAB...), so a burst of load elsewhere hits them
alike; each point carries its spread and the share of the CPUs other
programs took meanwhile.

Bounded by default: without ``size`` the job picks n so that one fp32
multiply at one thread takes about a quarter of a second (at most
``max_size``). A path this CPU emulates (bf16 without AVX512_BF16/AMX, as
the parent's CPU probe says in ``native_bf16``) is measured at
``emulated_size`` and labelled ``emulated``: at 4096 it would take minutes.
The nominal peak and utilisation are the parent's business
(:mod:`cpudoctor.lab.peak`); this job only measures. It also measures the
in-cache roof of each precision at each thread count (:mod:`_roofs`, a short
ladder of small multiplies), so "% of roof" compares with what this CPU
reached, not only with cores x clock x FLOP/cycle; and it names the kernels
torch's multiplies ran (:mod:`_libreports`) and numpy's OpenBLAS core.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

if __package__:
    from . import _cpumeter, _jobkit, _libreports, _roofs
    from ._settings import GemmSettings
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _cpumeter
    import _jobkit
    import _libreports
    import _roofs
    from _settings import GemmSettings

CALL_TARGET_S = 0.25      # the automatic size: one fp32 multiply at one thread takes about this long
MIN_REPS = 3
MAX_REPS = 50
PROGRESS_EVERY_S = 1.0    # inside a long point: a progress line at least this often


def flop(n: int) -> float:
    return 2.0 * n ** 3


def _torch_op(n: int, precision: str) -> Callable[[], Any]:
    import torch  # noqa: PLC0415 - only in the child

    dtype = torch.float32 if precision == "fp32" else torch.bfloat16
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(dtype)
    b = torch.randn(n, n, generator=g).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def _numpy_op(n: int, precision: str) -> Callable[[], Any]:
    import numpy as np  # noqa: PLC0415

    dtype = np.float32 if precision == "fp32" else np.float64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    out = np.empty((n, n), dtype)
    return lambda: np.matmul(a, b, out=out)


def make_op(backend: str, n: int) -> Callable[[], Any]:
    lib, precision = backend.split("-")
    return _torch_op(n, precision) if lib == "torch" else _numpy_op(n, precision)


def auto_size(backend: str, max_size: int, limit_threads: Callable[[str, int], Any]) -> int:
    """n such that one multiply with ``backend`` at one thread takes about CALL_TARGET_S."""
    probe = 384
    op = make_op(backend, probe)
    with limit_threads(backend, 1):
        op()
        best = min(_timed(op) for _ in range(3))
    rate = flop(probe) / max(best, 1e-9)                    # FLOP/s at this small size
    n = int((rate * CALL_TARGET_S / 2.0) ** (1.0 / 3.0))
    return max(256, min(max_size, n - n % 128))


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class ThreadLimits:
    """Thread count per backend: torch.set_num_threads, numpy's BLAS through threadpoolctl when installed."""

    def __init__(self) -> None:
        self.torch = None
        try:
            import threadpoolctl  # noqa: PLC0415 - optional in the user's environment
        except ImportError:
            threadpoolctl = None
        self.threadpoolctl = threadpoolctl

    @property
    def numpy_limited(self) -> bool:
        return self.threadpoolctl is not None

    def __call__(self, backend: str, threads: int):
        if backend.startswith("torch"):
            import torch  # noqa: PLC0415

            torch.set_num_threads(threads)
            return _Nothing()
        if self.threadpoolctl is None:
            return _Nothing()
        return self.threadpoolctl.threadpool_limits(limits=threads, user_api="blas")

    def blas_info(self) -> Optional[List[Dict[str, Any]]]:
        if self.threadpoolctl is None:
            return None
        return [{k: i.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
                for i in self.threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def measure_group(ops: Dict[str, Callable[[], Any]], threads: int, s: GemmSettings, limits: ThreadLimits,
                  stop: _jobkit.StopFlag, on_partial: Callable[[Dict[str, List[float]]], None]) -> Dict[str, List[float]]:
    """Per-call seconds of every backend at ``threads``, one call each in turn (order reversed every round)."""
    times: Dict[str, List[float]] = {b: [] for b in ops}
    for backend, op in ops.items():                     # warm-up: first calls allocate and pick kernels
        # Said before the first call, where a kernel the CPU cannot run dies of SIGILL: the crash is then
        # blamed on this library (numpy's OpenBLAS), not on torch or the job as a whole.
        _jobkit.log_stage(f"timing {backend}", library=backend.split("-")[0])
        with limits(backend, threads):
            op()
    order = list(ops)
    began = last_progress = time.perf_counter()
    rounds = 0
    while not stop.is_set():
        for backend in order:
            with limits(backend, threads):
                times[backend].append(_timed(ops[backend]))
            now = time.perf_counter()
            if now - last_progress >= PROGRESS_EVERY_S:
                on_partial(times)
                last_progress = now
            if stop.is_set():
                break
        rounds += 1
        order.reverse()
        enough = rounds >= MIN_REPS and time.perf_counter() - began >= s.min_seconds * len(ops)
        if enough or rounds >= MAX_REPS:
            break
    return times


def run(args: Dict[str, Any], stop: _jobkit.StopFlag) -> Dict[str, Any]:
    s = GemmSettings.from_dict(args)
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    threads = s.threads or sorted({1, len(allowed)})
    limits = ThreadLimits()
    torch_version = None
    if any(b.startswith("torch") for b in s.backends):
        torch_version = _jobkit.require("torch").__version__      # only when a torch backend is asked for
    if any(b.startswith("numpy") for b in s.backends):
        _jobkit.require("numpy")
    emulated = {b for b in s.backends if b == "torch-bf16" and s.native_bf16 is False}
    native = [b for b in s.backends if b not in emulated]
    size = s.size
    if size is None:
        size = auto_size(native[0], s.max_size, limits) if native else s.emulated_size
    sizes = {b: (min(size, s.emulated_size) if b in emulated else size) for b in s.backends}
    ops = {b: make_op(b, sizes[b]) for b in s.backends}
    torch_mod = sys.modules.get("torch") if torch_version else None
    census = _libreports.Census(torch_mod)
    for b in s.backends:
        if b.startswith("torch") and not stop.is_set():
            census.run(ops[b])                 # which kernels each torch multiply runs (also a warm-up)
    meter = _cpumeter.CpuMeter()
    points: List[Dict[str, Any]] = []
    total = len(s.backends) * len(threads)
    start = time.perf_counter()
    status = "ok"
    for t in threads:
        if stop.is_set():
            status = "cancelled"
            break

        def partial(times: Dict[str, List[float]], t: int = t) -> None:
            done = {b: round(flop(sizes[b]) / statistics.median(v) / 1e9, 2) for b, v in times.items() if v}
            _jobkit.progress(phase="partial", threads=t, step=len(points), total=total,
                             elapsed=round(time.perf_counter() - start, 3), gflops_so_far=done)

        cpu_start = meter.start()
        times = measure_group(ops, t, s, limits, stop, partial)
        interference = meter.since(cpu_start)
        for backend in s.backends:
            reps = times[backend]
            if not reps:
                continue
            lib, precision = backend.split("-")
            n = sizes[backend]
            rates = [flop(n) / x / 1e9 for x in reps]
            point = {
                "backend": backend, "library": lib, "precision": precision, "threads": t, "size": n,
                "gflops": round(statistics.median(rates), 2), "gflops_lo": round(_quantile(rates, 0.1), 2),
                "gflops_hi": round(_quantile(rates, 0.9), 2), "best_gflops": round(max(rates), 2), "reps": len(reps),
                "emulated": backend in emulated, "interference": interference,
            }
            if lib == "numpy" and not limits.numpy_limited:
                point["threads_limited"] = False     # numpy's BLAS ran with its own thread count
            points.append(point)
            _jobkit.progress(step=len(points), total=total, elapsed=round(time.perf_counter() - start, 3), **point)
        if stop.is_set():
            status = "cancelled"
            break
    roofs = measure_roofs(torch_mod, s, threads, emulated, stop, meter) if status == "ok" else []
    notes = []
    forced = os.environ.get("OPENBLAS_CORETYPE")
    blas = limits.blas_info()         # after the runs: numpy loads its BLAS only on first use
    if forced and any((b.get("internal_api") == "openblas") for b in blas or []):
        # Named on purpose: a forced kernel caps numpy's GEMM whatever the CPU could do.
        notes.append(f"OPENBLAS_CORETYPE={forced} is set: numpy's OpenBLAS uses the {forced} kernels "
                     "instead of the best ones for this CPU")
    if not limits.numpy_limited and any(b.startswith("numpy") for b in s.backends):
        notes.append("threadpoolctl is not installed in this Python, so numpy's BLAS ran with its own thread "
                     "count at every point")
    return {
        "status": status,
        "size": size,
        "sizes": sizes,
        "emulated": sorted(emulated),
        "threads": threads,
        "points": points,
        "notes": notes,
        "numpy_blas": blas,
        "roofs": roofs,
        "library_reports": census.report(blas),
        "torch": torch_version,
        "elapsed": round(time.perf_counter() - start, 3),
        "settings": s.to_dict(),
    }


# The roof that "% of roof" compares a backend with: the same precision through torch, operands in cache.
ROOF_DTYPE = {"torch-fp32": "fp32", "torch-bf16": "bf16", "numpy-fp32": "fp32", "numpy-fp64": "fp64"}


def measure_roofs(torch: Any, s: GemmSettings, threads: List[int], emulated: set, stop: _jobkit.StopFlag,
                  meter: _cpumeter.CpuMeter) -> List[Dict[str, Any]]:
    """The in-cache roof of every precision measured, at every thread count (skipped with ``roof=False``)."""
    if torch is None or not s.roof:
        return []
    dtypes = list(dict.fromkeys(ROOF_DTYPE[b] for b in s.backends if b not in emulated))
    out = []
    for t in threads:
        for dtype in dtypes:
            if stop.is_set():
                return out
            # three rungs of the roofline job's ladder keep this job's extra time to a few seconds
            sizes = [n for n in _roofs.ladder(dtype, s.cache_bytes) if n in (256, 512, 1024)] or [256]
            roof = _roofs.compute_roof(torch, dtype, t, sizes, s.roof_seconds, stop, meter)
            if roof.get("gflops"):
                out.append({k: v for k, v in roof.items() if k != "points"})
    return out


if __name__ == "__main__":
    _jobkit.exit_job(_jobkit.job_main(run))
