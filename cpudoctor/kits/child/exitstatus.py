"""Turning a child process's exit status into words a person can act on.

Child processes import torch and friends; on a CPU without the ISA a build was
made for, the import dies with SIGILL. Every runner (software probe, import
check, training lab, inspector) diagnoses deaths here so they read the same.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass
class ExitDiagnosis:
    kind: str                  # ok | illegal_instruction | out_of_memory | signal | error | timeout
    signal: int | None = None
    signal_name: str | None = None
    message: str = ""


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def diagnose_exit(
    returncode: int | None,
    *,
    timed_out: bool = False,
    stderr_tail: str = "",
    isa_hint: str = "",
    memory_hint: str = "",
    what: str = "the child process",
) -> ExitDiagnosis:
    """Explain ``returncode`` as Popen/QProcess report it (negative = killed by a signal).

    A shell reports death by signal N as 128+N; both forms are understood.
    ``isa_hint`` names what the build needs and the CPU lacks, ``memory_hint``
    the memory seen, so the message can say what to do.
    """
    if timed_out:
        return ExitDiagnosis("timeout", message=f"{what} did not finish in time and was stopped")
    if returncode is None:
        return ExitDiagnosis("error", message=f"{what} did not start")
    if returncode == 0:
        return ExitDiagnosis("ok")
    signum = -returncode if returncode < 0 else (returncode - 128 if 128 < returncode < 160 else None)
    if signum == signal.SIGILL:
        msg = f"Illegal instruction: {what} was killed by SIGILL"
        msg += f" ({isa_hint})" if isa_hint else " (the build uses an instruction this CPU does not have)"
        return ExitDiagnosis("illegal_instruction", signum, "SIGILL", msg)
    if signum == signal.SIGKILL:
        msg = f"{what} was killed (SIGKILL), most likely by the out-of-memory killer"
        if memory_hint:
            msg += f"; {memory_hint}"
        msg += "; use a smaller batch or model, or free memory"
        return ExitDiagnosis("out_of_memory", signum, "SIGKILL", msg)
    if signum is not None:
        name = signal_name(signum)
        return ExitDiagnosis("signal", signum, name, f"{what} was killed by {name}")
    tail = stderr_tail.strip().splitlines()
    last = tail[-1] if tail else ""
    return ExitDiagnosis("error", message=f"{what} failed (exit code {returncode})" + (f": {last}" if last else ""))
