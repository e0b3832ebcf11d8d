"""Every word right on the job side (issue 41): real jobs run by ``cpudoctor run``, each a situation a user met.

The jobs here need no torch and last a second or two: a job that only sleeps, a job that dies of a signal.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_cli(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpudoctor", "run", *args, "--", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=timeout)


def test_a_job_with_only_a_suggestion_is_not_worst_suggestion():
    """Issue 41 item 11: "1 finding (worst: suggestion)." under a job whose only finding is info-level."""
    proc = run_cli("import time; time.sleep(1.5)")
    assert proc.returncode == 0, proc.stderr
    tail = proc.stderr.rstrip().splitlines()[-1]
    assert "worst" not in proc.stderr
    assert tail.endswith("suggestion, nothing to fix."), proc.stderr
