"""The thread and allocator environment, reduced to what is safe to paste publicly.

Reports get pasted into issues and chats, so environment variables are copied
through a whitelist only: the prefixes that steer OpenMP, BLAS, oneDNN/ZenDNN
and PyTorch threading. Everything else (tokens, keys, paths, user names) is
dropped. ``LD_PRELOAD`` matters (jemalloc/tcmalloc change allocator speed a
lot) but holds paths, so only the library file names are kept.
"""

from __future__ import annotations

from collections.abc import Mapping

# Prefixes whose variables tune threads, BLAS or oneDNN. Kept short on purpose:
# adding a prefix here means its values may end up in a public report.
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

# A whitelisted prefix can still carry a secret-looking name (TORCH_HUB_TOKEN,
# a path in MKL_... ): values of such names are never copied.
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY", "AUTH")
# TORCH_HOME, TORCHINDUCTOR_CACHE_DIR, TORCH_EXTENSIONS_DIR ... hold paths that
# often contain the user's home: the value is replaced, the name stays visible.
_PATH_WORDS = ("HOME", "DIR", "PATH", "FILE", "CACHE", "ROOT")


def _is_thread_var(name: str) -> bool:
    return name in THREAD_ENV_NAMES or name.startswith(THREAD_ENV_PREFIXES)


def _safe_value(name: str, value: str) -> str | None:
    """The value as it may appear in a report, "<path>" for path-like values, None to drop."""
    upper = name.upper()
    if any(word in upper for word in _SECRET_WORDS):
        return None
    if any(word in upper for word in _PATH_WORDS) or "/" in value or "\\" in value:
        return "<path>"
    return value


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
    """The whitelisted thread/allocator variables of ``environ``, sorted by name.

    ``LD_PRELOAD`` is included reduced to library names (space-separated), so
    the result can go into a public report as is.
    """
    out: dict[str, str] = {}
    for name in sorted(environ):
        if _is_thread_var(name):
            value = _safe_value(name, str(environ[name]))
            if value is not None:
                out[name] = value
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
