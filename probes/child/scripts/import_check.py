"""Child script: import modules in a given order, run each one's tiny workload, say what happened.

``python import_check.py [--workload] MODULE [MODULE ...]`` imports the
modules in that order (the order user scripts do: ``numpy`` then ``torch``,
or the other way round) and, with ``--workload``, runs each module's smallest
real operation (:mod:`workloads`) after its import. It prints JSON lines:

* ``{"stage": "import numpy"}`` before each step (``"workload numpy"``,
  ``"done"``), so the parent knows where a crash (SIGILL in a kernel, "OMP:
  Error #15" abort) happened and blames the package that was running;
* ``{"imported": {"numpy": 0.12}}`` import seconds, ``{"workloads": {...}}``
  what ran;
* ``{"affinity": {"start": [0, 1], "import numpy": [0, 1], ...}}`` the main
  thread's CPUs after each step: an OpenMP runtime that binds the main thread
  at load time shows up here;
* ``{"workload_threads": {"numpy": {"threads": 1, "cpus": [0, 1]}}}`` the
  threads each workload started and the CPUs they may use;
* ``{"openmp_libs": [...], "pools": [...]}`` the OpenMP runtimes mapped and the
  native pools (:mod:`native_pools`), also printed before each workload so a
  crash keeps them;
* ``{"seconds": ...}`` the first module's import time (what older parents read).

Standard library only besides the modules under test; never import
threadpoolctl here (it sets ``KMP_DUPLICATE_LIB_OK``, which hides Error #15).
``os._exit`` skips interpreter teardown, which for torch-sized packages costs
more than the import and says nothing about whether it works.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
import time
import traceback
from typing import Any, Dict, List

if __package__:   # imported by the tests as cpudoctor.probes.child.scripts.import_check
    from . import native_pools, workloads
else:             # a standalone script (python -I ignores the script's folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _prelude

    _prelude.user_import_path()    # PYTHONPATH and the user site, which -I dropped
    import native_pools
    import workloads


def emit(obj: Dict[str, Any]) -> None:
    """One JSON line, flushed at once so it survives a later crash of this process."""
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def run(modules: List[str], workload: bool) -> int:
    affinity: Dict[str, Any] = {"start": native_pools.main_thread_cpus()}
    imported: Dict[str, float] = {}
    ran: Dict[str, str] = {}
    threads: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    emit({"modules": modules, "affinity": affinity})
    for module in modules:
        emit({"stage": f"import {module}"})
        start = time.perf_counter()
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - an ImportError is a result: say which module, then fail
            emit({"import_error": {"module": module, "error": f"{type(exc).__name__}: {exc}"}})
            traceback.print_exc()
            return 1
        imported[module] = round(time.perf_counter() - start, 4)
        affinity[f"import {module}"] = native_pools.main_thread_cpus()
        emit({"imported": imported, "affinity": affinity, "openmp_libs": native_pools.openmp_files()})
        if len(imported) == 1:
            emit({"seconds": imported[module]})
    if workload:
        for module in modules:
            if not workloads.has_workload(module):
                continue
            emit({"pools": native_pools.native_pools(), "stage": f"workload {module}"})
            before = native_pools.thread_cpus()
            try:
                ran[module] = workloads.run_workload(module)
            except Exception as exc:  # noqa: BLE001 - a Python error in the workload is a result, not a crash
                errors[module] = f"{type(exc).__name__}: {exc}"
                emit({"workload_errors": errors})
                continue
            threads[module] = native_pools.new_threads(before, native_pools.thread_cpus())
            affinity[f"workload {module}"] = native_pools.main_thread_cpus()
            emit({"workloads": ran, "workload_threads": threads, "affinity": affinity})
    emit({"openmp_libs": native_pools.openmp_files(), "pools": native_pools.native_pools(), "stage": "done"})
    return 0


def main(argv: List[str]) -> int:
    faulthandler.enable()   # a SIGSEGV/SIGILL prints the Python stack to stderr: the parent reads it
    workload = "--workload" in argv
    modules = [a for a in argv if not a.startswith("--")]
    if not modules:
        sys.stderr.write("usage: import_check.py [--workload] MODULE [MODULE ...]\n")
        return 2
    return run(modules, workload)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
