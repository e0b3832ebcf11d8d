"""Run probe children (the standalone scripts in :mod:`cpudoctor.probes.child.scripts`) safely.

A child may hang (a deadlocked OpenMP runtime), print noise (TensorFlow's
banners) or die of SIGILL (a build that needs AVX2 on a CPU without it). The
runner bounds each with a timeout, kills its whole process group when time is
up, reads every JSON object the child printed (one per line; later lines add
to earlier ones, so facts printed before a crash survive it), and turns the
exit status into words with :func:`cpudoctor.probes.child.exitstatus.diagnose_exit`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cpudoctor.probes.child.exitstatus import ExitDiagnosis, diagnose_exit

_TAIL = 2000  # characters of stderr kept for error messages


@dataclass
class ChildSpec:
    """What to run: ``argv`` after the interpreter, a name for messages, a time limit."""

    argv: list[str]
    what: str
    timeout: float = 30.0
    isa_hint: Callable[[], str] | str = ""   # a callable is only evaluated when the child died of SIGILL
    env: dict[str, str] | None = None


@dataclass
class ChildResult:
    what: str
    returncode: int | None = None
    timed_out: bool = False
    data: dict[str, Any] = field(default_factory=dict)   # merged JSON objects from stdout
    stderr_tail: str = ""
    seconds: float = 0.0
    diagnosis: ExitDiagnosis = field(default_factory=lambda: ExitDiagnosis("error", message="not run"))

    @property
    def ok(self) -> bool:
        return self.diagnosis.kind == "ok"


def python_argv(*args: str) -> list[str]:
    """The current interpreter with ``args``; ``-X frozen_modules=on`` is the default already."""
    return [sys.executable, *args]


def script_argv(name: str, *args: str, python: str | None = None) -> list[str]:
    """Run child script ``name`` (see :mod:`cpudoctor.probes.child.scripts`) by path with ``args``."""
    from cpudoctor.probes.child.scripts import script_path

    return [python or sys.executable, str(script_path(name)), *args]


def parse_json_lines(stdout: str) -> dict[str, Any]:
    """Merge every line of ``stdout`` that is a JSON object; other lines are noise."""
    data: dict[str, Any] = {}
    for line in stdout.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            data.update(obj)
    return data


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop the child and anything it started: ask, then kill (it may ignore SIGTERM)."""
    if not hasattr(os, "killpg"):  # Windows: no process groups to signal
        proc.kill()
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:  # already gone, or not ours
            return
        try:
            proc.wait(timeout=1.0)
            return
        except subprocess.TimeoutExpired:
            continue


def run_child(spec: ChildSpec) -> ChildResult:
    """Run one child to completion or timeout; never raises for a failing child."""
    result = ChildResult(what=spec.what)
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=spec.env,
            start_new_session=True,  # its own process group, so a timeout kills grandchildren too
            text=True,
            errors="replace",
        )
    except OSError as exc:
        result.diagnosis = ExitDiagnosis("error", message=f"{spec.what} could not start: {exc.strerror or exc}")
        return result
    try:
        stdout, stderr = proc.communicate(timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        result.timed_out = True
        _kill_group(proc)
        try:
            stdout, stderr = proc.communicate(timeout=2.0)
        except (subprocess.TimeoutExpired, ValueError):
            stdout, stderr = "", ""
    result.seconds = time.perf_counter() - start
    result.returncode = proc.returncode
    result.data = parse_json_lines(stdout or "")
    result.stderr_tail = (stderr or "")[-_TAIL:]
    hint = ""
    if proc.returncode is not None and proc.returncode in (-signal.SIGILL, 128 + signal.SIGILL):
        hint = spec.isa_hint() if callable(spec.isa_hint) else spec.isa_hint
    result.diagnosis = diagnose_exit(
        proc.returncode,
        timed_out=result.timed_out,
        stderr_tail=result.stderr_tail,
        isa_hint=hint,
        what=spec.what,
    )
    if result.timed_out:
        result.diagnosis.message += f" after {spec.timeout:g} s"
    return result


def run_children(specs: Sequence[ChildSpec]) -> list[ChildResult]:
    """Run all ``specs`` at the same time; results in the same order.

    One thread per child only waits on its pipes, so a chatty child cannot
    block the others and the slowest child bounds the wall time.
    """
    if not specs:
        return []
    with ThreadPoolExecutor(max_workers=len(specs), thread_name_prefix="cpudoctor-child") as pool:
        return list(pool.map(run_child, specs))
