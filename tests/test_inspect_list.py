"""`inspect --list` shows what one would inspect: Python processes and busy ones; `--all` the rest.

Issue 26: `inspect --list` printed 70+ processes, most of them idle daemons.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.conftest import run_cli, wait_for


def _pids(text: str) -> set[int]:
    return {int(ln.split()[0]) for ln in text.splitlines()[1:] if ln.split() and ln.split()[0].isdigit()}


@pytest.mark.hardware
@pytest.mark.skipif(shutil.which("sleep") is None or sys.platform != "linux", reason="needs Linux /proc and sleep")
def test_python_and_busy_first_idle_others_on_request(capsys):
    """Real processes: an idle Python one, a busy shell loop and an idle `sleep`, started detached (the listing
    leaves out what CPU Doctor itself started, as it should)."""
    idle_python = _detached(f"{sys.executable} -c 'import time; time.sleep(300)'")
    busy = _detached("sh -c 'while :; do :; done'")
    idle = _detached("sleep 300")
    try:
        def listed():
            code, out, err = run_cli(capsys, "inspect", "--list")
            assert code == 0, err
            return out if busy in _pids(out) else None      # the loop's share is measured: wait for it

        out = wait_for(listed, timeout=60, what="the busy loop showing in inspect --list")
        shown = _pids(out)
        assert idle_python in shown and idle not in shown
        assert out.rstrip().splitlines()[-1].endswith("not listed: --all lists them")
        code, everything, err = run_cli(capsys, "inspect", "--list", "--all")
        assert code == 0, err
        assert {idle_python, idle} <= _pids(everything) and "--all lists them" not in everything
    finally:
        for pid in (idle_python, busy, idle):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _detached(command: str) -> int:
    """Start ``command`` in the background of a shell that exits at once: its parent is no longer this process."""
    out = subprocess.run(["sh", "-c", f"{command} >/dev/null 2>&1 </dev/null & echo $!"], capture_output=True,
                         text=True, check=True)
    return int(out.stdout.strip())


def test_all_without_list_is_a_usage_error(capsys):
    code, _, err = run_cli(capsys, "inspect", "123", "--all")
    assert code == 2 and "--all goes with --list" in err
