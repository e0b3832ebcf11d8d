"""Child process: what the installed PyTorch build is and does on this CPU.

Run as ``python torch_facts.py [--numpy] [--workload]`` (a standalone script:
standard library besides the packages under test, so it runs in any
environment); prints JSON objects, one per line, flushed as soon as known.
``--numpy`` imports numpy first, as most training scripts do; ``--workload``
runs a matmul and a convolution after the import (:mod:`workloads`), so a
kernel that dies after a clean import is caught too. Before each step the
child prints its stage (``import numpy``, ``import torch``, ``workload
torch``, ``done``): if it dies of SIGILL, the lines printed before still reach
the parent, which names the missing ISA and blames the step that was running.
The main thread's CPU affinity is recorded after each step (an OpenMP runtime
bound by ``OMP_PROC_BIND``/``GOMP_CPU_AFFINITY`` pins it at ``import torch``),
and so are the CPUs of the OpenMP threads the workload started. Never import
this module in the app process: it imports torch.
"""

from __future__ import annotations

import faulthandler
import os
import re
import sys
import time
from typing import Any

if __package__:   # imported by the parent or the tests as cpudoctor.probes.child.scripts.torch_facts
    from . import native_pools, workloads
    from .blas_facts import emit, loaded_library_names, numpy_facts, threadpool_facts
else:             # a standalone script in the environment under test (python -I ignores the script's folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _prelude

    _prelude.user_import_path()    # PYTHONPATH and the user site, which -I dropped
    import native_pools
    import workloads
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
    faulthandler.enable()   # a crash prints the Python stack to stderr: the parent reads which call died
    affinity: dict[str, Any] = {"start": native_pools.main_thread_cpus()}
    emit({"affinity": affinity})
    if "--numpy" in argv:
        emit({"stage": "import numpy"})
        try:
            emit({"numpy": numpy_facts()})
        except Exception as exc:  # noqa: BLE001
            emit({"numpy_error": f"{type(exc).__name__}: {exc}"})
        affinity["import numpy"] = native_pools.main_thread_cpus()
        emit({"numpy_blas": threadpool_facts(), "affinity": affinity})
    emit({"stage": "import torch"})
    try:
        emit({"torch": torch_facts()})
    except Exception as exc:  # noqa: BLE001 - an ImportError is a result, not a crash
        emit({"torch_error": f"{type(exc).__name__}: {exc}"})
        return 1
    affinity["import torch"] = native_pools.main_thread_cpus()
    emit({"affinity": affinity, "openmp_libs": native_pools.openmp_files(), "loaded_libs": threadpool_facts()})
    if "--workload" in argv:
        # matmul + conv: the first calls into MKL/oneDNN kernels and the OpenMP pool. The threads
        # that appear meanwhile are the OpenMP team; where they may run shows what binding did.
        emit({"stage": "workload torch"})
        before = native_pools.thread_cpus()
        try:
            emit({"workloads": {"torch": workloads.run_workload("torch")}})
        except Exception as exc:  # noqa: BLE001 - a Python error in the workload is a result
            emit({"workload_errors": {"torch": f"{type(exc).__name__}: {exc}"}})
        affinity["workload torch"] = native_pools.main_thread_cpus()
        emit({"workload_threads": {"torch": native_pools.new_threads(before, native_pools.thread_cpus())},
              "affinity": affinity})
    emit({"loaded_libs": threadpool_facts(), "mapped_libs": loaded_library_names(),
          "openmp_libs": native_pools.openmp_files(), "stage": "done"})
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: tearing down torch (thread pools, static
    # destructors, thousands of modules) takes ~0.3 s and tells us nothing.
    os._exit(code)
