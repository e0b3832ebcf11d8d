"""Inference job: dynamic int8 quantisation of an MLP vs fp32.

``python -m cpudoctor.lab.quant --json-args '{"batches": [1, 64]}'`` builds an
MLP 784 -> hidden -> hidden -> 10, quantises its Linear layers to int8 with
``torch.ao.quantization.quantize_dynamic`` (weights int8, activations
quantised on the fly), and times both at each batch size. int8 GEMMs are fast
where the CPU has VNNI (AVX512_VNNI / AVX_VNNI: one instruction for a 4-way
int8 dot product); the result says whether this CPU has it.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from cpudoctor.lab import protocol
from cpudoctor.lab.settings import QuantSettings, SettingsError


def vnni_flags(root: Path = Path("/")) -> dict[str, bool | None]:
    """VNNI and AMX-INT8 as the kernel reports them (None when the flags are unknown)."""
    from cpudoctor.probes import probe_cpu

    flags = set(probe_cpu(root).flags)
    if not flags:
        # The CPU probe found nothing (non-Linux, or not available): read the flag line ourselves.
        from cpudoctor.probes._fs import read_text, under

        text = read_text(under(root, "/proc/cpuinfo")) or ""
        for line in text.splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if not flags:
        return {"avx512_vnni": None, "avx_vnni": None, "amx_int8": None}
    return {k: k in flags for k in ("avx512_vnni", "avx_vnni", "amx_int8")}


def _latency(fn, min_seconds: float, stop: protocol.StopFlag) -> list[float]:
    for _ in range(3):
        fn()
    times: list[float] = []
    t_start = time.perf_counter()
    while (len(times) < 10 or time.perf_counter() - t_start < min_seconds) and not stop.is_set():
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 5000:
            break
    return times


def run(s: QuantSettings, stop: protocol.StopFlag, root: Path = Path("/")) -> dict[str, Any]:
    import torch
    from torch import nn

    if s.threads is not None:
        torch.set_num_threads(s.threads)
    torch.manual_seed(0)
    fp32 = nn.Sequential(nn.Linear(784, s.hidden), nn.ReLU(), nn.Linear(s.hidden, s.hidden), nn.ReLU(),
                         nn.Linear(s.hidden, 10)).eval()
    try:
        from torch.ao.quantization import quantize_dynamic

        int8 = quantize_dynamic(fp32, {nn.Linear}, dtype=torch.qint8)
    except Exception as exc:  # noqa: BLE001 - removed or unsupported in this torch
        raise QuantError(f"dynamic int8 quantisation is not available in torch {torch.__version__}: {exc}") from None
    points = []
    start = time.perf_counter()
    status = "ok"
    agreement = None
    with torch.inference_mode():
        probe = torch.randn(256, 784)
        agreement = float((fp32(probe).argmax(1) == int8(probe).argmax(1)).float().mean())
        for b in s.batches:
            x = torch.randn(b, 784)
            row: dict[str, Any] = {"batch": b}
            for name, model in (("fp32", fp32), ("int8", int8)):
                if stop.is_set():
                    status = "cancelled"
                    break
                times = _latency(lambda: model(x), s.min_seconds, stop)
                if not times:
                    status = "cancelled"
                    break
                med = statistics.median(times)
                ordered = sorted(times)
                row[f"{name}_ms"] = round(med * 1000, 4)
                # The spread shows scheduler stalls (a busy machine can hold a thread for a whole time slice).
                row[f"{name}_p10_ms"] = round(ordered[len(ordered) // 10] * 1000, 4)
                row[f"{name}_p90_ms"] = round(ordered[(len(ordered) * 9) // 10] * 1000, 4)
                row[f"{name}_samples_per_s"] = round(b / med, 1)
            if status == "cancelled":
                break
            row["speedup"] = round(row["fp32_ms"] / row["int8_ms"], 3) if row.get("int8_ms") else None
            points.append(row)
            protocol.progress(step=len(points), total=len(s.batches), elapsed=round(time.perf_counter() - start, 3), **row)
    flags = vnni_flags(root)
    has_vnni = None if flags["avx512_vnni"] is None else bool(flags["avx512_vnni"] or flags["avx_vnni"])
    return {
        "status": status,
        "points": points,
        "hidden": s.hidden,
        "parameters": sum(p.numel() for p in fp32.parameters()),
        "top1_agreement": agreement,
        "vnni": has_vnni,
        "cpu_flags": flags,
        "vnni_note": _vnni_note(has_vnni, flags),
        "engine": torch.backends.quantized.engine,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "elapsed": round(time.perf_counter() - start, 3),
        "settings": s.to_dict(),
    }


def _vnni_note(has_vnni: bool | None, flags: dict[str, bool | None]) -> str:
    if has_vnni is None:
        return "VNNI unknown: the CPU flags could not be read"
    if has_vnni:
        which = [k for k in ("avx512_vnni", "avx_vnni", "amx_int8") if flags.get(k)]
        return f"this CPU has VNNI ({', '.join(which)}): int8 dot products take one instruction"
    return "this CPU has no VNNI: int8 kernels use slower multi-instruction sequences, so int8 gains less"


class QuantError(RuntimeError):
    pass


def main(argv: list[str] | None = None) -> int:
    args, stop = protocol.parse_job_argv(argv)
    root = Path(args.pop("root", "/"))
    try:
        settings = QuantSettings.from_dict(args)
    except (SettingsError, TypeError) as exc:
        protocol.error(str(exc), kind="settings")
        return 2
    warnings.filterwarnings("ignore")
    try:
        res = run(settings, stop, root)
    except QuantError as exc:
        protocol.error(str(exc), kind="unsupported")
        return 3
    protocol.result(**res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
