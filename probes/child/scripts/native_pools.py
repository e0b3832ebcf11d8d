"""Native thread pools and CPU affinity of this process, from /proc and the libraries' own C APIs.

A helper of the standalone child scripts (standard library only, Python 3.8+):
it replaces threadpoolctl in the child for two reasons. threadpoolctl sets
``KMP_DUPLICATE_LIB_OK=True`` in the process that imports it, which hides the
very "OMP: Error #15" (two copies of Intel's OpenMP) the import checks look
for; and the environment under test may not have it installed. Each library
is found in ``/proc/self/maps`` (Windows: the process's module list, where the
same runtimes are ``libiomp5md.dll``, ``vcomp140.dll``, ``libomp140.x86_64.dll``)
and asked through ctypes with ``RTLD_NOLOAD``
(so nothing new is loaded): OpenBLAS ``openblas_get_num_threads`` /
``openblas_get_config`` / ``openblas_get_corename``, MKL
``MKL_Get_Max_Threads`` / ``MKL_Get_Version_String`` /
``MKL_Set_Threading_Layer(-1)`` (-1 only asks), BLIS
``bli_thread_get_num_threads``, OpenMP ``omp_get_max_threads``.

Affinity is read the same way people see it: ``os.sched_getaffinity(0)`` for
the calling (main) thread and ``Cpus_allowed_list`` of every thread in
``/proc/self/task``, so an OpenMP runtime that binds the main thread to one CPU
at ``import`` (``OMP_PROC_BIND``, ``GOMP_CPU_AFFINITY``, ``KMP_AFFINITY``)
shows up as a smaller set after the import.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from typing import Any, Dict, List, Optional

# (file-name prefix, user_api, internal_api); the first match wins, so libomp
# never matches libgomp (compared at the start of the file name).
KNOWN_LIBS = (
    ("libgomp", "openmp", "openmp"),
    ("libiomp5", "openmp", "openmp"),
    ("libomp", "openmp", "openmp"),
    ("vcomp", "openmp", "openmp"),
    ("libscipy_openblas", "blas", "openblas"),
    ("libopenblas", "blas", "openblas"),
    ("libmkl_rt", "blas", "mkl"),
    ("mkl_rt", "blas", "mkl"),                # Windows: mkl_rt.2.dll
    ("libblis", "blas", "blis"),
    ("libflexiblas", "blas", "flexiblas"),
)
OPENMP_PREFIXES = ("libgomp", "libiomp5", "libomp", "vcomp")

_MKL_LAYERS = {0: "intel", 1: "sequential", 2: "pgi", 3: "gnu", 4: "tbb", -1: "not specified"}
_OPENBLAS_PARALLEL = {0: "sequential", 1: "pthreads", 2: "openmp"}


def parse_cpulist(text: str) -> List[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``; junk gives what parsed so far."""
    cpus: List[int] = []
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            start, end = int(lo), int(hi or lo)
        except ValueError:
            break
        cpus.extend(range(start, end + 1))
    return sorted(set(cpus))


def mapped_libraries() -> List[str]:
    """Full paths of the shared objects mapped into this process, in first-mapped order (Linux, Windows)."""
    if sys.platform == "win32":
        return windows_modules()
    paths: List[str] = []
    seen = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                if path.startswith("/") and ".so" in os.path.basename(path) and path not in seen:
                    seen.add(path)
                    paths.append(path)
    except OSError:
        pass
    return paths


MAX_MODULES = 4096


def windows_modules() -> List[str]:
    """Full paths of the DLLs loaded in this process (K32EnumProcessModules, Windows 7 and later)."""
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    process = kernel32.GetCurrentProcess()
    handles = (wintypes.HMODULE * MAX_MODULES)()
    needed = wintypes.DWORD(0)
    enum = kernel32.K32EnumProcessModules
    enum.argtypes = (wintypes.HANDLE, ctypes.POINTER(wintypes.HMODULE), wintypes.DWORD, ctypes.POINTER(wintypes.DWORD))
    if not enum(process, handles, ctypes.sizeof(handles), ctypes.byref(needed)):
        return []
    name = kernel32.GetModuleFileNameW
    name.argtypes = (wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD)
    buffer = ctypes.create_unicode_buffer(32768)
    paths: List[str] = []
    for i in range(min(needed.value // ctypes.sizeof(wintypes.HMODULE), MAX_MODULES)):
        length = name(handles[i], buffer, len(buffer))
        if length and buffer.value.lower().endswith(".dll") and buffer.value not in paths:
            paths.append(buffer.value)
    return paths


def openmp_files() -> List[str]:
    """File names (never folders) of every OpenMP runtime mapped, one per distinct file.

    Windows names them in any case (``VCOMP140.DLL`` from System32), so the match ignores it.
    """
    return [os.path.basename(p) for p in mapped_libraries()
            if os.path.basename(p).lower().startswith(OPENMP_PREFIXES)]


def _classify(base: str):
    base = base.lower()
    for prefix, user_api, internal_api in KNOWN_LIBS:
        if base.startswith(prefix):
            return user_api, internal_api
    return None


def _symbol(lib, *names: str):
    for name in names:
        fn = getattr(lib, name, None)
        if fn is not None:
            return fn
    return None


def _call_int(lib, *names: str) -> Optional[int]:
    fn = _symbol(lib, *names)
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    try:
        return int(fn())
    except Exception:  # noqa: BLE001 - an odd build only means "unknown"
        return None


def _call_str(lib, *names: str) -> Optional[str]:
    fn = _symbol(lib, *names)
    if fn is None:
        return None
    fn.restype = ctypes.c_char_p
    try:
        raw = fn()
    except Exception:  # noqa: BLE001
        return None
    return raw.decode("utf-8", "replace").strip() if raw else None


def _openblas_names(stem: str) -> List[str]:
    # numpy/scipy wheels rename the symbols: scipy_openblas_get_num_threads64_
    return [f"{prefix}_{stem}{suffix}" for prefix in ("openblas", "scipy_openblas") for suffix in ("", "64_")]


def _openblas(lib, info: Dict[str, Any]) -> None:
    info["num_threads"] = _call_int(lib, *_openblas_names("get_num_threads"))
    config = _call_str(lib, *_openblas_names("get_config")) or ""
    m = re.search(r"OpenBLAS\s+([0-9][0-9.]*)", config)
    info["version"] = m.group(1).rstrip(".") if m else None
    info["architecture"] = _call_str(lib, *_openblas_names("get_corename"))
    layer = _call_int(lib, *_openblas_names("get_parallel"))
    info["threading_layer"] = _OPENBLAS_PARALLEL.get(layer) if layer is not None else None


def _mkl(lib, info: Dict[str, Any]) -> None:
    info["num_threads"] = _call_int(lib, "MKL_Get_Max_Threads")
    fn = _symbol(lib, "MKL_Get_Version_String")
    if fn is not None:
        buf = ctypes.create_string_buffer(256)
        try:
            fn(buf, ctypes.c_int(len(buf)))
            m = re.search(r"([0-9]{4}(?:\.[0-9]+)*)", buf.value.decode("utf-8", "replace"))
            info["version"] = m.group(1) if m else None
        except Exception:  # noqa: BLE001
            pass
    setter = _symbol(lib, "MKL_Set_Threading_Layer")
    if setter is not None:
        setter.restype = ctypes.c_int
        try:
            info["threading_layer"] = _MKL_LAYERS.get(int(setter(ctypes.c_int(-1))), "unknown")  # -1: ask only
        except Exception:  # noqa: BLE001
            pass


def _blis(lib, info: Dict[str, Any]) -> None:
    info["num_threads"] = _call_int(lib, "bli_thread_get_num_threads")
    info["version"] = _call_str(lib, "bli_info_get_version_str")


def _openmp(lib, info: Dict[str, Any]) -> None:
    info["num_threads"] = _call_int(lib, "omp_get_max_threads")


def native_pools() -> List[Dict[str, Any]]:
    """One record per loaded BLAS / OpenMP library file: what threadpoolctl's ``threadpool_info`` gave.

    Keys: user_api (blas | openmp), internal_api (openblas | mkl | blis |
    flexiblas | openmp), library (file name only), version, num_threads,
    threading_layer, architecture (OpenBLAS core type).
    """
    out: List[Dict[str, Any]] = []
    mode = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 0)
    for path in mapped_libraries():
        base = os.path.basename(path)
        kind = _classify(base)
        if kind is None:
            continue
        info: Dict[str, Any] = {"user_api": kind[0], "internal_api": kind[1], "library": base, "version": None,
                                "num_threads": None, "threading_layer": None, "architecture": None}
        try:
            lib = ctypes.CDLL(path, mode=mode)
        except OSError:
            out.append(info)
            continue
        reader = {"openblas": _openblas, "mkl": _mkl, "blis": _blis, "openmp": _openmp}.get(kind[1])
        if reader is not None:
            reader(lib, info)
        out.append(info)
    return out


def main_thread_cpus() -> Optional[List[int]]:
    """The CPUs the calling thread may run on (``os.sched_getaffinity(0)``); None where unsupported."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None:
        return None
    try:
        return sorted(getter(0))
    except OSError:
        return None


def thread_cpus() -> Dict[int, List[int]]:
    """Thread id -> its ``Cpus_allowed_list``, for every thread of this process (Linux)."""
    out: Dict[int, List[int]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/status", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Cpus_allowed_list:"):
                        out[int(tid)] = parse_cpulist(line.split(":", 1)[1])
                        break
        except (OSError, ValueError):
            continue
    return out


def new_threads(before: Dict[int, List[int]], after: Dict[int, List[int]]) -> Dict[str, Any]:
    """The threads that appeared between two :func:`thread_cpus` snapshots, and the CPUs they may use together.

    Run around a small parallel operation, these are the operation's worker
    threads (OpenMP team, BLAS pool): ``{"threads": 3, "cpus": [0, 1],
    "per_thread": [[0], [1], [0, 1]]}``.
    """
    fresh = [cpus for tid, cpus in sorted(after.items()) if tid not in before]
    union = sorted({c for cpus in fresh for c in cpus})
    return {"threads": len(fresh), "cpus": union, "per_thread": fresh}
