"""Every lab job ends (issue 29, item 7): a start-up deadline and an overall deadline.

An interpreter chosen with ``bench --python ENV`` may never speak (a wrapper
that waits on something), flood stdout (``yes``), or start the job and then
never finish (a deadlocked OpenMP runtime that ignores ``--seconds``). Each is
stopped and explained in one line; what was measured is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cpudoctor.lab import deadlines, runner

PATIENCE_S = 180      # the suite's own guard: the deadlines under test are a few seconds


def _fake_python(folder: Path, job_mode: str) -> Path:
    """An "interpreter" that answers CPU Doctor's questions like this Python, but runs a job as ``job_mode``."""
    bin_dir = folder / "env" / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "python"
    # exec -a: the real interpreter calls itself by this name, so CPU Doctor describes (and later runs) this file
    exe.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        case "$*" in
          *--json-args*) {job_mode} ;;
          *) exec -a "$0" {sys.executable} "$@" ;;
        esac
        """))
    exe.chmod(0o755)
    (folder / "env" / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    return exe


# A job that says it started, sends one step, then hangs for ever, deaf to "stop" and to SIGTERM.
HANGS_AFTER_ONE_STEP = textwrap.dedent("""
    import json, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(json.dumps({"job_started": True}), flush=True)
    print(json.dumps({"type": "progress", "step": 1, "elapsed": 0.1, "samples_per_s": 640.0}), flush=True)
    while True:
        time.sleep(1)
""")


def _argv(code: str) -> list[str]:
    return [sys.executable, "-c", code, "--json-args", "{}", "--control", "stdin"]


def test_a_child_that_never_speaks_is_stopped_at_its_start_up_deadline():
    limits = deadlines.Deadlines(startup_s=1.0, total_s=PATIENCE_S)
    out = runner.run_job("train", {}, argv=_argv("import time; time.sleep(3600)"), limits=limits)
    assert out.status == "error" and out.diagnosis.kind == "no_start", out.message
    assert "said nothing" in out.message and "1 s" in out.message


def test_a_child_that_floods_stdout_is_stopped():
    limits = deadlines.Deadlines(startup_s=PATIENCE_S, total_s=PATIENCE_S)
    out = runner.run_job("train", {}, argv=_argv("import sys\nwhile True: sys.stdout.write('y\\n')"),
                         limits=limits)
    assert out.status == "error" and out.diagnosis.kind == "no_start", out.message
    assert "not CPU Doctor's job protocol" in out.message
    assert len(out.logs) <= runner.MAX_LOG_LINES


def test_a_job_that_ignores_its_length_is_stopped_at_the_overall_deadline_and_keeps_its_figures():
    limits = deadlines.Deadlines(startup_s=PATIENCE_S, total_s=2.0)
    out = runner.run_job("train", {}, argv=_argv(HANGS_AFTER_ONE_STEP), limits=limits)
    assert out.status == "error" and out.diagnosis.kind == "deadline", out.message
    assert "ran past its deadline" in out.message
    assert out.progress and out.progress[0]["samples_per_s"] == 640.0


def test_the_deadlines_follow_the_settings():
    short = deadlines.for_job("train", {"seconds": 5.0})
    long = deadlines.for_job("train", {"seconds": 3600.0})
    assert short.startup_s == long.startup_s
    assert short.total_s < long.total_s and long.total_s > 3600
    assert deadlines.for_job("train", {"seconds": 5.0, "dtype": "bf16"}).total_s > short.total_s
    assert deadlines.for_job("train", {"seconds": 5.0, "compile": True}).total_s > short.total_s
    big = deadlines.for_job("gemm", {"size": 32768, "backends": ["numpy-fp64"], "threads": [1],
                                     "min_seconds": 0.75})
    assert big.total_s > deadlines.for_job("gemm", {"size": 512, "backends": ["numpy-fp64"], "threads": [1],
                                                    "min_seconds": 0.75}).total_s
    assert deadlines.for_job("quant", {"batches": [1, 64], "min_seconds": 1.0}).total_s > 0
    sweep = deadlines.for_job("sweep", {"budget_s": 45.0, "train": {}})
    assert sweep.total_s is not None and 45.0 < sweep.total_s < deadlines.for_job("sweep", {"budget_s": 600.0}).total_s


def test_a_real_job_says_it_started_before_importing_torch(tmp_path):
    """The start-up deadline measures the interpreter, not torch's import: the jobs speak first."""
    from cpudoctor.kits.child.lines import FACTS, parse_line

    script = runner.job_command("gemm", {"size": 16, "backends": ["numpy-fp64"], "threads": [1],
                                         "min_seconds": 0.01})
    proc = subprocess.Popen(script, stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": "/nonexistent"})
    try:
        first = parse_line(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    assert first.type == FACTS and first.data.get("job_started") is True


@pytest.mark.parametrize("mode, words", [("exec sleep 3600", "said nothing"),
                                         # stopped at the limit, not after draining millions more lines with
                                         # the stop signals starved of the GIL (it took 2 to 40 s)
                                         ("exec yes", "printed more than 10,000 lines that are not CPU Doctor's "
                                                      "job protocol")])
def test_bench_with_an_interpreter_that_never_starts_the_job_ends(mode, words, tmp_path):
    python = _fake_python(tmp_path, mode)
    env = {**os.environ, "CPUDOCTOR_LAB_STARTUP_S": "3", "CPUDOCTOR_PYTHON": str(python)}
    done = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "train", "--seconds", "1", "--quiet",
                           "--python", str(python)], capture_output=True, text=True, timeout=PATIENCE_S, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_bench_seconds_is_enforced(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANGS_AFTER_ONE_STEP)
    python = _fake_python(tmp_path, f'exec {sys.executable} {script}')
    # the job speaks at once (no torch): 8 s of start-up allowance is plenty on a busy machine, and the overall
    # deadline it is part of (8 + 2 x 1 s + 2 s grace) is what this test waits for
    env = {**os.environ, "CPUDOCTOR_LAB_GRACE_S": "2", "CPUDOCTOR_LAB_STARTUP_S": "8", "CPUDOCTOR_PYTHON": str(python)}
    done = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "train", "--seconds", "1", "--quiet",
                           "--python", str(python)], capture_output=True, text=True, timeout=PATIENCE_S, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert "ran past its deadline" in done.stderr, done.stderr


def test_the_windows_training_job_has_the_overall_deadline_too(qtbot, monkeypatch):
    """The Training page's jobs get the deadlines of their settings, as in the CLI: a job that ignores its
    length is stopped, its figures kept, instead of running (and holding the window's Train button) for ever."""
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.training_page import TrainingPage

    # the job speaks at once (no torch), so a short start-up allowance; the overall deadline this test waits for
    # follows from it: 8 + 2 x 1 s + 1 s grace
    monkeypatch.setenv("CPUDOCTOR_LAB_STARTUP_S", "8")
    monkeypatch.setenv("CPUDOCTOR_LAB_GRACE_S", "1")
    page = TrainingPage(AppModel())
    qtbot.addWidget(page)
    page.job_argv = lambda job, args: _argv(HANGS_AFTER_ONE_STEP)
    page.form.length_spin.setValue(1)
    try:
        with qtbot.waitSignal(page.runner.finished, timeout=PATIENCE_S * 1000) as blocker:
            page.start_training()
        out = blocker.args[0]
        assert out.status == "error" and out.diagnosis.kind == "deadline", out.message
        assert out.progress and out.progress[0]["samples_per_s"] == 640.0
    finally:
        page.shutdown()
