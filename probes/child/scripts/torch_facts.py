"""Child process: what the installed PyTorch build is and does on this CPU.

Run as ``python torch_facts.py [--numpy]`` (a standalone script: standard library
besides the packages under test, so it runs in any environment); prints JSON
objects, one per line, flushed as soon as known. If ``import torch`` dies of
SIGILL, the lines printed before it (the numpy part, the "importing" stage)
still reach the parent, which names the missing ISA. Never import this module
in the app process: it imports torch.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

if __package__:   # imported by the parent or the tests as cpudoctor.probes.child.scripts.torch_facts
    from .blas_facts import emit, loaded_library_names, numpy_facts, threadpool_facts
else:             # a standalone script in the environment under test (python -I ignores the script's folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from blas_facts import emit, loaded_library_names, numpy_facts, threadpool_facts


def _call(fn, *args):
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - any missing API just means "unknown"
        return None


def parse_config(show: str | None, parallel: str | None) -> dict[str, Any]:
    """Versions and flavours from ``torch.__config__.show()`` / ``parallel_info()`` text."""
    show, parallel = show or "", parallel or ""
    out: dict[str, Any] = {}
    m = re.search(r"Math Kernel Library Version ([0-9][0-9.]*)", show)
    out["mkl_version"] = m.group(1).rstrip(".") if m else None
    m = re.search(r"(?:MKL-DNN|oneDNN)[^\n]*?v([0-9][0-9.]*)", show)
    out["mkldnn_version"] = m.group(1).rstrip(".") if m else None
    m = re.search(r"ATen parallel backend: ([^\n]+)", parallel)
    out["parallel_backend"] = m.group(1).strip() if m else None
    m = re.search(r"BLAS_INFO=([^,\s]+)", show)
    out["blas"] = m.group(1) if m else None
    m = re.search(r"^\s*-\s*((?:GCC|Clang|clang|MSVC|Apple clang)[^\n]*)$", show, re.MULTILINE)
    out["compiler"] = m.group(1).strip() if m else None
    out["openmp_spec"] = (re.search(r"^(OpenMP [^\n]+)$", parallel, re.MULTILINE) or [None])[0]
    return out


def torch_facts() -> dict[str, Any]:
    start = time.perf_counter()
    import torch  # noqa: PLC0415 - the point of this child

    facts: dict[str, Any] = {"import_seconds": round(time.perf_counter() - start, 4), "version": torch.__version__}
    cap = _call(lambda: torch.backends.cpu.get_cpu_capability())
    if cap is None:
        cap = _call(lambda: torch._C._get_cpu_capability())
    facts["cpu_capability"] = cap
    facts["mkl_available"] = _call(lambda: bool(torch.backends.mkl.is_available()))
    facts["mkldnn_available"] = _call(lambda: bool(torch.backends.mkldnn.is_available()))
    facts["intra_op_threads"] = _call(torch.get_num_threads)
    facts["inter_op_threads"] = _call(torch.get_num_interop_threads)
    bf16 = _call(lambda: bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))
    if bf16 is None:
        bf16 = _call(lambda: bool(torch.backends.mkldnn.is_bf16_supported()))
    facts["bf16_supported"] = bf16
    facts["cuda_version"] = getattr(torch.version, "cuda", None)
    facts["hip_version"] = getattr(torch.version, "hip", None)
    facts.update(parse_config(_call(torch.__config__.show), _call(torch.__config__.parallel_info)))
    return facts


def main(argv: list[str]) -> int:
    if "--numpy" in argv:
        emit({"stage": "importing numpy"})
        try:
            emit({"numpy": numpy_facts()})
        except Exception as exc:  # noqa: BLE001
            emit({"numpy_error": f"{type(exc).__name__}: {exc}"})
        emit({"numpy_blas": threadpool_facts()})
    emit({"stage": "importing torch"})
    try:
        emit({"torch": torch_facts(), "stage": "done"})
    except Exception as exc:  # noqa: BLE001 - an ImportError is a result, not a crash
        emit({"torch_error": f"{type(exc).__name__}: {exc}"})
        return 1
    emit({"loaded_libs": threadpool_facts(), "mapped_libs": loaded_library_names()})
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: tearing down torch (thread pools, static
    # destructors, thousands of modules) takes ~0.3 s and tells us nothing.
    os._exit(code)
