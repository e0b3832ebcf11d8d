"""The thread and allocator environment, reduced to what is safe to paste publicly.

Reports get pasted into issues and chats, so environment variables are shown
by allow-list, never by guessing which ones look secret:

* only names under the prefixes that steer OpenMP, BLAS, oneDNN/ZenDNN and
  PyTorch threading are listed at all (everything else is dropped);
* of those, the variables in ``resources/shown_settings.json`` keep their value
  when it has the shape listed there (``OMP_NUM_THREADS=8``,
  ``KMP_AFFINITY=granularity=fine,compact``); any other value, and any other
  variable, is shown as ``set``: a token in ``TORCH_HUB_TOKEN`` or a licence
  blob in some ``MKL_*`` variable never reaches a report.

``LD_PRELOAD`` matters (jemalloc/tcmalloc change allocator speed a lot) but
holds paths, so only the library file names are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

# Prefixes whose variables tune threads, BLAS or oneDNN: their names are shown. Kept short
# on purpose; which ones also show their value is decided by resources/shown_settings.json.
THREAD_ENV_PREFIXES: tuple[str, ...] = (
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "GOTO_",
    "KMP_",
    "GOMP_",
    "DNNL_",
    "ONEDNN_",
    "ZENDNN_",
    "TORCH_",
)
THREAD_ENV_NAMES: frozenset[str] = frozenset({"ATEN_CPU_CAPABILITY"})
# What a variable whose value is not shown says instead.
HIDDEN = "set"
_MAX_VALUE = 400


@lru_cache(maxsize=1)
def shown_settings() -> dict:
    """resources/shown_settings.json with its shapes compiled: {"environment": {name: regex}, ...}."""
    from cpudoctor.knowledge import SHOWN_SETTINGS

    data = SHOWN_SETTINGS.data
    shapes = {name: re.compile(rx) for name, rx in data["shapes"].items()}
    cmd = data["command_line"]
    return {
        "environment": {name: shapes[shape] for name, shape in data["environment"].items()},
        "value_shape": re.compile(cmd["value_shape"]),
        "flags": frozenset(cmd["flags"]),
        "script_suffixes": tuple(cmd["script_suffixes"]),
        "python_code": tuple(re.compile(rx) for rx in cmd["python_code"]),
    }


def _is_thread_var(name: str) -> bool:
    return name in THREAD_ENV_NAMES or name.startswith(THREAD_ENV_PREFIXES)


def shown_value(name: str, value: str) -> str:
    """``value`` when ``name`` is a known variable and the value has its shape, else ``"set"``."""
    shape = shown_settings()["environment"].get(name)
    value = str(value).strip()
    if shape is not None and len(value) <= _MAX_VALUE and shape.fullmatch(value):
        return value
    return HIDDEN


def preload_names(value: str | None) -> list[str]:
    """Library file names in an ``LD_PRELOAD`` value, never a directory.

    ``"/home/x/lib/libjemalloc.so.2 libiomp5.so"`` -> ``["libjemalloc.so.2", "libiomp5.so"]``.
    ld.so accepts spaces and colons as separators; empty entries are skipped.
    """
    if not value:
        return []
    names: list[str] = []
    for entry in value.replace(":", " ").split():
        name = entry.replace("\\", "/").rsplit("/", 1)[-1]
        if name and name not in names:
            names.append(name)
    return names


def filter_thread_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The thread/allocator variables of ``environ`` as they may be shown, sorted by name.

    Known variables with a sane value keep it, the others say ``"set"``;
    ``LD_PRELOAD`` is included reduced to library names (space-separated), so
    the result can go into a public report as is.
    """
    out: dict[str, str] = {}
    for name in sorted(environ):
        if _is_thread_var(name):
            out[name] = shown_value(name, environ[name])
    names = preload_names(environ.get("LD_PRELOAD"))
    if names:
        out["LD_PRELOAD"] = " ".join(names)
    return out


def allocator_names(preload: list[str]) -> list[str]:
    """Short allocator names (jemalloc, tcmalloc, mimalloc) found among preloaded libraries."""
    found: list[str] = []
    for lib in preload:
        low = lib.lower()
        for alloc in ("jemalloc", "tcmalloc", "mimalloc"):
            if alloc in low and alloc not in found:
                found.append(alloc)
    return found
