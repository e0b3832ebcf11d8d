"""Why a sampler may not attach to a process, in one line that says what to do.

Reading another process's stacks needs ptrace rights over it. The kernel refuses
when the process belongs to another user, when Yama's ``kernel.yama.ptrace_scope``
restricts tracing (1: only ancestors, 2: only with CAP_SYS_PTRACE, 3: never),
when a container runs without CAP_SYS_PTRACE, or when the process is not
dumpable. The advice follows the cause: ``sudo``, the container's
``--cap-add SYS_PTRACE``, the sysctl, or ``cpudoctor run -- COMMAND`` (which
starts the job so that it may be traced).
"""

from __future__ import annotations

import os
from pathlib import Path

from cpudoctor.kits.rooted import read_text
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


def refusal(pid: int, kind: str | None, detail: str = "", root: Path = Path("/"),
            command: str | None = None) -> str:
    """One line: why the stacks of ``pid`` could not be sampled, and what to do.

    ``kind`` is the sampler's own verdict (denied, not_python, gone, missing,
    failed); ``command`` the command line to repeat with sudo.
    """
    again = command or f"cpudoctor inspect {pid}"
    if kind == "not_python":
        return (f"process {pid} runs no Python interpreter py-spy recognises, so its stacks were not sampled "
                "(its threads' states still were)")
    if kind == "gone":
        return f"process {pid} exited before its stacks could be sampled"
    if kind == "missing":
        return detail or "py-spy is missing, so only thread states were sampled (reinstall CPU Doctor)"
    if kind != "denied":
        return f"the stack sampler failed ({detail or 'no samples'}); thread states were still sampled"
    me = os.geteuid() if hasattr(os, "geteuid") else None
    uid = process_uid(pid, root)
    scope = ptrace_scope(root)
    if me is not None and uid is not None and uid != me and me != 0:
        return (f"the stack sampler may not attach: process {pid} belongs to another user (uid {uid}); "
                f"run `sudo {again}`, or start the job with `cpudoctor run -- COMMAND`")
    if me == 0 and has_cap_sys_ptrace(root) is False:
        return ("the stack sampler may not attach: this container has no CAP_SYS_PTRACE; start it with "
                "`docker run --cap-add SYS_PTRACE` (or `securityContext.capabilities.add: [SYS_PTRACE]`), "
                "or start the job with `cpudoctor run -- COMMAND` inside it")
    if scope == 3:
        return ("the stack sampler may not attach: kernel.yama.ptrace_scope is 3 (no tracing at all until reboot); "
                "only a reboot with a lower setting allows sampling stacks")
    if scope == 2:
        return (f"the stack sampler may not attach: kernel.yama.ptrace_scope is 2 (only administrators may "
                f"trace); run `sudo {again}`")
    if scope == 1:
        return (f"the stack sampler may not attach: kernel.yama.ptrace_scope is 1 (only a parent may trace its "
                f"children); start the job with `cpudoctor run -- COMMAND`, run `sudo {again}`, or allow it "
                "with `sudo sysctl kernel.yama.ptrace_scope=0`")
    return (f"the stack sampler may not attach to process {pid} ({detail or 'permission denied'}): it may be "
            f"non-dumpable or in another container; run `sudo {again}` or start it with `cpudoctor run -- COMMAND`")
