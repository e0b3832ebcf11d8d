"""Which Python environment a running process uses, read from outside (so it can be diagnosed).

"Why is my training slow?" is about the job's own environment, so the
inspector offers to diagnose it (``cpudoctor doctor --python PATH``). A venv's
interpreter is a symlink to the base Python, so ``/proc/PID/exe`` alone loses
the venv; the ladder below prefers evidence of the environment itself:

* Method 1: where its native libraries came from (``maps``): a library under
  ``<prefix>/lib/pythonX.Y/site-packages/`` names the environment torch or
  numpy was loaded from — the one that matters;
* Method 2: ``$VIRTUAL_ENV`` / ``$CONDA_PREFIX`` in its environment (an
  activated env);
* Method 3: ``argv[0]`` when it is a path (relative to the process's working
  folder), which keeps a venv's symlink;
* Method 4: ``/proc/PID/exe``, the real binary.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cpudoctor.kits.rooted import under

_SITE = re.compile(r"^(/.+?)/lib(?:64)?/python\d+\.\d+/(?:site|dist)-packages/")
_INTERPRETERS = ("bin/python3", "bin/python")


@dataclass
class ProcessPython:
    executable: str                        # as the process sees it (a path on the inspected machine)
    prefix: str | None                     # the environment folder when known
    found_by: str                          # maps | VIRTUAL_ENV | CONDA_PREFIX | argv[0] | exe


def _python_in(root: Path, prefix: str) -> str | None:
    for rel in _INTERPRETERS:
        candidate = f"{prefix.rstrip('/')}/{rel}"
        if under(root, candidate).is_file():
            return candidate
    return None


def process_python(root: Path, pid: int, *, environ: Mapping[str, str] | None, argv: Sequence[str] | None,
                   mapped: Sequence[str] = ()) -> ProcessPython | None:
    """The interpreter of Python process ``pid``, or None when nothing points to one."""
    prefixes = []
    for path in mapped:
        m = _SITE.match(path)
        if m and m.group(1) not in prefixes:
            prefixes.append(m.group(1))
    for prefix in prefixes:
        exe = _python_in(root, prefix)
        if exe:
            return ProcessPython(exe, prefix, "maps")
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = (environ or {}).get(var)
        if prefix and prefix.startswith("/"):
            exe = _python_in(root, prefix)
            if exe:
                return ProcessPython(exe, prefix, var)
    if argv:
        first = argv[0]
        if "/" in first:
            if not first.startswith("/"):
                cwd = _readlink(root, f"proc/{pid}/cwd")
                first = os.path.normpath(os.path.join(cwd, first)) if cwd else ""
            if first and _is_file(under(root, first)):
                return ProcessPython(first, _prefix_of(first), "argv[0]")
    exe = _readlink(root, f"proc/{pid}/exe")
    if exe:
        return ProcessPython(exe, _prefix_of(exe), "exe")
    return None


def _is_file(path) -> bool:
    """``path.is_file()``, False when a folder on the way may not be searched (another user's 0700 home)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _prefix_of(executable: str) -> str | None:
    parent = os.path.dirname(executable)
    return os.path.dirname(parent) if os.path.basename(parent) in ("bin", "Scripts") else None


def _readlink(root: Path, rel: str) -> str | None:
    """The text of a /proc link (where it points, as the process sees it): reading a link's text reads
    nothing behind it, so it is joined to the root plainly rather than resolved inside it."""
    try:
        target = os.readlink(Path(root) / rel)
    except OSError:
        return None
    return target.removesuffix(" (deleted)") if target.startswith("/") else None
