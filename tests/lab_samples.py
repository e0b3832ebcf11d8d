"""Lab results in the shapes the real jobs write (lab/jobs/gemm.py, lab/sweep.py, lab/jobs/quant.py,
lab/jobs/train.py, through lab/results.py): for the export and PDF tests and the screenshots."""

from __future__ import annotations

from cpudoctor.model import BenchRun


def sweep_run(share: float = 0.8984) -> BenchRun:
    ladder = [("PyTorch defaults", "default", None, None, 2, 412.0), ("1 thread", "threads", 1, None, 1, 398.5),
              ("2 threads", "threads", 2, None, 2, 405.2),
              ("all cores, no SMT (CPUs 0-1)", "pinning", 2, [0, 1], 2, 409.8)]
    points = [{"variant": v, "group": g, "threads": t, "cpus": cpus, "threads_used": used, "interop_threads": 1,
               "samples_per_s": sps, "samples_per_s_lo": sps * 0.62, "samples_per_s_hi": sps * 1.41,
               "samples_per_s_n": 6, "segments": 6, "other_share": share, "status": "ok"}
              for v, g, t, cpus, used, sps in ladder]
    points[-1]["same_as"] = "2 threads"
    return BenchRun(kind="sweep", status="ok", started_at="2026-12-01T10:02:00+00:00",
                    settings={"train": {"model": "simplecnn", "batch_size": 64, "dtype": "fp32"}, "budget_s": 45.0},
                    metrics={"points": points, "verdict": "inconclusive",
                             "reason": f"inconclusive: {share:.0%} of the CPU went to other programs",
                             "rounds": 6, "budget_s": 45.0, "segment_s": 1.0, "other_share": share, "quiet": False},
                    note=f"inconclusive: {share:.0%} of the CPU went to other programs")


def gemm_run() -> BenchRun:
    points = []
    for backend, peak in (("torch-fp32", 153.6), ("torch-bf16", 153.6), ("numpy-fp32", 153.6)):
        lib, precision = backend.split("-")
        for threads in (1, 2):
            g = (61.3 if precision == "fp32" else 9.7) * threads
            points.append({"backend": backend, "library": lib, "precision": precision, "threads": threads,
                           "size": 2048 if precision == "fp32" else 512, "gflops": g, "gflops_lo": g * 0.93,
                           "gflops_hi": g * 1.02, "best_gflops": g * 1.03, "reps": 9,
                           "emulated": precision == "bf16", "other_share": 0.0312,
                           "peak_gflops": peak * threads, "utilisation": g / (peak * threads)})
    return BenchRun(kind="gemm", status="ok", started_at="2026-12-01T10:05:00+00:00", settings={"size": None},
                    metrics={"points": points, "size": 2048, "other_share": 0.0312, "quiet": True})


def quant_run(share: float = 0.84) -> BenchRun:
    points = [{"batch": 1, "fp32_ms": 0.17, "int8_ms": 72.5, "speedup": 0.0023, "fp32_p10_ms": 0.12,
               "fp32_p90_ms": 9.8, "int8_p10_ms": 0.31, "int8_p90_ms": 140.2, "other_share": share},
              {"batch": 64, "fp32_ms": 1.9, "int8_ms": 1.4, "speedup": 1.36, "fp32_p10_ms": 1.7,
               "fp32_p90_ms": 6.1, "int8_p10_ms": 1.2, "int8_p90_ms": 5.9, "other_share": share}]
    return BenchRun(kind="quant", status="ok", started_at="2026-12-01T10:07:00+00:00", settings={},
                    metrics={"points": points, "vnni": False, "api": "torch.ao.quantization.quantize_dynamic",
                             "hidden": 256, "emulated": True, "top1_agreement": 0.9844, "engine": "x86",
                             "other_share": share, "quiet": False})


def train_run() -> BenchRun:
    return BenchRun(kind="train", status="ok", started_at="2026-12-01T10:09:00+00:00",
                    settings={"model": "simplecnn", "dtype": "fp32", "batch_size": 64, "threads": 2},
                    metrics={"samples_per_s": 1183.4, "final_loss": 1.626, "train_accuracy": 0.412,
                             "initial_loss": 2.302, "eval_accuracy": 0.6328, "steps": 412, "threads": 2,
                             "elapsed": 20.1, "smoothing_steps": 20, "other_share": 0.021, "quiet": True})


def lab_runs() -> list[BenchRun]:
    return [train_run(), sweep_run(), gemm_run(), quant_run()]


def kernel_run() -> BenchRun:
    """A training run whose census saw oneDNN run AVX2 kernels on an AVX-512 CPU (capped): kernels and their check,
    as lab/results.read_kernels records them."""
    from pathlib import Path
    from types import SimpleNamespace

    from cpudoctor.lab.results import Context, read_outcome

    lines = (Path(__file__).parent / "fixtures/library_reports/zen4-kvm-onednn3.12-ONEDNN_MAX_CPU_ISA-AVX2.log"
             ).read_text().splitlines()
    reports = {"onednn": lines, "aten_capability": "AVX512", "caps": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}
    outcome = SimpleNamespace(status="ok", result={"library_reports": reports, "samples_per_s": 900.0, "steps": 50},
                              progress=[], message="")
    flags = ["avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16",
             "avx512_vnni"]
    return read_outcome("train", outcome, {"model": "simplecnn", "dtype": "fp32"}, Context(flags=flags)).bench_run()
