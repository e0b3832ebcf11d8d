"""Reuse the probe children's results while nothing they depend on has changed.

``import torch`` costs most of a second every time, yet its answers (build
facts, whether it imports on this CPU) change only when the installation, the
CPU, the kernel or the environment change. The cache key is a SHA-256 over
exactly those: interpreter, the children's command lines and source files,
each checked package's version and files' mtimes, the CPU flags, the kernel,
the CPU affinity and the child environment (minus shell noise such as PWD).
Only the hash is stored, never the environment itself. Runs with a timeout
are never cached (a timeout is about load, not about the installation).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpudoctor import __version__
from cpudoctor.fileio import WriteError, atomic_write

if TYPE_CHECKING:     # the runner (and psutil under it) is imported by whoever runs children, not by --fast
    from cpudoctor.kits.child.runner import ChildResult, ChildSpec

FORMAT = 1
FILE_NAME = "software-children.json"
# The children's answers are a few kB; a cache file far larger is someone else's (read bounded, like the rest).
MAX_FILE_BYTES = 4 << 20
# Variables that differ between shells and terminals but cannot change what a child finds.
_VOLATILE = ("PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLORTERM", "COLUMNS", "LINES", "PS1", "PS2", "PROMPT_COMMAND",
             "DISPLAY", "WAYLAND_DISPLAY", "WINDOWID", "DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK", "SSH_CLIENT",
             "SSH_CONNECTION", "SSH_TTY", "PYTEST_CURRENT_TEST", "HISTFILE", "LS_COLORS", "LESSOPEN", "MAIL",
             "XDG_SESSION_ID", "XDG_VTNR", "TMUX", "TMUX_PANE", "STY", "GPG_TTY")
_VOLATILE_PREFIXES = ("XDG_SESSION_", "TERM_", "VSCODE_", "KONSOLE_", "GNOME_TERMINAL_")


def default_dir(environ: Mapping[str, str]) -> Path | None:
    """$CPUDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/cpudoctor, else ~/.cache/cpudoctor (one folder for every cache)."""
    from cpudoctor.kits.cachedir import cache_dir

    return cache_dir(environ)


def _stat(path: str | None) -> list[int] | None:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _module_stamp(module: str, site_dirs: Sequence[str] | None = None) -> Any:
    """mtime/size of a package's __init__ and folder, found without importing it (in ``site_dirs``
    when given: another environment's packages are not on this interpreter's path)."""
    if site_dirs is not None:
        top = module.split(".")[0]
        for d in site_dirs:
            for candidate in (Path(d) / top, Path(d) / f"{top}.py"):
                if candidate.exists():
                    init = candidate / "__init__.py" if candidate.is_dir() else candidate
                    # Not the folder's own mtime: the first import writes __pycache__ into it.
                    return [str(candidate), _stat(str(init))]
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None:
        return None
    folder = list(spec.submodule_search_locations or [])
    return [spec.origin, _stat(spec.origin), [(f, _stat(f)) for f in folder]]


def fingerprint(
    specs: Sequence[ChildSpec],
    packages: Mapping[str, tuple[str | None, str]],
    cpu_flags: Sequence[str],
    environ: Mapping[str, str],
    *,
    python: tuple[str, str | None] | None = None,
    site_dirs: Sequence[str] | None = None,
) -> str:
    """SHA-256 of everything the children's answers depend on.

    ``packages`` maps a package name to (version, module). ``python`` is the
    interpreter the children run in and its version (default: this one), and
    ``site_dirs`` where its packages live (default: this interpreter's import
    path), so two environments never share answers.
    """
    here = Path(__file__).parent
    sources = sorted((here / "scripts").glob("*.py")) + [here / "runner.py", here / "lines.py"]   # how answers are read
    env = {k: v for k, v in environ.items() if k not in _VOLATILE and not k.startswith(_VOLATILE_PREFIXES)}
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    material = {
        "format": FORMAT,
        "tool": __version__,
        "sources": [_stat(str(f)) for f in sources],
        "python": list(python) if python is not None else [sys.executable, sys.version],
        "argv": [s.argv for s in specs],
        "packages": {name: [ver, _module_stamp(mod, site_dirs)] for name, (ver, mod) in sorted(packages.items())},
        "cpu": sorted(cpu_flags),
        "kernel": os.uname().release if hasattr(os, "uname") else None,
        "affinity": affinity,
        "cpu_count": os.cpu_count(),
        "env": sorted(env.items()),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def load(folder: Path | None, key: str, specs: Sequence[ChildSpec]) -> list[ChildResult] | None:
    """Cached results for ``key``, rebuilt as ChildResults (diagnosed again, with today's hints)."""
    if folder is None:
        return None
    from cpudoctor.kits.rooted import read_bytes_checked

    try:       # a regular file, bounded: a FIFO or a link to /dev/zero there is no cache, not a hang
        saved = json.loads(read_bytes_checked(folder / FILE_NAME, MAX_FILE_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("key") != key:
        return None
    items = saved.get("results")
    if not isinstance(items, list) or len(items) != len(specs):
        return None
    from cpudoctor.kits.child.exitstatus import diagnose_exit
    from cpudoctor.kits.child.runner import ChildResult

    results: list[ChildResult] = []
    for spec, item in zip(specs, items):
        if not isinstance(item, dict) or not isinstance(item.get("data") or {}, dict) \
                or not isinstance(item.get("seconds") or 0, (int, float)) or isinstance(item.get("seconds"), bool):
            return None
        rc = item.get("returncode")
        if rc is not None and (not isinstance(rc, int) or isinstance(rc, bool)):
            return None
        res = ChildResult(what=spec.what, returncode=rc, data=dict(item.get("data") or {}),
                          stderr_tail=str(item.get("stderr_tail") or ""), seconds=float(item.get("seconds") or 0.0))
        hint = ""
        if rc in (-signal.SIGILL, 128 + signal.SIGILL):  # re-explain with today's table
            hint = spec.isa_hint() if callable(spec.isa_hint) else spec.isa_hint
        res.diagnosis = diagnose_exit(rc, stderr_tail=res.stderr_tail, isa_hint=hint, what=spec.what)
        results.append(res)
    return results


def save(folder: Path | None, key: str, results: Sequence[ChildResult]) -> bool:
    """Store ``results`` under ``key``; False (and nothing written) when any child timed out or writing failed."""
    if folder is None or any(r.timed_out for r in results):
        return False
    payload = {
        "format": FORMAT,
        "key": key,
        "results": [{"returncode": r.returncode, "data": r.data, "stderr_tail": r.stderr_tail,
                     "seconds": round(r.seconds, 4)} for r in results],
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / FILE_NAME, json.dumps(payload), regular_only=True)
    except (OSError, WriteError):
        return False
    return True
