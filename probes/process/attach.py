"""Whether a sampler may attach to a process, and the facts that decide it.

Reading another process's stacks needs ptrace rights over it. The kernel refuses
when the process belongs to another user, when Yama's ``kernel.yama.ptrace_scope``
restricts tracing (1: only ancestors, 2: only with CAP_SYS_PTRACE, 3: never),
when a container runs without CAP_SYS_PTRACE, or when the process is not
dumpable. The facts are recorded (:class:`~cpudoctor.model.breakdown.StackAccess`);
the advice that follows from them (``sudo``, the container's ``--cap-add SYS_PTRACE``,
the sysctl, or ``cpudoctor run -- COMMAND``) is render's.
"""

from __future__ import annotations

import os
from pathlib import Path

from cpudoctor.kits.rooted import read_text
from cpudoctor.model.breakdown import StackAccess
from cpudoctor.probes.process import procfs

CAP_SYS_PTRACE = 19


def may_trace(pid: int) -> bool | None:
    """Whether this process may read ``pid``'s memory (the right a stack sampler needs), None when unknown.

    Opening /proc/PID/mem checks exactly the kernel's ptrace access rule (user, Yama,
    capabilities, dumpable) without attaching; py-spy itself only says "no python
    processes found" when refused while following subprocesses.
    """
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except PermissionError:
        return False
    except OSError:
        return None
    os.close(fd)
    return True


def ptrace_scope(root: Path = Path("/")) -> int | None:
    text = (read_text(procfs.under(root, "/proc/sys/kernel/yama/ptrace_scope")) or "").strip()
    return int(text) if text.isdigit() else None


def has_cap_sys_ptrace(root: Path = Path("/"), pid: int | None = None) -> bool | None:
    """Whether ``pid`` (default: this process) holds CAP_SYS_PTRACE in its effective set."""
    status = procfs.parse_status(read_text(procfs.proc_dir(root, pid or os.getpid()) / "status") or "")
    cap = status.get("CapEff")
    if cap is None:
        return None
    try:
        return bool(int(cap, 16) >> CAP_SYS_PTRACE & 1)
    except ValueError:
        return None


def process_uid(pid: int, root: Path = Path("/")) -> int | None:
    status = procfs.parse_status(read_text(procfs.proc_dir(root, pid) / "status") or "")
    return procfs.status_uid(status)


def access_facts(pid: int, root: Path = Path("/")) -> StackAccess:
    """What decides whether a sampler may attach to ``pid``: its owner, ours, Yama, CAP_SYS_PTRACE.

    Read when the sampler was refused; render says from these what to do
    (:func:`cpudoctor.render.breakdown.refusal_text`)."""
    return StackAccess(pid=pid, uid=process_uid(pid, root), own_uid=os.geteuid() if hasattr(os, "geteuid") else None,
                       ptrace_scope=ptrace_scope(root), cap_sys_ptrace=has_cap_sys_ptrace(root))
