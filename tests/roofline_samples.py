"""Lab runs for roofline tests: a roofline job's result read through the parent, a GEMM run, a training run.

The roofline result is what the child sends (the shape of lab/jobs/roofline.py's
result), read by :func:`cpudoctor.lab.roofline.read_roofline` with a known
machine: a Zen 5 at 2.5 GHz (64 FLOP/cycle/core in resources/peak_flops.json),
2 physical cores, so the nominal fp32 peak on 2 cores is 320 GFLOP/s.
"""

from __future__ import annotations

from types import SimpleNamespace

from cpudoctor.lab.native import NativeSupport
from cpudoctor.lab.peak import MachinePeak
from cpudoctor.lab.results import Context, read_outcome
from cpudoctor.model import BenchRun

QUIET = {"cpus": [0, 1], "wall_s": 1.0, "other_share": 0.02, "steal_share": 0.0}
BUSY = {"cpus": [0, 1], "wall_s": 1.0, "other_share": 0.30, "steal_share": 0.01}


def peak() -> MachinePeak:
    return MachinePeak(microarchitecture="zen5", brand="AMD Ryzen 9 9950X 16-Core Processor", max_mhz=2500.0,
                       physical_cores=2)


def child_result() -> dict:
    def roof(dtype, threads, best, sizes, inter=QUIET):
        points = [{"dtype": dtype, "threads": threads, "size": n, "reps": 9, "gflops": g,
                   "median_gflops": round(g * 0.97, 2), "intensity": round(2 * n / (3 * {"fp32": 4, "bf16": 2,
                                                                                          "int8": 1}[dtype]), 2)}
                  for n, g in sizes]
        top = max(points, key=lambda p: p["gflops"])
        assert top["gflops"] == best
        return {"dtype": dtype, "threads": threads, "points": points, "interference": inter, "gflops": best,
                "median_gflops": top["median_gflops"], "size": top["size"],
                "method": f"torch matmul {dtype}, n = {top['size']} (operands in cache), best of 9 calls"}

    memory = [{"node": node, "kernel": kernel, "gbps": g, "median_gbps": g * 0.9, "cpus": [0, 1], "bytes": 1 << 28,
               "method": f"{kernel}: torch copy_ over 256 MiB fp32 buffers, 2 thread(s); the only NUMA node",
               "placement": {"0": 1.0}, "interference": BUSY}
              for node in (0, "all") for kernel, g in (("read", 41.5), ("copy", 33.0))]
    ops = [{"op": "conv2d", "dtype": "fp32", "shapes": [[64, 1, 28, 28], [32, 1, 3, 3], [32]], "calls": 2,
            "flop": 4.98e7, "bytes": 1.15e7, "seconds": 0.0028, "gflops": 17.5, "intensity": 4.34},
           {"op": "addmm", "dtype": "fp32", "shapes": [[10], [64, 5408], [5408, 10]], "calls": 2, "flop": 1.38e7,
            "bytes": 3.2e6, "seconds": 0.0005, "gflops": 26.9, "intensity": 4.32}]
    return {"status": "ok", "dtypes": ["fp32", "bf16"],
            "compute": [roof("fp32", 2, 288.0, [(256, 250.0), (512, 288.0)]),
                        roof("fp32", 1, 150.0, [(256, 150.0), (512, 141.0)]),
                        roof("bf16", 2, 610.0, [(256, 520.0), (512, 610.0)]),
                        roof("bf16", 1, 300.0, [(256, 300.0), (512, 290.0)])],
            "memory": memory, "operators": [dict(o, model="simplecnn", run_dtype="fp32") for o in ops],
            "operator_notes": [], "skipped": [], "library_reports": None}


def roofline_result():
    outcome = SimpleNamespace(status="ok", result=child_result(), progress=[], message="finished")
    ctx = Context(native=NativeSupport(True, ["AVX512_BF16"], True, ["AVX512_VNNI"]), peak=peak(),
                  started_at="2026-12-01T10:00:00+00:00")
    return read_outcome("roofline", outcome, {}, ctx)


def gemm_run() -> BenchRun:
    points = [{"backend": "torch-fp32", "precision": "fp32", "threads": t, "size": 2048, "gflops": g}
              for t, g in ((1, 131.0), (2, 255.0))]
    points.append({"backend": "numpy-fp64", "precision": "fp64", "threads": 2, "size": 2048, "gflops": 120.0})
    return BenchRun("gemm", {"size": 2048}, {"points": points}, started_at="2026-12-01T10:01:00+00:00")


def train_run() -> BenchRun:
    ops = [{"op": "conv2d", "dtype": "bf16", "shapes": [[64, 16, 28, 28], [32, 16, 3, 3]], "calls": 2,
            "flop": 4.0e8, "bytes": 4.0e6, "seconds": 0.004, "gflops": 100.0, "intensity": 100.0},
           {"op": "mm", "dtype": "bf16", "shapes": [[64, 10], [10, 5408]], "calls": 2, "flop": 1.4e7,
            "bytes": 1.6e6, "seconds": 0.0004, "gflops": 35.0, "intensity": 8.75}]
    return BenchRun("train", {"model": "lenet5", "dtype": "bf16"}, {"samples_per_s": 4000.0, "operators": ops},
                    started_at="2026-12-01T10:02:00+00:00")


def runs() -> list[BenchRun]:
    return [roofline_result().bench_run(), gemm_run(), train_run()]
