"""The child runner: JSON lines, timeouts, and deaths by signal named in words."""

from __future__ import annotations

import shlex
import signal
import sys
import time

from conftest import wait_for
from cpudoctor.kits.child.runner import ChildSpec, parse_json_lines, run_child, run_children
from cpudoctor.probes.software.importcheck import import_spec, to_import_check

SIGILL_SELF = "import os, signal, sys; print('{\"before\": 1}', flush=True); os.kill(os.getpid(), signal.SIGILL)"


def test_parse_json_lines_merges_objects_and_skips_noise():
    out = 'banner\n{"a": 1}\nW0000 warning {not json}\n{"b": [1, 2]}\n[1, 2]\n{"a": 3}\n'
    assert parse_json_lines(out) == {"a": 3, "b": [1, 2]}


def test_sigill_child_reported_as_illegal_instruction_with_isa_hint():
    calls = []

    def hint():
        calls.append(1)
        return "tensorflow 2.16 needs avx; this CPU lacks avx"

    result = run_child(ChildSpec([sys.executable, "-c", SIGILL_SELF], what="import tensorflow", isa_hint=hint))
    assert result.returncode == -signal.SIGILL
    assert result.diagnosis.kind == "illegal_instruction" and result.diagnosis.signal_name == "SIGILL"
    assert result.diagnosis.message.startswith("Illegal instruction: import tensorflow was killed by SIGILL")
    assert "lacks avx" in result.diagnosis.message
    assert result.data == {"before": 1}  # what the child printed before dying survives
    assert calls == [1]


def test_import_check_of_a_module_that_dies_of_sigill(tmp_path):
    (tmp_path / "sigillmod.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    spec = import_spec("sigillmod", "import sigillmod", timeout=20, isa_hint="needs AVX2")
    spec.env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    check = to_import_check("sigillmod", "sigillmod", run_child(spec))
    assert check.status == "crashed" and check.signal == signal.SIGILL and check.signal_name == "SIGILL"
    assert check.message.startswith("Illegal instruction") and "AVX2" in check.message


def test_import_errors_and_other_signals():
    missing = to_import_check("nope", "cpudoctor_no_such_module", run_child(import_spec("cpudoctor_no_such_module", "import x", 20)))
    assert missing.status == "error" and "ModuleNotFoundError" in missing.message
    segv = run_child(ChildSpec([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], what="child"))
    check = to_import_check("p", "p", segv)
    assert check.status == "crashed" and check.signal_name == "SIGSEGV" and "SIGSEGV" in check.message
    ok = to_import_check("json", "json", run_child(import_spec("json", "import json", 20)))
    assert ok.status == "ok" and ok.seconds is not None


def test_timeout_kills_the_whole_process_group(tmp_path):
    # sh, not Python: it starts the grandchild and writes its PID within milliseconds even on a loaded
    # machine, long before the 2 s timeout this test is about.
    marker = tmp_path / "grandchild.pid"
    script = f"sleep 600 & echo $! > {shlex.quote(str(marker))}; wait"
    start = time.monotonic()
    result = run_child(ChildSpec(["sh", "-c", script], what="a hanging child", timeout=2.0))
    assert result.timed_out and result.diagnosis.kind == "timeout"
    assert "did not finish in time" in result.diagnosis.message
    assert time.monotonic() - start < 30
    pid = int(marker.read_text())
    # The grandchild was in the same group and got the kill too (reaping may lag in a container).
    wait_for(lambda: _dead(pid), 30, f"the grandchild {pid} dying with its group")


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for a reaper (in containers PID 1 may be slow to reap)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_missing_interpreter_is_an_error_not_an_exception():
    result = run_child(ChildSpec(["/nonexistent/python"], what="the child"))
    assert result.diagnosis.kind == "error" and "could not start" in result.diagnosis.message


def test_run_children_keeps_order():
    specs = [ChildSpec([sys.executable, "-c", f"print('{{\"n\": {n}}}')"], what=str(n)) for n in range(3)]
    assert [r.data["n"] for r in run_children(specs)] == [0, 1, 2]
    assert run_children([]) == []
