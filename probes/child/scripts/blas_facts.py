"""Child process: NumPy's SIMD features and every BLAS/OpenMP runtime loaded.

Run as ``python blas_facts.py`` (a standalone script); prints one JSON object per
line and nothing else on stdout. The pools come from the libraries' own C APIs
(:mod:`native_pools`), not threadpoolctl, which would set
``KMP_DUPLICATE_LIB_OK`` and hide duplicate OpenMP runtimes. Imported by :mod:`torch_facts` too, which
calls these functions around its own ``import torch`` so a single child tells
which thread pools numpy alone loads and which appear once torch joins (GNU
libgomp and Intel libiomp5 in one process is a finding for the advisor).
Never import this module in the app process: it imports numpy.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

if __package__:   # imported by the parent's tests as cpudoctor.probes.child.scripts.blas_facts
    from . import native_pools
else:             # a standalone script, or imported by torch_facts (python -I ignores the script's folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _prelude

    _prelude.user_import_path()    # PYTHONPATH and the user site, which -I dropped
    import native_pools


def emit(obj: dict[str, Any]) -> None:
    """One JSON line, flushed at once so it survives a later crash of this process."""
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def numpy_facts() -> dict[str, Any]:
    """numpy version, SIMD baseline, dispatched targets found / not found on this CPU."""
    start = time.perf_counter()
    import numpy  # noqa: PLC0415 - imported here on purpose: only in the child

    facts: dict[str, Any] = {"version": numpy.__version__, "import_seconds": round(time.perf_counter() - start, 4)}
    umath = None
    for mod in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # 2.x, then 1.x
        try:
            umath = __import__(mod, fromlist=["_"])
            break
        except ImportError:
            continue
    if umath is not None:
        features = getattr(umath, "__cpu_features__", {}) or {}
        dispatch = list(getattr(umath, "__cpu_dispatch__", []) or [])
        facts["simd_baseline"] = list(getattr(umath, "__cpu_baseline__", []) or [])
        facts["simd_dispatched"] = [f for f in dispatch if features.get(f)]
        facts["simd_not_found"] = [f for f in dispatch if not features.get(f)]
    return facts


def threadpool_facts() -> list[dict[str, Any]]:
    """The loaded native thread pools (BLAS and OpenMP), file names only: :func:`native_pools.native_pools`."""
    return native_pools.native_pools()


def loaded_library_names(needles: tuple[str, ...] = ("libgomp", "libiomp", "libomp", "libmkl", "openblas", "libblis", "libtbb")) -> list[str]:
    """Names of shared libraries mapped into this process that match ``needles`` (Linux /proc/self/maps)."""
    names: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                base = os.path.basename(path)
                if base and any(n in base for n in needles) and base not in names:
                    names.append(base)
    except OSError:
        pass
    return names


def main() -> int:
    try:
        emit({"numpy": numpy_facts()})
    except Exception as exc:  # noqa: BLE001 - report, do not crash
        emit({"numpy_error": f"{type(exc).__name__}: {exc}"})
    emit({"numpy_blas": threadpool_facts()})
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no finalisation: nothing to clean up, and it costs time
