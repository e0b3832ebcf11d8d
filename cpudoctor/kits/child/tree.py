"""A child's process tree: found while it runs, ended after it, so no descendant outlives its job.

Killing the child's process group is not enough: a grandchild that calls
``setsid()`` leaves the group, and one that holds the child's stdout keeps the
pipe open after the child died. Three things together find every descendant:

* **snapshots**: while the child runs, :meth:`Descendants.sample` records every
  process below it (``psutil``'s ``children(recursive=True)``) with its start
  time, so a pid reused by an unrelated process is never mistaken for one;
* **a token** in the environment (:data:`TOKEN_VARIABLE`): each run appends its
  own, every descendant inherits it, and at the end any process carrying it is
  ours, even one born and orphaned between two snapshots;
* **the subreaper** (Linux ``PR_SET_CHILD_SUBREAPER`` through ``prctl``): while
  any run is active, orphans of our descendants are re-parented to this process
  instead of init, so they stay reachable and can be reaped, leaving no zombies.

Where ``prctl`` does not exist (macOS, Windows) the orphans go to init, which
reaps them; snapshots and the token still find and end them. A descendant that
left between two snapshots *and* cleared its environment cannot be attributed
and is left alone rather than guessed at (it might be the user's program).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING


class _OnFirstUse:
    """``psutil``, imported when this module first touches it: every child-process user imports this kit, but
    a command that starts no child (``report --fast``) should not pay for psutil's import."""

    def __getattr__(self, name: str):
        import psutil as module  # noqa: PLC0415

        globals()["psutil"] = module
        return getattr(module, name)


if TYPE_CHECKING:
    import subprocess

    import psutil
else:
    psutil = _OnFirstUse()

TOKEN_VARIABLE = "CPUDOCTOR_CHILD_TOKENS"   # space-separated: nested runs (the sweep's trainings) add theirs
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


# ------------------------------------------------------------------ subreaper


class _Subreaper:
    """Process-wide PR_SET_CHILD_SUBREAPER, on while at least one run needs it.

    Turned off again after the last run so that, while no job runs, a program
    the app starts detached (a PDF viewer) is not re-parented to it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._was_set = False
        self._prctl = self._load_prctl()

    @staticmethod
    def _load_prctl():
        if not sys.platform.startswith("linux"):
            return None
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
        prctl.restype = ctypes.c_int
        return prctl

    def _get(self) -> bool:
        value = ctypes.c_int(0)
        if self._prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
            return False
        return bool(value.value)

    def acquire(self) -> bool:
        """Become a subreaper (first user); True while this process is one."""
        if self._prctl is None:
            return False
        with self._lock:
            if self._users == 0:
                self._was_set = self._get()
                if not self._was_set and self._prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                    return False
            self._users += 1
            return True

    def release(self) -> None:
        if self._prctl is None:
            return
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0 and not self._was_set:
                self._prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


SUBREAPER = _Subreaper()
_PR_SET_PDEATHSIG = 1


def before_exec(die_with_parent: bool, hook: Callable[[], None] | None = None) -> Callable[[], None] | None:
    """What a child runs between fork and exec (Popen's ``preexec_fn``), or None when nothing is needed.

    ``die_with_parent`` (Linux): SIGKILL when the thread that forks it ends, however that happens (a
    SIGKILL to CPU Doctor included); should the parent be gone before that was set, the child ends at
    once. Everything is looked up before the fork: the child only calls.
    """
    prctl = SUBREAPER._prctl if die_with_parent else None
    if prctl is None and hook is None:
        return None
    parent = os.getpid()
    kill = int(getattr(signal, "SIGKILL", signal.SIGTERM))

    def run() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)
        if hook is not None:
            hook()

    return run


def is_subreaper() -> bool:
    """Whether this process is a child subreaper now (False where the platform has none)."""
    return SUBREAPER._prctl is not None and SUBREAPER._get()


def start_group_guard(group: int) -> "subprocess.Popen | None":
    """Start :mod:`cpudoctor.kits.child.guard` for ``group``: it ends the group should this process die
    without :func:`release_group_guard` (None where it cannot start: the job runs unguarded)."""
    import subprocess

    from cpudoctor.kits.child.own import frozen, own_command

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")
    argv = own_command("cpudoctor.kits.child.guard", str(group)) if frozen() else [
        sys.executable, "-I", "-S", script, str(group)]
    try:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except (OSError, ValueError):
        return None


def release_group_guard(guard: "subprocess.Popen | None") -> None:
    """The guarded group is gone: tell the guard (one byte), and collect it."""
    if guard is None:
        return
    try:
        assert guard.stdin is not None
        guard.stdin.write(b"x")
        guard.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        guard.wait(5.0)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: a guard that hangs is killed, never waited on
        guard.kill()
        guard.wait()


# ------------------------------------------------------------------ descendants


def new_token() -> str:
    return uuid.uuid4().hex[:16]


def environment_with_token(env: dict[str, str] | None, token: str) -> dict[str, str]:
    """``env`` (or ours) with ``token`` appended to :data:`TOKEN_VARIABLE`."""
    out = dict(os.environ if env is None else env)
    tokens = out.get(TOKEN_VARIABLE, "").split()
    out[TOKEN_VARIABLE] = " ".join([*tokens, token])
    return out


@dataclass(frozen=True)
class _Seen:
    pid: int
    started: float     # psutil create_time: tells our process from a later one with the same pid


def _carries(proc: psutil.Process, token: str) -> bool:
    try:
        return token in proc.environ().get(TOKEN_VARIABLE, "").split()
    except (psutil.Error, OSError):
        return False


class Descendants:
    """Everything below one child process, tracked while it runs and ended when it is gone."""

    def __init__(self, root_pid: int, token: str, group: int | None):
        self.root_pid = root_pid
        self.token = token
        self.group = group            # the child's process group (it leads its own session), None on Windows
        self._seen: dict[int, _Seen] = {}
        self._lock = threading.Lock()
        try:
            self._root: psutil.Process | None = psutil.Process(root_pid)
        except psutil.Error:
            self._root = None

    def sample(self) -> int | None:
        """Record the current descendants; the resident memory of the child and all of them."""
        if self._root is None:
            return None
        try:
            total = self._root.memory_info().rss
            below = self._root.children(recursive=True)
        except psutil.Error:
            return None
        with self._lock:
            for proc in below:
                try:
                    self._seen.setdefault(proc.pid, _Seen(proc.pid, proc.create_time()))
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue
        return total

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's group and to every descendant seen outside it."""
        if self.group is not None and hasattr(os, "killpg"):
            try:
                os.killpg(self.group, sig)
            except OSError:   # the group is empty (everyone gone) or not ours
                pass
        for proc in self._alive_seen():
            try:
                proc.send_signal(sig)
            except psutil.Error:
                pass

    def _alive_seen(self) -> list[psutil.Process]:
        with self._lock:
            seen = list(self._seen.values())
        alive = []
        for s in seen:
            try:
                proc = psutil.Process(s.pid)
                if abs(proc.create_time() - s.started) < 0.01 and proc.pid != self.root_pid:
                    alive.append(proc)
            except psutil.Error:
                continue
        return alive

    def leftovers(self, subreaper: bool = False) -> list[psutil.Process]:
        """Descendants still there (running or zombie) after the child ended.

        As a ``subreaper`` every orphan of the child's tree was re-parented to
        this process, so looking among its own children is enough; otherwise
        the orphans went to init and every process is looked at.
        """
        found = {p.pid: p for p in self._alive_seen()}
        me = os.getpid()
        try:
            candidates = psutil.Process(me).children() if subreaper else psutil.process_iter()
        except psutil.Error:
            candidates = psutil.process_iter()
        for proc in candidates:
            if proc.pid in found or proc.pid in (me, self.root_pid):
                continue
            if _carries(proc, self.token) or self._orphan_in_group(proc, me):
                found[proc.pid] = proc
        for proc in list(found.values()):   # and whatever those started meanwhile
            try:
                for below in proc.children(recursive=True):
                    found.setdefault(below.pid, below)
            except psutil.Error:
                continue
        return list(found.values())

    def _orphan_in_group(self, proc: psutil.Process, me: int) -> bool:
        """A process re-parented to us that is still in the child's group (a zombie has no environment)."""
        if self.group is None or not hasattr(os, "getpgid"):
            return False
        try:
            return proc.ppid() == me and os.getpgid(proc.pid) == self.group
        except (psutil.Error, OSError):
            return False

    def end(self, term_wait: float, subreaper: bool = False) -> int:
        """SIGTERM the leftovers, SIGKILL whatever is still there ``term_wait`` s later, reap ours.

        Returns how many descendants had outlived the child.
        """
        left = self.leftovers(subreaper)
        if not left:
            self.signal(_SIGKILL)  # an empty group answers ESRCH; nothing else to do
            return 0
        running = [p for p in left if not _gone(p)]
        for proc in running:
            _send(proc, signal.SIGTERM)
        _wait_gone(running, term_wait)
        for proc in running:
            if not _gone(proc):
                _send(proc, _SIGKILL)
        self.signal(_SIGKILL)
        _wait_gone(left, 2.0)
        return len(left)


_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)   # Windows has no SIGKILL; psutil's kill() is its TerminateProcess


def _send(proc: psutil.Process, sig: int) -> None:
    try:
        if sig == _SIGKILL:
            proc.kill()
        else:
            proc.send_signal(sig)
    except psutil.Error:
        pass


def _reap(proc: psutil.Process) -> bool:
    """Collect a zombie the subreaper gave us; True once it is collected."""
    try:
        pid, _status = os.waitpid(proc.pid, os.WNOHANG)
    except (ChildProcessError, OSError):   # not our child after all, or already collected
        return not proc.is_running()
    return pid == proc.pid


def _gone(proc: psutil.Process) -> bool:
    """Ended: no longer exists, or a zombie (ours are reaped here, others' by their parent)."""
    try:
        if not proc.is_running():
            return True
        if proc.status() != psutil.STATUS_ZOMBIE:
            return False
        if hasattr(os, "WNOHANG") and proc.ppid() == os.getpid():   # Windows has no zombies to reap
            return _reap(proc)
        return True
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _wait_gone(procs: list[psutil.Process], limit: float) -> None:
    deadline = time.monotonic() + limit
    delay = 0.002
    while True:
        pending = [p for p in procs if not _gone(p)]
        if not pending or time.monotonic() >= deadline:
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
