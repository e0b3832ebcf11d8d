"""Child jobs through the non-Qt runner: progress, results, cancel, crash diagnosis."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import wait_for
from cpudoctor.lab import runner

# A protocol-speaking child that stops when asked, like the real jobs.
COOPERATIVE = textwrap.dedent("""
    import time
    from cpudoctor.lab.jobs import _jobkit as protocol
    args, stop = protocol.parse_job_argv()
    step = 0
    while not stop.is_set() and step < args.get("steps", 10**9):
        step += 1
        protocol.progress(step=step, loss=1.0 / step, accuracy=0.1, samples_per_s=100.0, elapsed=step * 0.01)
        time.sleep(0.01)
    protocol.result(status="cancelled" if stop.is_set() else "ok", steps=step)
""")

# A child that ignores stop requests and SIGTERM: only SIGKILL ends it.
STUBBORN = textwrap.dedent("""
    import signal, sys, time, json
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(json.dumps({"type": "progress", "step": 1, "elapsed": 0.0}), flush=True)
    while True:
        time.sleep(0.05)
""")


def _wait_for_progress(job, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not job.outcome.progress and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job.outcome.progress, "the child sent no progress"


def _argv(code: str, args: str = "{}") -> list[str]:
    return [sys.executable, "-c", code, "--json-args", args, "--control", "stdin"]


def test_progress_and_result_are_collected():
    seen = []
    out = runner.run_job("fake", {}, on_message=seen.append, argv=_argv(COOPERATIVE, '{"steps": 5}'))
    assert out.status == "ok" and out.returncode == 0
    assert [p["step"] for p in out.progress] == [1, 2, 3, 4, 5]
    assert out.result == {"status": "ok", "steps": 5}
    assert [m.type for m in seen] == ["progress"] * 5 + ["result"]


def test_cancel_of_a_cooperative_child_keeps_partial_results():
    job = runner.Job(_argv(COOPERATIVE)).start()
    _wait_for_progress(job)
    out = job.stop()
    assert out.status == "cancelled"
    assert out.returncode == 0 and out.result["status"] == "cancelled"
    assert out.progress and out.result["steps"] >= out.progress[-1]["step"]


def test_cancel_of_a_stubborn_child_ends_in_kill():
    job = runner.Job(_argv(STUBBORN)).start()
    _wait_for_progress(job)
    out = job.stop(ask_wait=0.1, term_wait=0.1)
    assert out.returncode == -signal.SIGKILL
    assert out.status == "cancelled" and out.progress == [{"step": 1, "elapsed": 0.0}]


def test_sigill_child_is_diagnosed_with_the_isa_hint():
    code = ("import os, signal, json; print(json.dumps({'type': 'progress', 'step': 1, 'elapsed': 0}), flush=True);"
            "os.kill(os.getpid(), signal.SIGILL)")
    out = runner.run_job("train", {}, argv=[sys.executable, "-c", code])
    assert out.status == "crashed" and out.diagnosis.kind == "illegal_instruction"
    assert out.message.startswith("Illegal instruction") and "torch" in out.message
    assert out.progress == [{"step": 1, "elapsed": 0}]


# Holds 64 MiB (touched, so resident) until the kernel's OOM killer, played by the test, sends SIGKILL.
HOLDS_64_MIB = ("import json, time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]);"
                "print(json.dumps({'type': 'progress', 'step': 1, 'elapsed': 0.0}), flush=True); time.sleep(600)")


def test_oom_kill_is_diagnosed_with_the_memory_seen():
    job = runner.Job([sys.executable, "-c", HOLDS_64_MIB], what="the train job").start()
    try:
        _wait_for_progress(job)
        # The kill comes only once the memory watcher has seen the 64 MiB: no race with its 0.2 s timer.
        wait_for(lambda: (job.peak_rss_bytes or 0) > 60 << 20, 60, "the watcher seeing 64 MiB")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.pid, signal.SIGKILL)
    out = job.wait()
    assert out.status == "crashed" and out.diagnosis.kind == "out_of_memory"
    assert "out-of-memory" in out.message and "used up to" in out.message
    assert out.peak_rss_bytes is not None and out.peak_rss_bytes > 60 << 20


def test_python_error_and_protocol_error():
    out = runner.run_job("train", {}, argv=[sys.executable, "-c", "raise ValueError('boom')"])
    assert out.status == "error" and out.message.endswith("ValueError: boom")
    code = ("from cpudoctor.lab.jobs import _jobkit; _jobkit.error('torch.compile failed: no compiler', kind='compile');"
            "raise SystemExit(3)")
    out = runner.run_job("train", {}, argv=[sys.executable, "-c", code])
    assert out.status == "error" and out.message == "torch.compile failed: no compiler"
    assert out.error["kind"] == "compile"


def test_classify_other_signal_and_missing_result():
    status, diag = runner.classify(-signal.SIGSEGV, result=None, error=None, stop_requested=False)
    assert status == "crashed" and diag.signal_name == "SIGSEGV"
    status, diag = runner.classify(0, result=None, error=None, stop_requested=False)
    assert status == "error" and "without a result" in diag.message


def test_job_command_runs_child_scripts_by_path_isolated():
    from cpudoctor.lab.jobs import script_path

    from cpudoctor.probes.child.scripts import script_path as probe_script

    launch = str(probe_script("_launch"))             # gives the job the user's PYTHONPATH and user site back
    argv = runner.job_command("gemm", {"size": 64})
    assert argv[:5] == [sys.executable, "-I", "-B", launch, str(script_path("gemm"))]   # -B: nothing written there
    assert argv[-2:] == ["--control", "stdin"]
    assert argv[argv.index("--json-args") + 1] == '{"size": 64}'
    other = runner.job_command("train", {}, python="/opt/conda/envs/dl/bin/python")
    assert other[:5] == ["/opt/conda/envs/dl/bin/python", "-I", "-B", launch, str(script_path("train"))]
    assert runner.format_bytes(3 * 1024 ** 3) == "3.0 GiB"


def test_the_sweep_orchestrator_runs_in_this_python_and_hands_on_the_target():
    argv = runner.job_command("sweep", {"budget_s": 10.0}, python="/envs/dl/bin/python")
    assert argv[:3] == [sys.executable, "-m", "cpudoctor.lab.sweep"]
    import json

    assert json.loads(argv[argv.index("--json-args") + 1]) == {"budget_s": 10.0, "python": "/envs/dl/bin/python"}


def test_send_writes_a_command_line_to_a_serving_child():
    code = textwrap.dedent("""
        from cpudoctor.lab.jobs import _jobkit
        args, stop = _jobkit.parse_job_argv()
        command = stop.next_command(timeout=30)
        _jobkit.result(status="ok", got=command)
    """)
    job = runner.Job(_argv(code)).start()
    assert job.send("measure 0.250")
    out = job.wait(30)
    assert out.status == "ok" and out.result["got"] == "measure 0.250"
    assert not job.send("measure 1")                     # the child is gone: nothing to write to


def test_ctrl_c_delivered_to_a_reader_thread_still_interrupts_wait():
    """The kernel may hand a terminal's SIGINT to any thread. Delivered to a reader thread, Python only
    flags it; a main thread blocked in waitpid would see it when the job ends (a 60 s training run
    later). wait() must notice it while the job still runs. Aimed at a helper thread with pthread_kill."""
    script = textwrap.dedent("""
        import signal, sys, threading, time
        signal.signal(signal.SIGINT, signal.default_int_handler)   # even if the suite runs with it ignored
        from cpudoctor.lab import runner
        job = runner.Job([sys.executable, "-c", "import time; time.sleep(600)"]).start()
        threading.Thread(target=lambda: (time.sleep(0.5), signal.pthread_kill(threading.get_ident(), signal.SIGINT))).start()
        try:
            job.wait()
            print("wait returned: the job ended first")
        except KeyboardInterrupt:
            print("interrupted while the job ran")
        print(job.stop(term_wait=5).status)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:                      # never leave the 600 s job behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    assert out.split("\n")[:2] == ["interrupted while the job ran", "cancelled"], out + err
