"""A real memory cgroup for a test job: a folder under this process's own memory cgroup, or systemd-run.

:func:`limited` makes one with a memory limit and gives the argv prefix that starts a command inside it; it
skips (saying why) where the machine allows neither: not root, no writable memory controller, no systemd.
Methods, in order: cgroup v1 (a child folder of our own ``memory`` cgroup, ``memory.limit_in_bytes``);
cgroup v2 (a child of our cgroup's parent whose ``cgroup.subtree_control`` has ``memory``, ``memory.max``);
``systemd-run --scope -p MemoryMax=`` (a machine booted with systemd).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

CG = Path("/sys/fs/cgroup")
# Started inside the cgroup: write our PID to its cgroup.procs, then become the command.
ENTER = ("import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
         "os.execvp(sys.argv[2], sys.argv[2:])")


def _own(controller: str) -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, names, path = line.split(":", 2)
        if (controller == "" and hier == "0" and names == "") or controller in names.split(","):
            return path
    return None


def _v1(limit: int, name: str) -> tuple[Path, list[str]] | None:
    own = _own("memory")
    base = CG / "memory"
    if own is None or not (base / "memory.limit_in_bytes").is_file():
        return None
    folder = base / own.strip("/") / name
    try:
        folder.mkdir()
        (folder / "memory.limit_in_bytes").write_text(str(limit))
    except OSError:
        return None
    with contextlib.suppress(OSError):
        (folder / "memory.swappiness").write_text("0")       # the limit kills, as in a container without swap
    return folder, [sys.executable, "-c", ENTER, str(folder / "cgroup.procs")]


def _v2(limit: int, name: str) -> tuple[Path, list[str]] | None:
    own = _own("")
    if own is None or not (CG / "cgroup.controllers").is_file():
        return None
    parent = (CG / own.strip("/")).parent
    try:
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            return None
        folder = parent / name
        folder.mkdir()
        (folder / "memory.max").write_text(str(limit))
        with contextlib.suppress(OSError):
            (folder / "memory.swap.max").write_text("0")
    except OSError:
        return None
    return folder, [sys.executable, "-c", ENTER, str(folder / "cgroup.procs")]


def _systemd(limit: int) -> list[str] | None:
    if shutil.which("systemd-run") is None:
        return None
    probe = subprocess.run(["systemd-run", "--scope", "--quiet", "-p", "MemoryMax=1G", "--", "true"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        return None
    return ["systemd-run", "--scope", "--quiet", "-p", f"MemoryMax={limit}", "-p", "MemorySwapMax=0", "--"]


@contextlib.contextmanager
def limited(limit: int):
    """An argv prefix that runs a command in a fresh memory cgroup limited to ``limit`` bytes."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        why = "creating a memory cgroup needs root here"
        prefix = _systemd(limit)
        if prefix is None:
            pytest.skip(why + ", and systemd-run cannot make a scope on this machine")
        yield prefix
        return
    name = f"cpudoctor-test-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    made = _v1(limit, name) or _v2(limit, name)
    if made is None:
        prefix = _systemd(limit)
        if prefix is None:
            pytest.skip("no writable memory cgroup (v1 memory controller or a v2 parent delegating memory) and no "
                        "systemd to make a scope: a memory limit cannot be set up here")
        yield prefix
        return
    folder, prefix = made
    try:
        yield prefix
    finally:
        for _ in range(50):                      # the job's processes leave the cgroup as they exit
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)
