"""`cpudoctor inspect`: text and JSON output, --list, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import wait_for
from cpudoctor.cli import main
from cpudoctor.probes.process import inspect as inspect_mod
from inspect_fakes import FakeProc
import other_user

PY = sys.executable

# Acting as another user needs root (to switch) and setpriv; a root CI container runs these tests, from any
# checkout (tests/other_user.py makes a 0700 one reachable), or they skip saying why.
AS_ANOTHER_USER = other_user.runs_as_another_user


@pytest.fixture
def fake_root(tmp_path) -> Path:
    """A fake /proc with one idle Python job that loads libgomp and libiomp5 (PROC005 fires)."""
    fp = FakeProc(tmp_path)
    fp.add_process(4321, "python", cmdline=["python", "/home/carol/train.py", "--api-key", "k-123"],
                   environ={"OMP_NUM_THREADS": "2", "AWS_SECRET_ACCESS_KEY": "do-not-print"},
                   maps=["/env/site-packages/torch/lib/libgomp.so.1", "/env/lib/libiomp5.so"],
                   threads={4321: dict(processor=1), 4322: dict(processor=0, comm="worker thread")})
    return tmp_path


def test_text_output_on_fake_root(fake_root, capsys):
    rc = main(["inspect", "4321", "--seconds", "0.3", "--root", str(fake_root)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.startswith("Process 4321 (python)  python ~/train.py --api-key <redacted>\n")
    assert "worker thread" in out and "OMP_NUM_THREADS=2" in out
    assert "GNU OpenMP (libgomp): libgomp.so.1 [torch]" in out and "libiomp5.so" in out
    assert "[✗] PROC005 2 different OpenMP runtimes loaded" in out
    assert "do-not-print" not in out and "k-123" not in out and "carol" not in out
    assert "1 finding (worst: problem)." in out


def test_json_output_round_trips(fake_root, capsys):
    assert main(["inspect", "4321", "-s", "0.3", "--format", "json", "--root", str(fake_root)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "cpudoctor-inspection"
    assert data["inspection"]["pid"] == 4321 and data["inspection"]["num_threads"] == 2
    assert [t["tid"] for t in data["inspection"]["threads"]] == [4321, 4322]
    assert data["inspection"]["env"] == {"OMP_NUM_THREADS": "2"}
    assert [f["code"] for f in data["findings"]] == ["PROC005"]


def test_output_file(fake_root, tmp_path, capsys):
    target = tmp_path / "out" / "insp.json"
    target.parent.mkdir()
    assert main(["inspect", "4321", "-s", "0.2", "-f", "json", "-o", str(target), "--root", str(fake_root)]) == 0
    assert json.loads(target.read_text())["inspection"]["pid"] == 4321
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("argv, message", [
    (["inspect", "999999"], "no process with PID 999999 (it may have exited)"),
    (["inspect"], "give a process ID, or --list to see the candidates"),
])
def test_bad_pid_is_one_line_exit_2(fake_root, capsys, argv, message):
    rc = main(argv + ["--root", str(fake_root)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["inspect", "abc"], ["inspect", "-5"], ["inspect", "1", "--seconds", "0"],
                                  ["inspect", "1", "--format", "xml"]])
def test_bad_usage_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_process_exiting_mid_window_prints_partial_data_and_exits_2(capsys, monkeypatch):
    """The child ends (its stdin closes) right after the first sample, however slow the machine is."""
    proc = subprocess.Popen([PY, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    real_inspect = inspect_mod.inspect_process

    def end_child_then_sleep(seconds: float) -> None:
        if proc.poll() is None:
            proc.stdin.close()
            proc.wait(timeout=60)                # reaped: its /proc entry is gone before the next sample
        time.sleep(seconds)

    monkeypatch.setattr(inspect_mod, "inspect_process",
                        lambda *a, **kw: real_inspect(*a, **kw, sleep=end_child_then_sleep))
    try:
        rc = main(["inspect", str(proc.pid), "--seconds", "30"])
    finally:
        proc.kill()
        proc.wait(timeout=10)
    out, err = capsys.readouterr()
    assert rc == 2
    assert f"Process {proc.pid}" in out and "exited during the window: partial data" in out
    assert err.count("\n") == 1 and f"process {proc.pid} exited" in err


def test_list_json_excludes_self(capsys):
    """The short list (Python and busy processes) holds a Python process this test started, never this
    process: the list is not empty on a machine that runs no other Python. The Python is started through a
    shell that leaves it behind (what CPU Doctor started itself is never listed)."""
    import signal

    from conftest import wait_for

    shell = subprocess.run(["sh", "-c", f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(600)' "
                            "</dev/null >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, timeout=60)
    pid = int(shell.stdout.strip())
    try:
        def listed():
            assert main(["inspect", "--list", "--format", "json"]) == 0
            entries = json.loads(capsys.readouterr().out)
            return entries if pid in {e["pid"] for e in entries} else None

        entries = wait_for(listed, 60, "the Python process to be listed", interval=0.2)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert os.getpid() not in {e["pid"] for e in entries}
    assert {"pid", "cmdline", "cpu_percent", "threads", "rss_bytes", "is_python"} <= set(entries[0])


def test_list_text_on_fake_root(fake_root, capsys):
    assert main(["inspect", "--list", "--root", str(fake_root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["PID", "CPU%", "THR", "RSS", "COMMAND"]
    assert lines[1].split()[0] == "4321" and "~/train.py" in lines[1]


@AS_ANOTHER_USER
def test_another_users_process_is_one_line_exit_2():
    """The CLI run as nobody against a root process: environ and maps are refused by the kernel."""
    target = subprocess.Popen(["sleep", "300"])
    cwd = Path(tempfile.mkdtemp())
    cwd.chmod(0o755)
    try:
        # Until the exec completes, /proc shows the forked Python, not sleep: wait for the name under test.
        wait_for(lambda: Path(f"/proc/{target.pid}/comm").read_text().strip() == "sleep", 60, "sleep's exec")
        out = subprocess.run(other_user.as_user([PY, "-m", "cpudoctor", "inspect", str(target.pid), "-s", "0.3"],
                                                reach=[cwd]), capture_output=True, text=True, timeout=60, cwd=cwd)
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(cwd, ignore_errors=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1
    assert f"process {target.pid} could not be read: it belongs to another user (uid 0)" in out.stderr
    assert f"sudo cpudoctor inspect {target.pid}" in out.stderr
    assert f"Process {target.pid} (sleep)" in out.stdout and "permission denied" in out.stdout


def test_refused_although_same_user_blames_ptrace_rules_not_ownership():
    """Root (or the owner) refused by Yama/CAP_SYS_PTRACE: "another user" would be wrong advice."""
    from cpudoctor.render.inspect import denied_hint

    me = os.geteuid()
    text = denied_hint(42, me, "cpudoctor inspect 42")
    assert "another user" not in text and f"runs as your user (uid {me})" in text and "ptrace" in text
    if me == 0:
        assert "sudo" not in text and "CAP_SYS_PTRACE" in text   # root already: sudo changes nothing
    else:
        assert "sudo cpudoctor inspect 42" in text
    other = denied_hint(42, me + 1, "cpudoctor inspect 42")
    assert f"another user (uid {me + 1}); run `sudo cpudoctor inspect 42`" in other
