"""A child's group guard: ends a job's process group should CPU Doctor end without doing it (SIGKILL, a crash).

Standalone on purpose (run by path, it imports nothing of CPU Doctor): started
beside a job that must not outlive CPU Doctor, it blocks reading its stdin, a
pipe whose other end only CPU Doctor holds. A byte on it means the job ended
and was collected: the guard exits. End of file means CPU Doctor is gone
without saying so; the guard then sends SIGTERM to the job's group, and SIGKILL
to whatever is still in it two seconds later. The parent-death signal alone
stops only the job's first process; this reaches its whole group (a shell's
children, multiprocessing's workers).

    python guard.py GROUP
"""

import os
import signal
import sys
import time

GRACE_S = 2.0


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    return True


def main(argv: list) -> int:
    if len(argv) != 2 or not argv[1].isdigit() or int(argv[1]) <= 1:
        print("usage: guard.py GROUP (a process group id)", file=sys.stderr)
        return 2
    group = int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the terminal's Ctrl-C is CPU Doctor's to forward
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        said = sys.stdin.buffer.read(1)
    except OSError:
        said = b""
    if said:
        return 0
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        return 0
    deadline = time.monotonic() + GRACE_S
    while _alive(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
