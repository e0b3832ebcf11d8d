"""The one child runner with real processes: no descendant outlives its job, deaths are named.

The children here fork a grandchild that calls ``os.setsid()`` (so a kill of the
child's process group misses it) and sleeps; whatever way the job ends
(normally, by timeout, by cancel, by a crash) the grandchild must be gone
afterwards and not left as a zombie.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest
from child_support import assert_gone, forker, gone, no_process_left, wait_until  # noqa: F401 - autouse fixture

from cpudoctor.lab import runner as lab
from cpudoctor.kits.child import tree
from cpudoctor.kits.child.lines import FACTS, LOG, MAX_LINE_BYTES, PROGRESS, merge_facts, parse_line
from cpudoctor.kits.child.runner import ChildProcess, ChildSpec, run_child, run_children

# ------------------------------------------------------------------ the grandchild that called setsid


@pytest.mark.parametrize("style", ["fact", "typed"])
def test_setsid_grandchild_is_ended_when_the_child_exits_normally(style):
    seen = []
    child = ChildProcess(forker("exit", style), what="a forking child", on_message=seen.append).start()
    end = child.wait()
    assert end.returncode == 0 and not end.timed_out and end.leftovers >= 1
    (msg,) = seen
    assert msg.type == (PROGRESS if style == "typed" else FACTS)
    assert_gone(msg.data["grandchild"])


def test_setsid_grandchild_is_ended_after_a_timeout():
    result = run_child(ChildSpec(forker("hang"), what="a hanging child", timeout=1.0))
    assert result.timed_out and result.diagnosis.kind == "timeout"
    assert "did not finish in time" in result.diagnosis.message
    assert_gone(result.data["grandchild"])


def test_setsid_grandchild_is_ended_on_cancel():
    job = lab.Job(forker("hang")).start()
    assert wait_until(lambda: "grandchild" in job.outcome.facts)
    out = job.stop(ask_wait=0.1, term_wait=0.1)
    assert out.status == "cancelled"
    assert_gone(job.outcome.facts["grandchild"])


def test_stubborn_child_and_its_grandchild_end_in_kill():
    job = lab.Job(forker("stubborn")).start()
    assert wait_until(lambda: "grandchild" in job.outcome.facts)
    out = job.stop(ask_wait=0.1, term_wait=0.1)
    assert out.returncode == -signal.SIGKILL and out.status == "cancelled"
    assert_gone(job.outcome.facts["grandchild"])


def test_grandchild_without_the_token_is_still_found_by_the_snapshots():
    """It cleared its environment (exec with env={}): only the runner's snapshots know it is ours."""
    child = ChildProcess(forker("exit", "fact", "clearenv"), what="a forking child", sample_interval=0.05)
    pids = []
    child.on_message = lambda msg: pids.append(msg.data["grandchild"])
    end = child.start().wait()
    assert end.returncode == 0 and end.leftovers >= 1
    assert_gone(pids[0])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux-only")
def test_orphans_come_back_to_us_while_a_child_runs_and_the_subreaper_is_released():
    was = tree.is_subreaper()
    child = ChildProcess(forker("hang"), what="a hanging child", control_stdin=True)
    pids = []
    child.on_message = lambda msg: pids.append(msg.data["grandchild"])
    child.start()
    assert wait_until(lambda: bool(pids)) and tree.is_subreaper()
    child.stop(ask_wait=0.05, term_wait=0.05)
    assert gone(pids[0])               # at once: ended and reaped before the end was reported
    assert tree.is_subreaper() == was


# ------------------------------------------------------------------ deaths are named, even after a fork


@pytest.mark.parametrize("mode, name", [("abort", "SIGABRT"), ("segv", "SIGSEGV")])
def test_a_child_that_forks_then_dies_is_named_by_its_signal_not_a_timeout(mode, name):
    """The grandchild holds the child's stdout and stderr open: waiting for EOF would end in the timeout."""
    start = time.monotonic()
    result = run_child(ChildSpec(forker(mode), what="import fancy", timeout=60.0))
    assert not result.timed_out and result.diagnosis.kind == "signal"
    assert result.diagnosis.signal_name == name and name in result.diagnosis.message
    assert result.returncode == -getattr(signal, name)
    assert time.monotonic() - start < 30      # far below the 60 s limit it would otherwise have run into
    assert "grandchild" in result.data        # facts printed before the crash are kept
    assert_gone(result.data["grandchild"])


def test_a_lab_job_that_forks_then_aborts_is_crashed_with_sigabrt():
    out = lab.run_job("train", {}, argv=forker("abort", "typed"), timeout=60.0)
    assert out.status == "crashed" and out.diagnosis.signal_name == "SIGABRT"
    assert "SIGABRT" in out.message and out.progress and out.progress[0]["step"] == 1
    assert_gone(out.progress[0]["grandchild"])


def test_probe_children_merge_facts_printed_before_a_crash():
    code = ("import json, os, signal; print(json.dumps({'stage': 'importing numpy', 'numpy': 1}), flush=True);"
            "print('banner noise'); print(json.dumps({'stage': 'importing torch'}), flush=True);"
            "os.kill(os.getpid(), signal.SIGSEGV)")
    first, second = run_children([ChildSpec([sys.executable, "-c", code], what="import torch"),
                                  ChildSpec(forker("abort"), what="import fancy")])
    assert first.data == {"stage": "importing torch", "numpy": 1}
    assert first.diagnosis.signal_name == "SIGSEGV" and second.diagnosis.signal_name == "SIGABRT"
    assert_gone(second.data["grandchild"])


# ------------------------------------------------------------------ the runner itself


def test_peak_memory_counts_the_grandchildren():
    code = textwrap.dedent("""
        import os, sys, time
        ready_r, ready_w = os.pipe()
        if os.fork() == 0:
            b = bytearray(48 << 20); b[::4096] = b"x" * len(b[::4096])
            os.write(ready_w, b"x")
            time.sleep(120)                                    # holds the memory until it is ended
        os.read(ready_r, 1)
        sys.stdin.readline()                                   # until the parent says stop
    """)
    child = ChildProcess([sys.executable, "-c", code], control_stdin=True, sample_interval=0.02).start()
    assert wait_until(lambda: (child.peak_rss_bytes or 0) > 48 << 20)
    end = child.stop()
    assert end.returncode == 0 and end.peak_rss_bytes > 48 << 20


def test_a_program_that_cannot_start_ends_with_the_reason():
    ended = []
    child = ChildProcess(["/nonexistent/python3"], what="the train job", on_end=ended.append).start()
    end = child.wait()
    assert end.returncode is None and end.start_error.startswith("the train job could not start")
    assert ended == [end]


def test_a_failing_callback_does_not_stop_the_reading():
    def explode(msg):
        raise ValueError("display bug")

    code = "import json\nfor i in range(3): print(json.dumps({'n': i}))"
    child = ChildProcess([sys.executable, "-c", code], on_message=explode).start()
    assert child.wait().returncode == 0


def test_stderr_tail_keeps_the_last_lines():
    code = "import sys\nfor i in range(500): print('line', i, file=sys.stderr)\nraise SystemExit(3)"
    result = run_child(ChildSpec([sys.executable, "-c", code], what="a noisy child"))
    assert result.returncode == 3 and result.stderr_tail.endswith("line 499")
    assert "line 0\n" not in result.stderr_tail
    assert result.diagnosis.message == "a noisy child failed (exit code 3): line 499"


# ------------------------------------------------------------------ the one line reader


def test_one_reader_for_typed_messages_facts_and_logs():
    assert parse_line('{"type": "progress", "step": 2}').type == PROGRESS
    facts = parse_line('{"torch": {"version": "2.13.0"}}')
    assert facts.type == FACTS and facts.data == {"torch": {"version": "2.13.0"}}
    for line in ('{"type": "other"}', "[1, 2]", "{not json", "Illegal instruction (core dumped)"):
        msg = parse_line(line)
        assert msg.type == LOG and msg.text == line
    assert parse_line("   ") is None
    deep = '{"a":' + "[" * 100_000 + "]" * 100_000 + "}"   # nested past the JSON parser's stack
    assert parse_line(deep).type == LOG


def test_facts_merge_in_order_and_typed_messages_are_not_facts():
    lines = ['{"a": 1}', '{"type": "result", "a": 99}', "noise", '{"a": 2, "b": 3}']
    assert merge_facts(lines) == {"a": 2, "b": 3}


def test_a_line_longer_than_the_limit_is_cut_and_the_next_line_still_read():
    code = f"import sys; sys.stdout.write('x' * {MAX_LINE_BYTES * 3} + '\\n'); print('{{\"after\": 1}}')"
    seen = []
    end = ChildProcess([sys.executable, "-c", code], on_message=seen.append).start().wait()
    assert end.returncode == 0
    assert [m.type for m in seen] == [LOG, FACTS] and len(seen[0].text) == MAX_LINE_BYTES
    assert seen[1].data == {"after": 1}


def test_without_a_subreaper_the_token_still_finds_the_grandchild(monkeypatch):
    """macOS, or a kernel without PR_SET_CHILD_SUBREAPER: orphans go to init, the token still names them."""
    monkeypatch.setattr(tree.SUBREAPER, "_prctl", None)
    result = run_child(ChildSpec(forker("exit"), what="a forking child"))
    assert result.ok and not tree.is_subreaper()
    assert_gone(result.data["grandchild"])


def test_without_a_pidfd_the_runner_polls_and_still_sees_the_end_and_the_timeout(monkeypatch):
    """macOS, Windows or a kernel before 5.3 have no pidfd: the supervisor polls instead."""
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    result = run_child(ChildSpec(forker("abort"), what="import fancy", timeout=60.0))
    assert result.diagnosis.signal_name == "SIGABRT" and not result.timed_out
    result = run_child(ChildSpec(forker("hang"), what="a hanging child", timeout=0.5))
    assert result.timed_out
    assert_gone(result.data["grandchild"])
