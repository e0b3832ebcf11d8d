"""GEMM job: ``python -m cpudoctor.lab.gemm --json-args '{"size": 4096}'``.

Times torch matmul (MKL / oneDNN) in fp32 and bf16 and numpy matmul (its BLAS)
in fp32 and fp64 at each thread count, and sets GFLOP/s against the
theoretical peak of the physical cores used (see :mod:`cpudoctor.lab.peak`).
An n x n x n GEMM is 2 n^3 floating-point operations.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from cpudoctor.lab import peak as peaklib
from cpudoctor.lab import protocol
from cpudoctor.lab.settings import GemmSettings, SettingsError


def machine(root: Path = Path("/")) -> dict[str, Any]:
    """What the peak needs: micro-architecture, brand, clocks, and which CPUs share a core."""
    from cpudoctor.probes import probe_cpu
    from cpudoctor.probes import probe_topology

    cpu = probe_cpu(root)
    topo = probe_topology(root)
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    core_of: dict[int, int] = {}
    for i, core in enumerate(topo.core_list):
        for c in core.cpus:
            core_of[c] = i
    notes = list(cpu.notes[:1]) if not cpu.microarchitecture else []
    if not core_of:
        notes.append("topology unknown: each usable CPU counted as a physical core")
        core_of = {c: c for c in allowed}
    return {
        "microarchitecture": cpu.microarchitecture,
        "brand": cpu.brand,
        "max_mhz": cpu.max_mhz,
        "base_mhz": cpu.base_mhz,
        "cpuinfo_mhz": peaklib.cpuinfo_mhz(root),
        "allowed_cpus": allowed,
        "physical_cores": len({core_of.get(c, c) for c in allowed}),
        "flags": set(cpu.flags),
        "notes": notes,
    }


def cores_for_threads(threads: int, physical_cores: int) -> int:
    """Threads beyond the physical cores run on SMT siblings and add no FMA units."""
    return max(1, min(threads, physical_cores))


def time_op(fn: Callable[[], Any], min_seconds: float, stop: protocol.StopFlag, min_reps: int = 3) -> list[float]:
    """Run ``fn`` once to warm up, then until ``min_seconds`` and ``min_reps``; per-call seconds."""
    fn()
    times: list[float] = []
    t_start = time.perf_counter()
    while (len(times) < min_reps or time.perf_counter() - t_start < min_seconds) and not stop.is_set():
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 50:
            break
    return times


def _torch_op(n: int, dtype_name: str):
    import torch

    dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(dtype)
    b = torch.randn(n, n, generator=g).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def _numpy_op(n: int, dtype_name: str):
    import numpy as np

    dtype = np.float32 if dtype_name == "fp32" else np.float64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    out = np.empty((n, n), dtype)
    return lambda: np.matmul(a, b, out=out)


def run(s: GemmSettings, stop: protocol.StopFlag, root: Path = Path("/")) -> dict[str, Any]:
    from threadpoolctl import threadpool_info, threadpool_limits

    m = machine(root)
    threads = s.threads or sorted({1, len(m["allowed_cpus"])})
    flags = m.pop("flags")
    need_torch = any(b.startswith("torch") for b in s.backends)
    torch = None
    if need_torch:
        import torch  # noqa: F811 - only when a torch backend is asked for
    points: list[dict[str, Any]] = []
    total = len(s.backends) * len(threads)
    start = time.perf_counter()
    status = "ok"
    for backend in s.backends:
        lib, prec = backend.split("-")
        # Said before the first call: a kernel that dies of SIGILL is then blamed on this library, not torch.
        protocol.log_stage(f"timing {backend}", library="torch" if lib == "torch" else "numpy")
        op = _torch_op(s.size, prec) if lib == "torch" else _numpy_op(s.size, prec)
        for t in threads:
            if stop.is_set():
                status = "cancelled"
                break
            if lib == "torch":
                torch.set_num_threads(t)
                times = time_op(op, s.min_seconds, stop)
            else:
                with threadpool_limits(limits=t, user_api="blas"):
                    times = time_op(op, s.min_seconds, stop)
            if not times:
                status = "cancelled"
                break
            flop = 2.0 * s.size ** 3
            gflops = flop / statistics.median(times) / 1e9
            best = flop / min(times) / 1e9
            cores = cores_for_threads(t, m["physical_cores"])
            pk = peaklib.peak(cores, prec, m["microarchitecture"], brand=m["brand"],
                              max_mhz=s.clock_mhz or m["max_mhz"], base_mhz=m["base_mhz"],
                              fallback_mhz=m["cpuinfo_mhz"])
            point = {
                "backend": backend, "library": lib, "precision": prec, "threads": t, "cores": cores,
                "size": s.size, "gflops": round(gflops, 2), "best_gflops": round(best, 2), "reps": len(times),
                "peak_gflops": round(pk.gflops, 1) if pk.gflops else None,
                "utilisation": round(gflops / pk.gflops, 4) if pk.gflops else None,
                "peak_basis": pk.per_cycle.basis if pk.per_cycle else None,
            }
            points.append(point)
            protocol.progress(step=len(points), total=total, elapsed=round(time.perf_counter() - start, 3), **point)
        if status == "cancelled":
            break
        del op
    # After the runs: numpy loads its BLAS only on first use.
    blas = [{k: i.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for i in threadpool_info() if i.get("user_api") == "blas"]
    notes_extra = _clock_notes(points)
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced and any(b.get("internal_api") == "openblas" for b in blas):
        # Named on purpose: a forced kernel caps numpy's GEMM whatever the CPU could do.
        notes_extra.append(f"OPENBLAS_CORETYPE={forced} is set: numpy's OpenBLAS uses the {forced} kernels "
                           "instead of the best ones for this CPU")
    pk_any = peaklib.peak(1, "fp32", m["microarchitecture"], brand=m["brand"], max_mhz=s.clock_mhz or m["max_mhz"],
                          base_mhz=m["base_mhz"], fallback_mhz=m["cpuinfo_mhz"])
    return {
        "status": status,
        "size": s.size,
        "points": points,
        "machine": {**m, "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags},
        "peak_notes": pk_any.notes + notes_extra,
        "peak_source": pk_any.per_cycle.source if pk_any.per_cycle else None,
        "fp32_flops_per_cycle": pk_any.per_cycle.flops_per_cycle if pk_any.per_cycle else None,
        "numpy_blas": blas,
        "torch": torch.__version__ if torch is not None else None,
        "elapsed": round(time.perf_counter() - start, 3),
        "settings": s.to_dict(),
    }


def _clock_notes(points: list[dict[str, Any]]) -> list[str]:
    """A point above its peak means the clock assumed is too low: say what clock it implies."""
    over = [p for p in points if p.get("utilisation") and p["utilisation"] > 1.0]
    if not over:
        return []
    worst = max(over, key=lambda p: p["utilisation"])
    return [f"{worst['backend']} at {worst['threads']} thread(s) measured {worst['utilisation']:.0%} of the computed peak: "
            f"the cores ran at least {worst['utilisation']:.2f}x the clock assumed (boost), so the percentages are upper "
            "bounds; give the real all-core clock with clock_mhz / --clock-mhz"]


def main(argv: list[str] | None = None) -> int:
    args, stop = protocol.parse_job_argv(argv)
    root = Path(args.pop("root", "/"))
    try:
        settings = GemmSettings.from_dict(args)
    except (SettingsError, TypeError) as exc:
        protocol.error(str(exc), kind="settings")
        return 2
    warnings.filterwarnings("ignore")
    try:
        res = run(settings, stop, root)
    except MemoryError:
        protocol.error(f"not enough memory for {settings.size}x{settings.size} matrices; choose a smaller size", kind="memory")
        return 1
    protocol.result(**res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
