"""Import each installed DL package in its own child process, then run its tiny workload.

The only honest test of "will ``import tensorflow`` work here" is to try it
where a crash costs nothing: a child with a timeout. One child per package so
a SIGILL in one does not hide the others. After the import the child runs the
package's smallest real operation (a BLAS call, a matmul + conv), because a
kernel can die on its first call after a clean import; the child prints its
stage before each step, so a crash is blamed on the package (and the native
library) that was running, not on whatever else the process had imported.

Packages are also imported together, in the orders scripts do (``numpy`` then
``torch`` and the other way round): two OpenMP runtimes, or two copies of one,
only meet in one process.
"""

from __future__ import annotations

import re
from typing import Any

from cpudoctor.kits.child.runner import ChildResult, ChildSpec
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.model import ImportCheck, ImportOrderCheck

# "OMP: Error #15: Initializing libiomp5.so, but found libiomp5.so already initialized." (Intel/LLVM runtimes)
_OMP_ERROR = re.compile(r"OMP: Error #\d+:[^\n]*")


def import_spec(module: str, what: str, timeout: float, isa_hint=None, *, workload: bool = True,
                python: str | None = None) -> ChildSpec:
    """The child that imports ``module`` alone (in ``python``'s environment) and, with ``workload``, runs its workload."""
    args = (["--workload"] if workload else []) + [module]
    return ChildSpec(script_argv("import_check", *args, python=python), what=what, timeout=timeout,
                     isa_hint=isa_hint or "")


def order_spec(modules: list[str], timeout: float, isa_hint=None, *, python: str | None = None) -> ChildSpec:
    """The child that imports ``modules`` in this order in one process, then runs their workloads."""
    return ChildSpec(script_argv("import_check", "--workload", *modules, python=python),
                     what="import " + ", then ".join(modules), timeout=timeout, isa_hint=isa_hint or "")


def openmp_error(stderr: str) -> str | None:
    """The OpenMP runtime's own error line in a child's stderr ("OMP: Error #15: ..."), or None."""
    m = _OMP_ERROR.search(stderr or "")
    return m.group(0).strip() if m else None


_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')
_INSTALLED = ("site-packages", "dist-packages")


def crashed_in(fault_head: str) -> str | None:
    """The top-level module whose code ran when the child crashed: the innermost frame of faulthandler's
    report that lies in an installed package (``.../site-packages/numpy/__init__.py`` -> ``numpy``).

    ``import cv2`` that dies inside ``import numpy`` (a NumPy built for newer CPUs) names numpy, the
    package that lacks the instructions, not OpenCV. None without a report or an installed frame.
    """
    return installed_frame(fault_head)[0]


def installed_frame(fault_head: str) -> tuple[str | None, str | None]:
    """(top-level module, the site-packages folder it is installed in) of the innermost installed frame of a
    faulthandler report (:func:`crashed_in`; ``cpudoctor run``'s crashed jobs read the same)."""
    for line in (fault_head or "").splitlines():
        m = _FRAME.match(line)
        if not m or m.group("path").startswith("<"):
            continue                                  # importlib's frozen frames say nothing about whose code
        parts = re.split(r"[\\/]", m.group("path"))
        marks = [k for k, part in enumerate(parts) if part in _INSTALLED]
        if marks and marks[-1] + 1 < len(parts):
            top = parts[marks[-1] + 1].split(".")[0]  # "numpy", "six.py" -> "six", "_cffi_backend.cpython-311-..."
            if top and top.isidentifier():
                return top, "/".join(parts[: marks[-1] + 1]) or "/"
    return None, None


def _stage(data: dict[str, Any]) -> tuple[str | None, str | None]:
    """(step, module) of the child's last stage line: ("workload", "numpy") for "workload numpy"."""
    stage = data.get("stage")
    if not isinstance(stage, str):
        return None, None
    step, _, module = stage.partition(" ")
    return step, (module or None)


def workload_library(module: str, data: dict[str, Any]) -> str | None:
    """The native library ``module``'s workload ran in, from the pools the child printed before it.

    numpy and scipy compute in their BLAS (OpenBLAS names its kernels: a
    forced ``OPENBLAS_CORETYPE`` shows here); torch in libtorch_cpu (MKL,
    oneDNN) with its OpenMP pool.
    """
    pools = [p for p in data.get("pools") or [] if isinstance(p, dict)]
    if module in ("numpy", "scipy"):
        blas = [p for p in pools if p.get("user_api") == "blas"]
        parts = []
        for p in blas:
            name = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}.get(p.get("internal_api") or "", p.get("internal_api") or "BLAS")
            text = f"{name} {p['version']}" if p.get("version") else name
            text += f" ({p.get('library')}"
            text += f", {p['architecture']} kernels)" if p.get("architecture") else ")"
            parts.append(text)
        return "; ".join(parts) or None
    if module == "torch":
        return "libtorch_cpu (MKL / oneDNN kernels, OpenMP)"
    return None


def _affinity_fields(check: ImportCheck, module: str, data: dict[str, Any]) -> None:
    affinity = data.get("affinity")
    if not isinstance(affinity, dict):
        return
    start = affinity.get("start")
    check.cpus_before = list(start) if isinstance(start, list) else None
    last = None
    for key in (f"import {module}", f"workload {module}"):
        if isinstance(affinity.get(key), list):
            last = list(affinity[key])
    check.cpus_after = last
    threads = (data.get("workload_threads") or {}).get(module)
    if isinstance(threads, dict):
        check.workload_threads = threads.get("threads")
        cpus = threads.get("cpus")
        check.workload_cpus = list(cpus) if isinstance(cpus, list) and cpus else None


def to_import_check(package: str, module: str, result: ChildResult) -> ImportCheck:
    """An ImportCheck from a finished child: the import's outcome, then the workload's.

    A crash while the child's stage was ``workload MODULE`` means the import
    worked and the workload died: ``status`` stays "ok" and
    ``workload_status`` says "crashed", naming the library it ran in.
    """
    d = result.diagnosis
    data = result.data
    check = ImportCheck(package=package, module=module, seconds=round(result.seconds, 3))
    if d.signal is not None:
        check.crashed_in = crashed_in(result.fault_head)
    step, at = _stage(data)
    check.stage = data.get("stage") if isinstance(data.get("stage"), str) else None
    workloads = data.get("workloads") if isinstance(data.get("workloads"), dict) else {}
    errors = data.get("workload_errors") if isinstance(data.get("workload_errors"), dict) else {}
    imported = data.get("imported") if isinstance(data.get("imported"), dict) else {}
    _affinity_fields(check, module, data)
    import_done = module in imported or (step == "workload" and at == module) or step == "done"
    if import_done and (step == "workload" and at == module and d.kind != "ok"):
        check.status, check.message = "ok", f"import {module} works"
        check.workload_library = workload_library(module, data)
        check.workload_status = "timeout" if d.kind == "timeout" else "crashed" if d.signal is not None else "error"
        check.signal, check.signal_name = d.signal, d.signal_name
        where = f" in {check.workload_library}" if check.workload_library else ""
        if d.kind == "timeout":
            check.workload_message = f"{module}'s first computation did not finish in time{where}"
        elif d.signal is not None:
            check.workload_message = f"{module} imported, then its first computation was killed by {d.signal_name}{where}"
        else:
            check.workload_message = f"{module} imported, then its first computation failed: {d.message}"
        if isinstance(imported.get(module), (int, float)):
            check.seconds = round(float(imported[module]), 3)
        return check
    if d.kind == "ok":
        check.status = "ok"
        check.message = f"import {module} works"
        if isinstance(data.get("seconds"), (int, float)):
            check.seconds = round(float(data["seconds"]), 3)
        if module in workloads:
            check.workload, check.workload_status = str(workloads[module]), "ok"
        elif module in errors:
            check.workload_status, check.workload_message = "error", str(errors[module])
        return check
    if d.kind == "timeout":
        check.status = "timeout"
        check.message = d.message
    elif d.signal is not None:
        check.status = "crashed"
        check.signal, check.signal_name = d.signal, d.signal_name
        check.message = d.message
        omp = openmp_error(result.stderr_tail)
        if omp:
            check.message += f": {omp}"
    else:
        check.status = "error"
        err = data.get("import_error")
        check.message = f"import {module} failed: {err['error']}" if isinstance(err, dict) and err.get("error") else d.message
    return check


def to_order_check(modules: list[str], result: ChildResult) -> ImportOrderCheck:
    """An ImportOrderCheck from a child that imported ``modules`` in order (import_check or torch_facts)."""
    d = result.diagnosis
    data = result.data
    stage = data.get("stage") if isinstance(data.get("stage"), str) else None
    check = ImportOrderCheck(modules=list(modules), stage=stage)
    libs = data.get("openmp_libs")
    check.openmp_libs = [str(x) for x in libs] if isinstance(libs, list) else []
    check.openmp_error = openmp_error(result.stderr_tail)
    if d.signal is not None:
        check.crashed_in = crashed_in(result.fault_head)
    order = " then ".join(modules)
    if d.kind == "ok":
        check.status, check.message = "ok", f"import {order} works"
        return check
    where = f" at '{stage}'" if stage else ""
    if d.kind == "timeout":
        check.status, check.message = "timeout", f"import {order} did not finish in time{where}"
    elif d.signal is not None:
        check.status, check.signal_name = "crashed", d.signal_name
        check.message = f"import {order} was killed by {d.signal_name}{where}"
    else:
        check.status = "error"
        err = data.get("import_error")
        detail = err.get("error") if isinstance(err, dict) else None
        check.message = f"import {order} failed{where}: {detail or d.message}"
    if check.openmp_error:
        check.message += f" ({check.openmp_error})"
    return check
