"""The one child-process runner of CPU Doctor, and the probe children built on it.

Everything risky runs in a child: ``import torch`` (a build made for a newer
CPU dies of SIGILL), the training lab, the GEMM benchmark. A child may hang (a
deadlocked OpenMP runtime), print noise (TensorFlow's banners), fork helpers
that outlive it, or die of a signal. :class:`ChildProcess` runs one argv so
that none of that reaches the app:

* it starts the child in its **own session** (its own process group), with an
  optional stdin pipe for the ``stop`` command, and a token in its environment
  (:mod:`cpudoctor.kits.child.tree`);
* a reader thread parses **stdout line by line** with the one line protocol
  (:mod:`cpudoctor.kits.child.lines`) and hands each message to a callback;
  another keeps a **stderr tail**;
* a supervisor thread **waits on the process, not on its pipes** (a forked
  grandchild may hold them open long after the child died), samples the
  **peak memory** of the whole tree, enforces the **timeout**, and **stops in
  stages**: ask (``stop`` on stdin) -> wait -> SIGTERM the group -> wait ->
  SIGKILL the group;
* once the child is gone, every **descendant** still there (one that called
  ``setsid``, one that was re-parented to us) is ended and reaped, and only then
  is the end reported, so a death by signal is named as such even after a fork.

The same runner serves every other child (the house test in tests/test_one_answer.py
allows no other way): a stream may go to a reader of
:mod:`cpudoctor.kits.child.streams` instead (bytes captured up to a cap, or a
job's output passed through with some lines held back) or stay ours
(``INHERIT``); a job run for the user (``cpudoctor run``) keeps our terminal
in a process group of its own (``own_session=False``), is stopped with SIGINT
first (``interrupt``) and dies with us (``die_with_parent``: a parent-death
signal, and a guard process, :mod:`cpudoctor.kits.child.guard`, that ends its
group should we be SIGKILLed). :mod:`cpudoctor.kits.child.captured` runs short
programs whose output is the answer, many at once under one deadline.

:func:`run_child` / :func:`run_children` use it for the probe children
(:mod:`cpudoctor.probes.child.scripts`): their fact objects are merged into
:attr:`ChildResult.data` and the exit explained by
:func:`cpudoctor.kits.child.exitstatus.diagnose_exit`. The lab's
:class:`cpudoctor.lab.runner.Job` and the GUI's ``JobRunner`` use it too.
No Qt, no torch here.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from cpudoctor.kits.child import tree
from cpudoctor.kits.child.exitstatus import ExitDiagnosis, diagnose_exit
from cpudoctor.kits.child.lines import FACTS, MAX_LINE_BYTES, STOP_COMMAND, Message, merge_facts, parse_line
from cpudoctor.kits.child.streams import INHERIT, PassThrough, Reader, chunks, waiting_since, widen_pipe

ASK_WAIT_S = 0.5         # after writing "stop": time to finish the step and send a result
TERM_WAIT_S = 0.3        # after SIGTERM, before SIGKILL: a lab job's whole stop stays under a second
SAMPLE_INTERVAL_S = 0.2  # how often the process tree is listed and its memory summed
WAIT_SLICE_S = 0.2       # a waiting caller returns to Python this often, so Ctrl-C is seen while a child runs
DRAIN_S = 2.0            # after the tree is gone, how long a reader may wait on an empty pipe before it is left behind
DRAIN_MAX_S = 60.0       # ... and how long the drain may take at most, bytes or not
_STAGE_TICK = 0.05       # the supervisor looks at the stop stages at least this often
_TAIL = 2000             # characters of stderr a probe result keeps for its error message
_STDERR_LINES = 60
_MAX_STDERR_LINE = 4000
# faulthandler's report ("Fatal Python error: ...", then the stack, innermost frame first): its head is
# kept apart from the tail, whose last lines are the outermost frames and say nothing about who crashed.
_FAULT_START = "Fatal Python error:"
_FAULT_LINES = 24

MessageCallback = Callable[[Message], None]


@dataclass
class ChildEnd:
    """How a child ended: everything a caller needs to explain it."""

    returncode: int | None = None       # negative: killed by that signal (Popen's convention)
    timed_out: bool = False             # the deadline passed while it still ran, so it was stopped
    stop_requested: bool = False        # someone asked it to stop (cancel, stop, or the timeout)
    start_error: str = ""               # why it could not start ("" when it did)
    start_errno: int | None = None      # ... the OS's error number (ENOENT: no such program), when it gave one
    start_reason: str = ""              # ... the OS's words alone ("No such file or directory")
    stderr_tail: str = ""
    fault_head: str = ""                # the first lines of a faulthandler report (innermost frames first)
    seconds: float = 0.0
    peak_rss_bytes: int | None = None   # of the child and all its descendants
    leftovers: int = 0                  # descendants that outlived the child and were ended
    no_start: str = ""                  # "silent": no protocol line by the start-up deadline; "flooded": only text
    startup_timeout: float | None = None
    raw_lines: int = 0                  # plain-text lines before its first protocol line


class ChildProcess:
    """One child process, run safely (see the module docstring). Callbacks run on its threads.

    ``on_message`` gets every parsed stdout line in order; ``on_end`` gets the
    :class:`ChildEnd` once the child and all its descendants are gone and every
    message was delivered (nothing is delivered after it).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        what: str = "the child process",
        env: dict[str, str] | None = None,
        control_stdin: bool = False,
        on_message: MessageCallback | None = None,
        on_end: Callable[[ChildEnd], None] | None = None,
        timeout: float | None = None,
        ask_wait: float = ASK_WAIT_S,
        term_wait: float = TERM_WAIT_S,
        sample_interval: float = SAMPLE_INTERVAL_S,
        startup_timeout: float | None = None,
        max_raw_lines: int | None = None,
        cwd: str | None = None,
        inherit_stdin: bool = False,
        stdout: Reader | str | None = None,
        stderr: Reader | str | None = None,
        own_session: bool = True,
        interrupt: int | None = None,
        die_with_parent: bool = False,
        before_exec: Callable[[], None] | None = None,
    ):
        self.argv = list(argv)
        # How it runs: ``stdout``/``stderr`` a Reader (cpudoctor.kits.child.streams) or INHERIT (our own
        # stream, no pipe); None: stdout is read as the line protocol, stderr kept as a tail.
        # ``inherit_stdin``: our stdin (a job run for the user), else none, or the control pipe.
        # ``own_session`` False: its own process group in our session (it keeps the terminal; signals
        # from the terminal no longer reach it, so the caller forwards them: :meth:`signal`).
        # ``interrupt``: the signal the first stop stage sends the group (``cpudoctor run``: SIGINT, as
        # Ctrl-C would), ``ask_wait`` before SIGTERM. ``die_with_parent`` (Linux): the child gets SIGKILL
        # when the thread that started it ends (PR_SET_PDEATHSIG), so that thread must wait for it.
        self.cwd = cwd
        self.inherit_stdin = inherit_stdin
        self._out_reader = stdout
        self._err_reader = stderr
        self.own_session = own_session
        self.interrupt = interrupt
        self.die_with_parent = die_with_parent
        self.before_exec = before_exec
        # Start-up: a child that has not said one protocol line (typed message or facts) within
        # ``startup_timeout`` s, or printed ``max_raw_lines`` lines of plain text first, is not running
        # what we asked for (an interpreter that hangs, or floods stdout): it is stopped, ``ChildEnd.no_start``.
        self.startup_timeout = startup_timeout
        self.max_raw_lines = max_raw_lines
        self._spoke = False
        self._raw_lines = 0
        self._no_start = ""
        self.what = what
        self.env = env
        self.control_stdin = control_stdin
        self.on_message = on_message
        self.on_end = on_end
        self.timeout = timeout
        self.ask_wait = ask_wait
        self.term_wait = term_wait
        self.sample_interval = sample_interval
        self.popen: subprocess.Popen | None = None
        self.end: ChildEnd | None = None
        self._token = tree.new_token()
        self._descendants: tree.Descendants | None = None
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._fault: list[str] = []
        self._stage_lock = threading.Lock()     # the stop stages below
        self._deliver_lock = threading.Lock()   # messages one at a time, and none after the end
        self._closed = False
        self._wake = threading.Event()
        self._done = threading.Event()
        self._readers: list[threading.Thread] = []
        self._started_at = 0.0
        self._stop_requested = False
        self._term_at: float | None = None      # when to send SIGTERM to the group (monotonic)
        self._kill_at: float | None = None      # when to send SIGKILL
        self._kill_wait = term_wait             # SIGTERM -> SIGKILL for the stop in progress
        self._peak: int | None = None
        self._subreaper = False
        self._guard: subprocess.Popen | None = None

    # ------------------------------------------------------------------ control

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> "ChildProcess":
        """Start the child; never raises for a program that cannot start (see ``ChildEnd.start_error``)."""
        if self.popen is not None or self.end is not None:
            raise RuntimeError(f"{self.what} was already started")
        self._started_at = time.monotonic()
        self._subreaper = tree.SUBREAPER.acquire()
        posix = hasattr(os, "killpg")
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE if self.control_stdin else None if self.inherit_stdin else subprocess.DEVNULL,
                stdout=None if self._out_reader == INHERIT else subprocess.PIPE,
                stderr=None if self._err_reader == INHERIT else subprocess.PIPE,
                env=tree.environment_with_token(self.env, self._token),
                cwd=self.cwd,
                # its own session and group (or its own group in ours): signals reach its helpers, not us
                start_new_session=self.own_session,
                process_group=None if self.own_session or not posix else 0,
                preexec_fn=tree.before_exec(self.die_with_parent, self.before_exec),
                close_fds=True,
                # Windows: a console program started from the window opens no console of its own
                creationflags=0 if self._out_reader == INHERIT else getattr(subprocess, "CREATE_NO_WINDOW", 0),
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._release_subreaper()
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._finish(ChildEnd(start_error=f"{self.what} could not start: {reason}", start_reason=reason,
                                  start_errno=exc.errno if isinstance(exc, OSError) else None))
            return self
        group = self.popen.pid if posix else None
        self._descendants = tree.Descendants(self.popen.pid, self._token, group)
        if self.die_with_parent and group is not None:
            self._guard = tree.start_group_guard(group)
        _ACTIVE.add(self)
        for stream, reader, default in ((self.popen.stdout, self._out_reader, self._read_stdout),
                                        (self.popen.stderr, self._err_reader, self._read_stderr)):
            if stream is None:
                continue
            if isinstance(reader, Reader):
                if isinstance(reader, PassThrough):
                    widen_pipe(stream)            # a job's writes must not block (and be cut) while it is sampled
                self._spawn(self._read_with, reader, stream, reader=True)
            else:
                self._spawn(default, stream, reader=True)
        self._spawn(self._supervise)
        return self

    def _spawn(self, target: Callable[..., None], *args: Any, reader: bool = False) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name=f"cpudoctor-child-{getattr(target, '__name__', 'read')}")
        if reader:
            self._readers.append(thread)
        thread.start()

    @property
    def peak_rss_bytes(self) -> int | None:
        """The most resident memory the child and its descendants used so far (sampled)."""
        return self._peak

    def running(self) -> bool:
        """The child process itself has not ended yet."""
        return self.popen is not None and self.popen.poll() is None

    def send(self, line: str) -> bool:
        """Write one control line on the child's stdin (a serving job's ``measure`` command).

        False when there is no stdin to write to: not started with ``control_stdin``, stopping, or gone.
        """
        proc = self.popen
        if proc is None or proc.stdin is None or proc.stdin.closed or proc.poll() is not None:
            return False
        try:
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError):   # it closed stdin or ended meanwhile
            return False
        return True

    def request_stop(self) -> None:
        """Stage 1: ask the child to stop (``stop`` on stdin, then EOF); a child without stdin is not asked."""
        self._stop_requested = True
        proc = self.popen
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            proc.stdin.write(STOP_COMMAND.encode() + b"\n")
            proc.stdin.flush()
            proc.stdin.close()
        except (OSError, ValueError):   # it closed stdin or ended meanwhile
            pass

    def cancel(self, ask_wait: float | None = None, term_wait: float | None = None) -> None:
        """Stop in stages without blocking: ask, SIGTERM the group ``ask_wait`` s later, SIGKILL ``term_wait`` s after that."""
        ask = self.ask_wait if ask_wait is None else ask_wait
        term = self.term_wait if term_wait is None else term_wait
        self.request_stop()
        first = False
        with self._stage_lock:
            if self._term_at is None:
                asked = self.control_stdin or self.interrupt is not None
                self._term_at = time.monotonic() + (ask if asked else 0.0)
                self._kill_wait = term
                first = True
        if first and self.interrupt is not None:
            self.signal(self.interrupt)
        self._wake.set()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's group and every descendant seen (a forwarded Ctrl-C); nothing once it ended."""
        if self._descendants is not None and self.running():
            self._descendants.signal(sig)

    @property
    def stopping(self) -> bool:
        """The stop stages have begun (:meth:`cancel`, :meth:`kill`, or the timeout)."""
        return self._term_at is not None

    def kill(self) -> None:
        """Skip the remaining stages: SIGKILL the child's group now."""
        self._stop_requested = True
        with self._stage_lock:
            now = time.monotonic()
            self._term_at = min(self._term_at or now, now)
            self._kill_at = now
        self._wake.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the child and its descendants are gone and the end is known; False on timeout.

        In short slices, not one blocking wait: Ctrl-C that the kernel hands to one of the reader
        threads is only flagged there, and the main thread raises KeyboardInterrupt when it next runs
        Python code; blocked in one long wait, that would be when the job ends.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._done.is_set():
            left = WAIT_SLICE_S if deadline is None else min(WAIT_SLICE_S, deadline - time.monotonic())
            if left <= 0:
                return False
            self._done.wait(left)
        return True

    def wait(self, timeout: float | None = None) -> ChildEnd:
        """The end; after ``timeout`` seconds the child is stopped in stages first."""
        if self.popen is None and self.end is None:
            raise RuntimeError(f"{self.what} was not started")
        if not self.join(timeout):
            return self.stop()
        assert self.end is not None
        return self.end

    def stop(self, ask_wait: float | None = None, term_wait: float | None = None) -> ChildEnd:
        """Stop in stages and wait for the end (under a second with the lab's defaults)."""
        self.cancel(ask_wait, term_wait)
        self.join()
        assert self.end is not None
        return self.end

    # ------------------------------------------------------------------ threads

    def _supervise(self) -> None:
        proc = self.popen
        assert proc is not None and self._descendants is not None
        deadline = None if self.timeout is None else self._started_at + self.timeout
        timed_out = False
        next_sample = 0.0
        exited = _ExitWatch(proc.pid)
        tick = 0.002
        while proc.poll() is None:
            now = time.monotonic()
            if now >= next_sample:
                self._sample()
                next_sample = now + self.sample_interval
            if deadline is not None and now >= deadline and self._term_at is None and proc.poll() is None:
                timed_out = True
                self.cancel()
            if (self.startup_timeout is not None and not self._spoke and not self._no_start
                    and now >= self._started_at + self.startup_timeout and self._term_at is None):
                self._no_start = "silent"
                self.cancel()
            self._advance_stages(now)
            pause = min(_STAGE_TICK, max(0.0, next_sample - now))
            if deadline is not None and self._term_at is None:   # once stopping, the deadline is past caring
                pause = min(pause, max(0.0, deadline - now))
            if self.startup_timeout is not None and not self._spoke and self._term_at is None:
                pause = min(pause, max(0.0, self._started_at + self.startup_timeout - now))
            if not exited.wait(pause):   # no pidfd here: poll, quickly at first (most probe children are short)
                self._wake.wait(min(tick, pause))
                self._wake.clear()
                tick = min(tick * 2, _STAGE_TICK)
        exited.close()
        # The child is gone; its helpers may not be, and may still hold its pipes.
        leftovers = self._descendants.end(self.term_wait, subreaper=self._subreaper)
        tree.release_group_guard(self._guard)
        for reader in self._readers:
            _drain(reader)
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        self._release_subreaper()
        self._finish(ChildEnd(
            returncode=proc.returncode,
            timed_out=timed_out,
            stop_requested=self._stop_requested,
            stderr_tail="\n".join(self._stderr),
            fault_head="\n".join(self._fault),
            seconds=time.monotonic() - self._started_at,
            peak_rss_bytes=self._peak,
            leftovers=leftovers,
            no_start=self._no_start,
            startup_timeout=self.startup_timeout,
            raw_lines=self._raw_lines,
        ))

    def _sample(self) -> None:
        assert self._descendants is not None
        rss = self._descendants.sample()
        if rss is not None:
            self._peak = max(rss, self._peak or 0)

    def _advance_stages(self, now: float) -> None:
        assert self._descendants is not None
        with self._stage_lock:
            term_at, kill_at = self._term_at, self._kill_at
            if term_at is not None and now >= term_at and kill_at is None:
                self._kill_at = now + self._kill_wait
                send = signal.SIGTERM
            elif kill_at is not None and now >= kill_at:
                self._kill_at = float("inf")
                send = getattr(signal, "SIGKILL", signal.SIGTERM)
            else:
                return
        if self.popen is not None and self.popen.poll() is None:
            if self._descendants.group is None:   # Windows: no groups; terminate() is all there is
                self.popen.terminate()
            self._descendants.signal(send)

    def _deliver(self, msg: Message) -> None:
        with self._deliver_lock:
            if self._closed or self.on_message is None:
                return
            try:
                self.on_message(msg)
            except Exception:  # noqa: BLE001 - a display bug must not stop the reading (or the child)
                pass

    def _read_stdout(self, stream: IO[bytes]) -> None:
        for line in _lines(stream):
            msg = parse_line(line)
            if msg is None:
                continue
            if not msg.raw:
                self._spoke = True
            elif not self._spoke:
                self._raw_lines += 1
                if self.max_raw_lines is not None and self._raw_lines > self.max_raw_lines:
                    # It never spoke the protocol, so there is nothing to ask: SIGTERM now. And no more parsing:
                    # a reader parsing a flood line by line holds the GIL so tightly that the thread sending the
                    # signals crawled (a `yes` took 2 to 40 s to stop, and its count ran into the millions).
                    self._no_start = "flooded"
                    self.cancel(ask_wait=0.0)
                    break
            self._deliver(msg)
        for _chunk in chunks(stream):       # the rest of a flood, in big reads: the child never blocks on a full pipe
            pass

    def _read_with(self, reader: Reader, stream: IO[bytes]) -> None:
        try:
            reader.read(stream, self)
        except BaseException:  # noqa: BLE001 - a reader that fails (MemoryError) must not stop the draining
            pass
        for _chunk in chunks(stream):   # whatever it left unread: the child must never block on a full pipe
            pass

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for line in _lines(stream):
            text = line.decode("utf-8", "replace").rstrip()
            if text.strip():
                self._stderr.append(text[:_MAX_STDERR_LINE])
                if (self._fault or text.startswith(_FAULT_START)) and len(self._fault) < _FAULT_LINES:
                    self._fault.append(text[:_MAX_STDERR_LINE])

    def _release_subreaper(self) -> None:
        if self._subreaper:
            self._subreaper = False
            tree.SUBREAPER.release()

    def _finish(self, end: ChildEnd) -> None:
        with self._deliver_lock:
            self._closed = True
        self.end = end
        _ACTIVE.discard(self)
        try:
            if self.on_end is not None:
                self.on_end(end)
        finally:
            self._done.set()


def _drain(reader: threading.Thread) -> None:
    """Wait for a reader to reach the end of its pipe once the child's tree is gone.

    A reader still copying the job's last bytes to a slow sink, or not yet scheduled on a busy machine, is waited
    for: a job's last line must not be lost when CPU Doctor exits (`make fuzz` lost the final newline of a long
    line under load when every reader had 2 s). Only a reader blocked for :data:`DRAIN_S` on an empty pipe (held
    open by a process that left the tree) is left behind; the whole drain ends by :data:`DRAIN_MAX_S`.
    """
    start = time.monotonic()
    while reader.is_alive():
        reader.join(0.05)
        now = time.monotonic()
        since = waiting_since(reader.ident)
        if now - start > DRAIN_MAX_S or (since is not None and now - max(since, start) > DRAIN_S):
            return


class _ExitWatch:
    """Sleeps until a process exits or a time passes, on a Linux pidfd; ``wait`` is False where there is none."""

    def __init__(self, pid: int):
        self._poll: select.poll | None = None
        self._fd: int | None = None
        try:
            self._fd = os.pidfd_open(pid)   # type: ignore[attr-defined]  # Linux 5.3+, Python 3.9+
            self._poll = select.poll()
            self._poll.register(self._fd, select.POLLIN)
        except (AttributeError, OSError):   # another OS, an older kernel, or a sandbox that forbids it
            self.close()

    def wait(self, seconds: float) -> bool:
        if self._poll is None:
            return False
        self._poll.poll(max(0, int(seconds * 1000)))
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._poll = None, None


def _lines(stream: IO[bytes] | None):
    """The lines of ``stream`` until EOF; a line over MAX_LINE_BYTES is cut there, its rest dropped."""
    if stream is None:
        return
    cut = False
    try:
        while True:
            chunk = stream.readline(MAX_LINE_BYTES)
            if not chunk:
                return
            whole = chunk.endswith(b"\n")
            if not cut:
                yield chunk
            cut = not whole and len(chunk) >= MAX_LINE_BYTES
    except (OSError, ValueError):   # the pipe was closed under us
        return


_ACTIVE: "weakref.WeakSet[ChildProcess]" = weakref.WeakSet()


@atexit.register
def _kill_active_children() -> None:
    """The app is exiting: no child (or helper of one) outlives it."""
    for child in list(_ACTIVE):
        if child.running():
            child.kill()
    for child in list(_ACTIVE):
        child.join(3.0)


# ------------------------------------------------------------------ probe children


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
    data: dict[str, Any] = field(default_factory=dict)   # the child's fact objects, merged in order
    stderr_tail: str = ""
    fault_head: str = ""                # faulthandler's report, innermost frames first (see ChildEnd)
    seconds: float = 0.0
    diagnosis: ExitDiagnosis = field(default_factory=lambda: ExitDiagnosis("error", message="not run"))

    @property
    def ok(self) -> bool:
        return self.diagnosis.kind == "ok"


# How every standalone script starts in the environment under test: isolated from CPU Doctor's
# own Python settings (-I), and writing no bytecode into that environment (-B).
CHILD_FLAGS = ("-I", "-B")


def parse_json_lines(stdout: str) -> dict[str, Any]:
    """Merge the fact objects in ``stdout`` (see :func:`cpudoctor.kits.child.lines.merge_facts`)."""
    return merge_facts(stdout.splitlines())


class _ProbeChild:
    """A :class:`ChildSpec` on a :class:`ChildProcess`: facts merged, the end explained."""

    def __init__(self, spec: ChildSpec):
        self.spec = spec
        self.facts: dict[str, Any] = {}
        self.child = ChildProcess(spec.argv, what=spec.what, env=spec.env, on_message=self._collect,
                                  timeout=spec.timeout, term_wait=1.0)

    def _collect(self, msg: Message) -> None:
        if msg.type == FACTS:
            self.facts.update(msg.data)

    def result(self) -> ChildResult:
        end = self.child.wait()
        spec = self.spec
        result = ChildResult(what=spec.what, returncode=end.returncode, timed_out=end.timed_out, data=self.facts,
                             stderr_tail=end.stderr_tail[-_TAIL:], fault_head=end.fault_head, seconds=end.seconds)
        if end.start_error:
            result.diagnosis = ExitDiagnosis("error", message=end.start_error)
            return result
        hint = ""
        if end.returncode is not None and end.returncode in (-signal.SIGILL, 128 + signal.SIGILL):
            hint = spec.isa_hint() if callable(spec.isa_hint) else spec.isa_hint
        result.diagnosis = diagnose_exit(end.returncode, timed_out=end.timed_out, stderr_tail=result.stderr_tail,
                                         isa_hint=hint, what=spec.what)
        if end.timed_out:
            result.diagnosis.message += f" after {spec.timeout:g} s"
        return result


def run_child(spec: ChildSpec) -> ChildResult:
    """Run one child to completion or timeout; never raises for a failing child."""
    probe = _ProbeChild(spec)
    probe.child.start()
    return probe.result()


def run_children(specs: Sequence[ChildSpec]) -> list[ChildResult]:
    """Run all ``specs`` at the same time; results in the same order.

    Each child has its own reader and supervisor threads, so a chatty child
    cannot block the others and the slowest child bounds the wall time.
    """
    probes = [_ProbeChild(spec) for spec in specs]
    for probe in probes:
        probe.child.start()
    return [probe.result() for probe in probes]
