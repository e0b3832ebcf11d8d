"""Short programs whose output is the answer: run on the kit's runner with a deadline and bounded output.

An interpreter asked for its version, ``conda env list --json``, ``py -0p``,
``sysctl``, ``powercfg``, ``py-spy --version``: each may hang, flood its
stdout, or not exist. :func:`run_captured` runs one through
:class:`~cpudoctor.kits.child.runner.ChildProcess` (its own session, stopped in
stages at the deadline, every descendant ended) and reads at most
``max_output`` bytes of stdout (past that it is stopped: ``flood``) and the
last ``max_stderr`` bytes of stderr. :func:`run_all_captured` runs many at
once (at most :data:`MAX_PARALLEL` at a time) under **one** deadline, so twelve
that never answer cost the deadline once. Nothing raises for a child's sake.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from cpudoctor.kits.child.runner import ChildProcess
from cpudoctor.kits.child.streams import Capture

MAX_PARALLEL = 16              # children started at once (one that hangs only sleeps)
MAX_OUTPUT = 256 << 10         # stdout kept; past it the child is stopped
MAX_STDERR = 4096              # the tail of stderr kept to explain a failure
STOP_WAIT_S = 0.2              # at the deadline: SIGTERM, then SIGKILL this much later


@dataclass
class Captured:
    """How one short program ended, and what it printed."""

    status: str                 # ok (exit 0) | failed (other exit) | timeout | flood | cannot-run | not-run
    stdout: bytes = b""
    stderr: bytes = b""
    returncode: int | None = None
    seconds: float = 0.0        # how long it ran (a timeout of one that ran briefly says little about it)
    error: str = ""             # why it could not be started

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


def run_captured(argv: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None,
                 max_output: int = MAX_OUTPUT, max_stderr: int = MAX_STDERR, what: str = "the program") -> Captured:
    """Run ``argv`` for at most ``timeout`` seconds and capture what it prints (see the module docstring)."""
    if timeout <= 0:
        return Captured("not-run", error="the deadline passed before it could be started")
    out, err = Capture(max_output, over="stop"), Capture(max_stderr, over="tail")
    child = ChildProcess(list(argv), what=what, env=None if env is None else dict(env), stdout=out, stderr=err,
                         timeout=timeout, term_wait=STOP_WAIT_S)
    end = child.start().wait()
    if end.start_error:
        return Captured("cannot-run", error=end.start_reason or end.start_error, seconds=end.seconds)
    status = ("flood" if out.flooded else "timeout" if end.timed_out else
              "ok" if end.returncode == 0 else "failed")
    return Captured(status, out.bytes, err.bytes, end.returncode, end.seconds)


def run_all_captured(argvs: Sequence[Sequence[str]], deadline: float, *, env: Mapping[str, str] | None = None,
                     max_output: int = MAX_OUTPUT) -> list[Captured]:
    """Run every argv, at most :data:`MAX_PARALLEL` at a time, all ended by ``deadline`` (``time.monotonic()``
    clock); the results in the order of ``argvs``."""
    if not argvs:
        return []

    def one(argv: Sequence[str]) -> Captured:
        return run_captured(argv, deadline - time.monotonic(), env=env, max_output=max_output)

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(argvs)), thread_name_prefix="cpudoctor-ask") as pool:
        return list(pool.map(one, argvs))
