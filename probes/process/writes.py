"""Files a job holds open for writing in its own folder: does running it again touch the user's files?

``run --verify`` runs the job several times. A job that writes checkpoints or
logs would write them again each time, so it is warned about first. What is
checked, honestly and no more: the regular files the job's process and its
descendants hold open with write access (``/proc/PID/fd`` and the flags in
``/proc/PID/fdinfo``) under the job's working folder, sampled while it runs. A
file opened, written and closed between two samples (a checkpoint saved at the
end) is not seen; neither is a file outside the folder. Linux only: elsewhere
nothing is seen. Takes ``root`` like every probe.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

O_ACCMODE = 0o3
O_WRONLY, O_RDWR = 0o1, 0o2
MAX_FDS = 4096
MAX_PROCS = 64
MAX_FILES = 20


def _descendants(pid: int, root: Path) -> list[int]:
    out, todo = [], [pid]
    while todo and len(out) < MAX_PROCS:
        p = todo.pop()
        if p in out:
            continue
        out.append(p)
        task = root / "proc" / str(p) / "task"
        try:
            tids = os.listdir(task)
        except OSError:
            continue
        for tid in tids[:512]:
            try:
                todo += [int(c) for c in (task / tid / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    return out


def _writable(fdinfo: Path) -> bool:
    try:
        for line in fdinfo.read_text().splitlines()[:8]:
            if line.startswith("flags:"):
                return int(line.split()[1], 8) & O_ACCMODE in (O_WRONLY, O_RDWR)
    except (OSError, ValueError, IndexError):
        return False
    return False


def files_open_for_writing(pid: int, folder: str | Path, root: Path = Path("/"),
                           exclude: str | Path | None = None) -> list[str]:
    """Regular files under ``folder`` that ``pid`` or its descendants hold open for writing now (paths relative
    to ``folder``, at most :data:`MAX_FILES`), those under ``exclude`` left out (CPU Doctor's own: the probe's
    file); [] when nothing is seen or ``/proc`` cannot be read."""
    base = os.path.realpath(str(folder))
    skip = os.path.realpath(str(exclude)).rstrip("/") + "/" if exclude is not None else None
    found: list[str] = []
    for p in _descendants(pid, root):
        fd_dir = root / "proc" / str(p) / "fd"
        try:
            fds = os.listdir(fd_dir)[:MAX_FDS]
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if not target.startswith("/") or not (target == base or target.startswith(base.rstrip("/") + "/")):
                continue
            if skip is not None and target.startswith(skip):
                continue
            try:
                if not stat.S_ISREG(os.stat(fd_dir / fd).st_mode):
                    continue
            except OSError:
                continue
            if not _writable(root / "proc" / str(p) / "fdinfo" / fd):
                continue
            rel = os.path.relpath(target, base)
            if rel not in found:
                found.append(rel)
            if len(found) >= MAX_FILES:
                return found
    return found
