"""Inference job: dynamic int8 quantisation of an MLP against fp32, measured in the same job.

``python -I quant.py --json-args '{"batches": [1, 64]}'`` builds an MLP
784 -> hidden -> hidden -> 10, quantises its Linear layers to int8 (weights
int8, activations quantised on the fly) and times fp32 and int8 in
alternating chunks (ABAB...) at each batch size, so both see the same
machine. Each latency carries its spread and the share of the CPUs other
programs took meanwhile.

The quantisation API: torchao's ``quantize_`` when torchao is installed (the
maintained one), else ``torch.ao.quantization.quantize_dynamic``, which torch
marks deprecated; the result names the API used, whether torchao is installed,
and the warnings the API gave (the parent words them: :func:`lab.verdicts.quant_api`). Whether this CPU has int8 dot-product instructions
(VNNI, AMX-INT8) comes from the parent's CPU probe as ``native_int8``; without
them the MLP is measured small and the result says int8 is emulated.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Tuple

if __package__:
    from . import _cpumeter, _jobkit, _libreports
    from ._settings import QuantSettings
else:  # a standalone script: ``python -I`` leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _cpumeter
    import _jobkit
    import _libreports
    from _settings import QuantSettings

CHUNK_S = 0.05         # fp32 and int8 take turns in chunks of about this long
MIN_CALLS = 10

API_NAMES = {
    "torchao": "torchao.quantization.quantize_ (Int8DynamicActivationInt8WeightConfig)",
    "torch.ao": "torch.ao.quantization.quantize_dynamic",
    "torch.quantization": "torch.quantization.quantize_dynamic",
}


class QuantError(_jobkit.JobError):
    kind = "unsupported"
    exit_code = 3


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def choose_api(wanted: str, has_module: Callable[[str], bool] = _has_module) -> str:
    """The quantisation API to use: torchao when installed (or asked for), else the one in torch."""
    if wanted == "torchao":
        if not has_module("torchao"):
            raise QuantError("the torchao quantisation API was asked for, but torchao is not installed in this "
                             "Python (pip install torchao)")
        return "torchao"
    if wanted == "auto" and has_module("torchao"):
        return "torchao"
    return "torch.ao" if has_module("torch.ao.quantization") else "torch.quantization"


def quantize(model: Any, api: str) -> Tuple[Any, List[str]]:
    """The int8 copy of ``model`` and the warnings the API gave (its deprecation, for one)."""
    import copy

    import torch  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if api == "torchao":
                from torchao.quantization import quantize_  # noqa: PLC0415

                config = _torchao_config()
                int8 = copy.deepcopy(model)
                quantize_(int8, config)
            elif api == "torch.ao":
                from torch.ao.quantization import quantize_dynamic  # noqa: PLC0415

                int8 = quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
            else:
                from torch.quantization import quantize_dynamic  # noqa: PLC0415

                int8 = quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        except Exception as exc:  # noqa: BLE001 - removed or unsupported in this torch
            raise QuantError(f"dynamic int8 quantisation with {API_NAMES[api]} failed in torch "
                             f"{torch.__version__}: {type(exc).__name__}: {exc}") from None
    said: List[str] = []
    for w in caught:
        text = str(w.message).strip().splitlines()[0] if str(w.message).strip() else ""
        if issubclass(w.category, (DeprecationWarning, FutureWarning)) and text and text not in said:
            said.append(text)
    return int8, said


def _torchao_config() -> Any:
    """Int8 dynamic activations and int8 weights, under the name this torchao release uses."""
    import torchao.quantization as q  # noqa: PLC0415

    if hasattr(q, "Int8DynamicActivationInt8WeightConfig"):
        return q.Int8DynamicActivationInt8WeightConfig()
    return q.int8_dynamic_activation_int8_weight()     # torchao < 0.9


def _quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def interleaved_latencies(fns: Dict[str, Callable[[], Any]], min_seconds: float,
                          stop: _jobkit.StopFlag) -> Dict[str, List[float]]:
    """Per-call seconds of each function, measured in alternating chunks of about CHUNK_S."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    times: Dict[str, List[float]] = {name: [] for name in fns}
    began = time.perf_counter()
    order = list(fns)
    while not stop.is_set():
        for name in order:
            chunk_start = time.perf_counter()
            while time.perf_counter() - chunk_start < CHUNK_S and not stop.is_set():
                t0 = time.perf_counter()
                fns[name]()
                times[name].append(time.perf_counter() - t0)
        order.reverse()
        if time.perf_counter() - began >= min_seconds and all(len(v) >= MIN_CALLS for v in times.values()):
            break
        if all(len(v) >= 100_000 for v in times.values()):
            break
    return times


def run(args: Dict[str, Any], stop: _jobkit.StopFlag) -> Dict[str, Any]:
    s = QuantSettings.from_dict(args)
    torch = _jobkit.require("torch")          # only in the child
    from torch import nn  # noqa: PLC0415

    api = choose_api(s.api)

    if s.threads is not None:
        torch.set_num_threads(s.threads)
    torch.manual_seed(0)
    hidden = s.hidden_used
    fp32 = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10)).eval()
    int8, api_warnings = quantize(fp32, api)
    meter = _cpumeter.CpuMeter()
    points = []
    start = time.perf_counter()
    status = "ok"
    with torch.inference_mode():
        probe = torch.randn(256, 784)
        agreement = float((fp32(probe).argmax(1) == int8(probe).argmax(1)).float().mean())
        census = _libreports.Census(torch)          # which kernels each model runs, one call each
        census.run(lambda: (fp32(probe), int8(probe)))
        for b in s.batches:
            if stop.is_set():
                status = "cancelled"
                break
            x = torch.randn(b, 784)
            cpu_start = meter.start()
            times = interleaved_latencies({"fp32": lambda: fp32(x), "int8": lambda: int8(x)}, s.min_seconds, stop)
            interference = meter.since(cpu_start)
            if not all(times.values()):
                status = "cancelled"
                break
            row: Dict[str, Any] = {"batch": b}
            for name, values in times.items():
                med = statistics.median(values)
                row[f"{name}_ms"] = round(med * 1000, 4)
                # The spread shows scheduler stalls (a busy machine can hold a thread for a whole time slice).
                row[f"{name}_p10_ms"] = round(_quantile(values, 0.1) * 1000, 4)
                row[f"{name}_p90_ms"] = round(_quantile(values, 0.9) * 1000, 4)
                row[f"{name}_samples_per_s"] = round(b / med, 1)
                row[f"{name}_calls"] = len(values)
            row["speedup"] = round(row["fp32_ms"] / row["int8_ms"], 3)
            row["interference"] = interference
            points.append(row)
            _jobkit.progress(step=len(points), total=len(s.batches), elapsed=round(time.perf_counter() - start, 3),
                             **row)
            if stop.is_set():
                status = "cancelled"
                break
    return {
        "status": status,
        "points": points,
        "hidden": hidden,
        "emulated": s.native_int8 is False,
        "parameters": sum(p.numel() for p in fp32.parameters()),
        "top1_agreement": agreement,
        "api": api,
        "api_name": API_NAMES[api],
        "api_warnings": api_warnings,
        "torchao_installed": _has_module("torchao"),
        "engine": torch.backends.quantized.engine,
        "library_reports": dict(census.report(), quantized_engine=torch.backends.quantized.engine),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "elapsed": round(time.perf_counter() - start, 3),
        "settings": s.to_dict(),
    }


if __name__ == "__main__":
    _jobkit.exit_job(_jobkit.job_main(run))
