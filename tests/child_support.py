"""Real children for the runner tests: one that forks a grandchild which leaves its session.

Import what a test module needs (``from child_support import forker, assert_gone,
no_process_left``); the ``no_process_left`` fixture is autouse where imported.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time

import psutil
import pytest

# argv[1]: what the child does once its grandchild left the session: exit | abort | segv | hang | stubborn.
# argv[2]: "typed" prints the grandchild's pid as a progress message, else as a fact.
# argv[3]: "clearenv" makes the grandchild exec a fresh interpreter with an empty environment.
FORKER = textwrap.dedent("""
    import json, os, signal, sys, time
    mode, style, env = (sys.argv[1:] + ["", "", ""])[:3]
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()                          # out of the child's session and group
        os.write(ready_w, b"x")
        if env == "clearenv":                # no token in its environment any more
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)"], {})
        time.sleep(120)
        os._exit(0)
    os.read(ready_r, 1)
    if style == "typed":
        print(json.dumps({"type": "progress", "step": 1, "grandchild": pid}), flush=True)
    else:
        print(json.dumps({"grandchild": pid}), flush=True)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if env == "clearenv":
        time.sleep(0.6)                      # long enough for the runner to have seen the grandchild
    if mode == "exit":
        sys.exit(0)
    if mode == "abort":
        os.abort()
    if mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    while True:
        time.sleep(0.05)
""")


def forker(*args: str) -> list[str]:
    return [sys.executable, "-c", FORKER, *args]


def wait_until(condition, limit: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``limit`` seconds passed (never a fixed sleep)."""
    deadline = time.monotonic() + limit
    delay = 0.005
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return True


def gone(pid: int) -> bool:
    """No such process; a zombie counts only when it is someone else's to reap (never ours)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        proc = psutil.Process(pid)
        return proc.status() == psutil.STATUS_ZOMBIE and proc.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


def assert_gone(pid: int) -> None:
    assert wait_until(lambda: gone(pid)), f"descendant {pid} outlived its job"
    with pytest.raises(ChildProcessError):   # and it is not a zombie of ours either
        os.waitpid(pid, os.WNOHANG)


@pytest.fixture(autouse=True)
def no_process_left():
    """Whatever a test does, it leaves no child of this process behind."""
    before = {p.pid for p in psutil.Process().children()}
    yield
    assert wait_until(lambda: not ({p.pid for p in psutil.Process().children()} - before))
