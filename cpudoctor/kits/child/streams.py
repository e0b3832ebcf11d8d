"""What a child's stdout and stderr become: the readers :class:`~cpudoctor.kits.child.runner.ChildProcess` can use.

By default a child's stdout is read as the line protocol (:mod:`.lines`) and its
stderr as a bounded tail. Two other uses have readers here:

* :class:`Capture`: the bytes a short child prints (an interpreter's answer,
  ``conda env list --json``, ``py-spy --version``), up to a limit; past it the
  child is stopped (``flood``) or only the newest bytes are kept (``tail``);
* :class:`PassThrough`: a job's own output copied to a sink as it arrives (a
  progress bar's ``\\r`` included), less the lines a ``hold`` predicate picks,
  which are kept for CPU Doctor instead (``cpudoctor run``'s oneDNN and
  recompilation logs). Whatever the job prints, memory stays bounded: a line is
  decided on its first :data:`HEAD_BYTES` bytes, a held line keeps at most
  :data:`MAX_HELD_LINE` bytes and all held lines :data:`MAX_HELD_BYTES` (the
  oldest go first); the pipe is drained to its end whatever happens. When the
  sink's reader goes away (``run -- yes | head``) the pipe is closed, so the job
  gets SIGPIPE on its next write, as it would without CPU Doctor in between.

A child may also keep a stream of ours (:data:`INHERIT`): no pipe at all.
"""

from __future__ import annotations

import io
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO, Any, Final, Protocol

INHERIT: Final = "inherit"          # the child writes to our own stream: no pipe, nothing read
READ_CHUNK = 65536
HEAD_BYTES = 512                    # a line is held back or passed on from this many bytes (or its end)
MAX_HELD_LINE = 16 << 10            # bytes kept of one held line (the rest is drained, not kept)
MAX_HELD_BYTES = 32 << 20           # bytes kept of all held lines together, per stream (the oldest go first)


class Child(Protocol):
    """What a reader may do to the child it reads (a :class:`~cpudoctor.kits.child.runner.ChildProcess`)."""

    def kill(self) -> None: ...


class Reader:
    """Reads one stream of a child until its end, on a thread of the child's runner."""

    def read(self, stream: IO[bytes], child: Child) -> None:
        raise NotImplementedError


_blocked: dict[int, tuple[float, int]] = {}   # reading thread -> (when its current read began, the pipe's fd)


def waiting_since(thread_id: int | None) -> float | None:
    """When the thread ``thread_id`` began waiting for bytes that have not come (``time.monotonic``); None while it
    is busy with what it read (copying it to a slow sink), between reads, or when bytes are already waiting for it.

    The runner's drain reads it: a reader blocked with nothing to read after the child's tree is gone waits on a
    pipe some process outside the tree still holds; any other reader is still making progress.
    """
    entry = _blocked.get(thread_id) if thread_id is not None else None
    if entry is None:
        return None
    since, fd = entry
    try:
        import fcntl
        import termios

        pending = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")
    except (ImportError, OSError, ValueError):
        pending = 0
    return None if pending else since


def chunks(stream: IO[bytes]):
    """The bytes of ``stream`` as they arrive, until its end (or until it is closed under us)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):       # closed already (its reader went away)
        return
    me = threading.get_ident()
    while True:
        _blocked[me] = (time.monotonic(), fd)
        try:
            chunk = os.read(fd, READ_CHUNK)
        except (OSError, ValueError):
            return
        finally:
            _blocked.pop(me, None)
        if not chunk:
            return
        yield chunk


class Capture(Reader):
    """Everything a child prints on one stream, up to ``limit`` bytes.

    ``over="stop"``: past the limit the child is stopped at once (SIGKILL to its group) and
    :attr:`flooded` is set; ``over="tail"``: only the newest ``limit`` bytes are kept.
    """

    def __init__(self, limit: int, over: str = "stop"):
        if over not in ("stop", "tail"):
            raise ValueError(f"over is 'stop' or 'tail', not {over!r}")
        self.limit = limit
        self.over = over
        self.data = bytearray()
        self.flooded = False

    def read(self, stream: IO[bytes], child: Child) -> None:
        for chunk in chunks(stream):
            self.data += chunk
            if len(self.data) > self.limit:
                if self.over == "tail":
                    del self.data[: len(self.data) - self.limit]
                    continue
                self.flooded = True
                child.kill()
                del self.data[self.limit:]
                return

    @property
    def bytes(self) -> bytes:
        return bytes(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


Hold = Callable[[str], bool]          # the head of a line (its first HEAD_BYTES, decoded) -> keep it for us
CouldBe = Callable[[bytes], bool]     # the first bytes of a line -> it may still become one to hold


def _write_all(sink: Any, data: bytes) -> None:
    """Write all of ``data``. A raw sink (``sys.stdout.buffer`` is an unbuffered FileIO under ``python -u`` or
    ``PYTHONUNBUFFERED``, as in many training containers) may take part of it, when a signal interrupts a write
    that blocked on a full pipe, and says how much: the rest is written too. Any other sink (a buffered writer, a
    file-like object of the caller's) takes all or raises, whatever its ``write`` returns."""
    if not isinstance(sink, io.RawIOBase):
        sink.write(data)
        return
    view = memoryview(data)
    while view:
        n = sink.write(view)
        if n is None:                     # non-blocking and full: wait until it takes more
            select.select([], [sink], [], 1.0)
            continue
        view = view[n:]


def widen_pipe(stream: IO[bytes]) -> int | None:
    """Make the pipe under ``stream`` as large as the system allows a user (``/proc/sys/fs/pipe-max-size``, 1 MiB
    by default; Linux only); its new size, or None where it cannot be changed.

    A job whose pipe is full blocks in its write; ``cpudoctor run``'s stack sampler stops the job's threads many
    times a second (py-spy needs them still to unwind native frames), and a write so interrupted returns with part
    of its bytes written. Python's unbuffered stdout (``python -u``, ``PYTHONUNBUFFERED``) hands that short count
    back to the job, whose ``print`` and ``write`` do not retry: 8,192 bytes of a job's 70 kB line were lost so.
    With room for what the job writes while our reader catches up, its writes do not block, and are not cut."""
    try:
        import fcntl
    except ImportError:
        return None
    setsize = getattr(fcntl, "F_SETPIPE_SZ", 1031)
    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as fh:
            size = int(fh.read(32).strip() or 0)
    except (OSError, ValueError):
        size = 1 << 20
    size = max(1 << 16, min(size, 1 << 20))
    try:
        return fcntl.fcntl(stream.fileno(), setsize, size)
    except (OSError, ValueError):         # over the user's pipe quota, or not a pipe: the default stays
        return None


class PassThrough(Reader):
    """Copy a stream to ``sink`` as it comes, holding back the lines ``hold`` picks (see the module docstring).

    ``could_be`` says whether the first bytes of an unfinished line may still become a held one; only
    those are waited for (at most :data:`HEAD_BYTES`), everything else goes on at once. ``tap`` picks
    lines that go on to the sink *and* are kept (a warning the user must see and CPU Doctor reads too).
    ``sink`` None: the stream is drained and only held lines are kept.
    """

    def __init__(self, sink: IO[bytes] | Any | None, hold: Hold | None = None, could_be: CouldBe | None = None,
                 tap: Hold | None = None, *, max_line: int = MAX_HELD_LINE, max_bytes: int = MAX_HELD_BYTES):
        self.sink = sink
        self.hold = hold
        self.could_be = could_be if could_be is not None else (lambda head: hold is not None)
        self.tap = tap
        self.max_line = max_line
        self.max_bytes = max_bytes
        self.kept: deque[str] = deque()
        self.kept_bytes = 0
        self.dropped = 0                  # held lines forgotten to stay within max_bytes
        self.sink_gone = False            # the sink's reader went away: the job's pipe was closed
        self._lock = threading.Lock()

    # -- what the thread does

    def read(self, stream: IO[bytes], child: Child) -> None:
        head = bytearray()                # the start of the current line, not decided yet
        held: bytearray | None = None     # the current line is held back: what is kept of it
        passing = False                   # the current line goes on to the sink
        tapped: bytearray | None = None   # ... and is kept as well
        for chunk in chunks(stream):
            out = bytearray()
            i, n = 0, len(chunk)
            while i < n:
                nl = chunk.find(b"\n", i)
                end = n if nl < 0 else nl + 1
                piece, whole, i = chunk[i:end], nl >= 0, end
                if passing:
                    out += piece
                    if tapped is not None:
                        tapped += piece[: max(0, self.max_line - len(tapped))]
                    if whole:
                        if tapped is not None:
                            self._keep(tapped)
                        passing, tapped = False, None
                    continue
                if held is not None:
                    held += piece[: max(0, self.max_line - len(held))]
                    if whole:
                        self._keep(held)
                        held = None
                    continue
                head += piece
                if not whole and len(head) < HEAD_BYTES and self.could_be(bytes(head)):
                    continue                          # wait for more of this line
                text = head[:HEAD_BYTES].decode("utf-8", "replace")
                if self.hold is not None and self.hold(text):
                    held = head[: self.max_line]
                    if whole:
                        self._keep(held)
                        held = None
                else:
                    out += head
                    if self.tap is not None and self.tap(text):
                        tapped = head[: self.max_line]
                        if whole:
                            self._keep(tapped)
                            tapped = None
                    passing = not whole
                head = bytearray()
            if out and not self._write(bytes(out)):
                self._close(stream)
                return
        # the end of the stream: an unfinished line is decided as it is
        if held is not None or tapped is not None:
            self._keep(held if held is not None else tapped)
        elif head:
            if self.hold is not None and self.hold(head[:HEAD_BYTES].decode("utf-8", "replace")):
                self._keep(head[: self.max_line])
            else:
                self._write(bytes(head))

    def _write(self, data: bytes) -> bool:
        """Pass ``data`` on; False when the sink's reader is gone (a closed pipe)."""
        sink = self.sink
        if sink is None:
            return not self.sink_gone
        try:
            _write_all(sink, data)
            flush = getattr(sink, "flush", None)
            if flush is not None:
                flush()
        except (BrokenPipeError, ConnectionResetError):
            self.sink_gone = True
            return False
        except (OSError, ValueError):     # a sink that cannot take more (closed, full disk): keep draining
            self.sink = None
        return True

    def _close(self, stream: IO[bytes]) -> None:
        """The sink's reader went away: close our end, so the job's next write gets SIGPIPE (EPIPE)."""
        try:
            stream.close()
        except OSError:
            pass

    # -- what is kept

    def _keep(self, data: bytearray | bytes) -> None:
        text = bytes(data).decode("utf-8", "replace")
        with self._lock:
            self.kept.append(text)
            self.kept_bytes += len(text)
            while self.kept_bytes > self.max_bytes and len(self.kept) > 1:
                self.kept_bytes -= len(self.kept.popleft())
                self.dropped += 1

    def lines(self) -> list[str]:
        """The held (and tapped) lines kept, oldest first."""
        with self._lock:
            return list(self.kept)
