"""The job-state probe: loaded into a Python job as its sitecustomize, invisible to the job, and read back bounded.

Real interpreters run real scripts here (no fakes of Python's start-up): the probe must chain to the user's own
sitecustomize, give PYTHONPATH back, stay out of the job's output and its children, and record what the script
sets with the file and line. The parser is fed hostile files. One test runs a real torch script (a few seconds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cpudoctor.probes.process.jobprobe import (MAX_LINE, MAX_LINES, MAX_READ, ProbeChannel, is_python_command,
                                               parse_probe)


def _run(tmp_path: Path, script: str, env: dict[str, str] | None = None, argv_extra: tuple[str, ...] = ()):
    """Run ``script`` under the probe as ``run`` would; (completed process, JobState)."""
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(script), encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith("CPUDOCTOR_") and k != "PYTHONPATH"}
    base.update(env or {})
    argv = [sys.executable, *argv_extra, str(path)]
    job_env, channel, why = ProbeChannel.open(argv, base)
    assert channel is not None, why
    proc = subprocess.run(argv, env=job_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    state = channel.read(proc.returncode and None)
    assert not channel.folder.exists()                       # the probe's folder goes with the read
    return proc, state


HYGIENE = """
import os, subprocess, sys
print("out", os.environ.get("PYTHONPATH"), [k for k in os.environ if k.startswith("CPUDOCTOR_")],
      any("cpudoctor-probe-" in p for p in sys.path), os.environ.get("USER_SITE_RAN"))
os.environ["OMP_PROC_BIND"] = "true"      # line 4
os.environ.setdefault("MKL_NUM_THREADS", "3")
os.putenv("OMP_PLACES", "cores")
os.environ["UNRELATED"] = "x"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, os.sched_getaffinity(0))
child = subprocess.run([sys.executable, "-c", "import os, sys; print(os.environ.get('PYTHONPATH'), "
                        "sys.modules['sitecustomize'].__file__ if 'sitecustomize' in sys.modules else None)"],
                       capture_output=True, text=True)
print("child", child.stdout.strip())
"""


def test_the_job_sees_its_own_environment_and_the_probe_sees_its_settings(tmp_path):
    user = tmp_path / "userpath"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n", encoding="utf-8")
    proc, state = _run(tmp_path, HYGIENE, env={"PYTHONPATH": str(user)})
    assert proc.returncode == 0 and proc.stderr == ""
    out, child = proc.stdout.splitlines()
    # PYTHONPATH is the user's again, no probe variable nor folder is left, and the user's sitecustomize ran
    assert out == f"out {user} [] False yes"
    # a subprocess sees the user's PYTHONPATH and the user's own sitecustomize, not the probe
    assert child == f"child {user} {user / 'sitecustomize.py'}"
    assert state.loaded and state.python == sys.version.split()[0] and state.pid is not None
    calls = {(c.name, c.key): c for c in state.calls}
    bind = calls[("os.environ", "OMP_PROC_BIND")]
    assert bind.value == "true" and bind.at.file.endswith("train.py") and bind.at.line == 5 and bind.at.in_user_code
    assert bind.after_torch is False
    assert calls[("os.environ", "MKL_NUM_THREADS")].at.line == 6             # setdefault goes through putenv too
    assert calls[("os.environ", "OMP_PLACES")].at.line == 7
    assert ("os.environ", "UNRELATED") not in calls                          # only thread and binding variables
    if hasattr(os, "sched_setaffinity"):
        assert calls[("os.sched_setaffinity", "0")].at.line == 10
    assert state.exited and state.bad_lines == 0


def test_no_pythonpath_before_means_none_after(tmp_path):
    proc, state = _run(tmp_path, "import os\nprint(os.environ.get('PYTHONPATH', 'unset'))\n")
    assert proc.stdout == "unset\n" and state.loaded


def test_a_broken_user_sitecustomize_fails_as_it_would_without_the_probe(tmp_path):
    user = tmp_path / "userpath"
    user.mkdir()
    (user / "sitecustomize.py").write_text("raise ValueError('user bug')\n", encoding="utf-8")
    (tmp_path / "s.py").write_text("print('ran')\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPUDOCTOR_")} | {"PYTHONPATH": str(user)}
    plain = subprocess.run([sys.executable, str(tmp_path / "s.py")], env=env, capture_output=True, text=True,
                           timeout=60)
    proc, _ = _run(tmp_path, "print('ran')\n", env={"PYTHONPATH": str(user)})
    assert (proc.stdout, proc.stderr) == (plain.stdout, plain.stderr)
    assert "Error in sitecustomize" in proc.stderr and "user bug" in proc.stderr


def test_usercustomize_still_runs(tmp_path):
    """usercustomize is imported by site after sitecustomize; the probe shadows only sitecustomize. Outside a virtual
    environment (the user site is off inside one), with the user base in a temporary folder."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    if not base.exists():
        pytest.skip(f"no base interpreter at {base}")
    userbase = tmp_path / "userbase"
    site = subprocess.run([str(base), "-c", "import site; print(site.getusersitepackages())"],
                          env={"PYTHONUSERBASE": str(userbase), "PATH": os.environ.get("PATH", "")},
                          capture_output=True, text=True, timeout=60).stdout.strip()
    Path(site).mkdir(parents=True)
    (Path(site) / "usercustomize.py").write_text("import builtins\nbuiltins.USERCUSTOMIZE = 1\n", encoding="utf-8")
    script = tmp_path / "u.py"
    script.write_text("import builtins\nprint(getattr(builtins, 'USERCUSTOMIZE', 0))\n", encoding="utf-8")
    env, channel, _ = ProbeChannel.open([str(base), str(script)],
                                        {"PYTHONUSERBASE": str(userbase), "PATH": os.environ.get("PATH", "")})
    proc = subprocess.run([str(base), str(script)], env=env, capture_output=True, text=True, timeout=60)
    state = channel.read(None)
    assert proc.stdout == "1\n" and state.loaded


@pytest.mark.parametrize("argv, python", [
    (["python3", "train.py"], True), (["python", "-m", "pkg"], True), (["train.py"], True),
    (["python3", "-I", "train.py"], False), (["python", "-IB", "t.py"], False), (["python", "-E", "t.py"], False),
    (["python", "-X", "dev", "t.py"], True), (["bash", "run.sh"], False), (["no-such-program-here"], False)])
def test_only_python_commands_get_the_probe(argv, python):
    assert is_python_command(argv) is python


def test_a_script_whose_shebang_names_python_gets_it_and_a_shell_script_does_not(tmp_path):
    py, sh = tmp_path / "launcher", tmp_path / "run.sh"
    py.write_text("#!/usr/bin/env python3\nprint(1)\n")
    sh.write_text("#!/bin/sh\npython3 train.py\n")
    for p in (py, sh):
        p.chmod(0o755)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert is_python_command(["launcher"], env) and not is_python_command(["run.sh"], env)
    job_env, channel, why = ProbeChannel.open(["run.sh"], env)
    assert channel is None and why == "not_python" and job_env == env
    assert ProbeChannel.open(["python3", "t.py"], env, enabled=False)[1:] == (None, "off")


# --- the parser: hostile files ---------------------------------------------------------------------------------


def _line(kind: str, pid: int = 7, **data) -> bytes:
    return json.dumps({"k": kind, "pid": pid, "t": 1.0, **data}).encode()


def test_garbage_and_wrong_shapes_are_counted_not_raised():
    lines = [b"", b"not json", b"\xff\xfe\x00", b"[1, 2]", b'{"k": 3, "pid": 7}', b'{"k": "set", "pid": "7"}',
             b'{"k": "set", "pid": 7, "at": {"file": 5, "line": "x"}, "value": {"a": 1}}',
             b'{"k": "modes", "pid": 7, "threads": "many", "monitoring": "x", "affinity": 5}',
             b'{"k": "model", "pid": 7, "parameters": -5, "dtypes": {"float64": "x"}}',
             b'{"k": "progress", "pid": 7, "steps": 1e400, "t": "soon"}',
             b"[" * 100_000, _line("hello", python="3.11\x1b[31m", affinity=[0, 1, "x", -3])]
    state = parse_probe(lines, 7)
    assert state.loaded and state.python == "3.11?[31m" and state.affinity_start == [0, 1]
    assert state.bad_lines >= 6
    assert state.samples[0].threads is None and state.model.parameters == 0
    assert state.calls[0].at is None and state.calls[0].value == "{'a': 1}"


def test_long_lines_many_lines_and_other_processes():
    lines = [b"x" * (MAX_LINE + 1)] + [_line("progress", steps=i, forwards=i) for i in range(MAX_LINES + 10)]
    state = parse_probe(lines, 7)
    assert state.bad_lines == 1 and state.truncated and len(state.progress) <= 4_000
    mixed = [_line("hello", pid=9, python="3.12"), _line("torch", pid=9, version="2.13"), _line("hello", pid=7)]
    assert parse_probe(mixed, 7).pid == 7 and parse_probe(mixed, 7).other_pids == [9]
    assert parse_probe(mixed, None).pid == 9                 # the job's pid unknown: the process that imported torch
    assert parse_probe([], 7).why_not == "not_loaded"


def test_a_file_larger_than_read_is_cut(tmp_path):
    channel = ProbeChannel(tmp_path, tmp_path / "state.jsonl")
    with open(channel.out, "wb") as fh:
        fh.write(_line("hello") + b"\n")
        fh.write((_line("progress", steps=1, forwards=1, pad="y" * 900) + b"\n") * (MAX_READ // 900 + 10))
    state = channel.read(7)
    assert state.loaded and state.truncated and not tmp_path.exists()


def test_the_job_writing_into_the_file_cannot_break_the_read(tmp_path):
    channel = ProbeChannel(tmp_path, tmp_path / "state.jsonl")
    channel.out.write_bytes(_line("hello") + b"\n" + os.urandom(5000) + b"\n" + _line("exit") + b"\n")
    state = channel.read(7)
    assert state.loaded and state.exited


# --- a real torch job ------------------------------------------------------------------------------------------


def _needs_torch() -> None:
    """Skip without torch, without importing it here: the jobs import it, and a test process that did would fail
    test_training_page's check that the window's process never imports torch (on the same xdist worker)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")

TORCH_JOB = """
import os
os.environ["OMP_NUM_THREADS"] = "1"
import torch
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)
torch.autograd.set_detect_anomaly(True)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
data = torch.utils.data.TensorDataset(torch.randn(64, 32), torch.randint(0, 4, (64,)))
loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=0)
for epoch in range(3):
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
print("trained", next(model.parameters()).dtype)
"""


def test_a_real_torch_job_is_read_from_inside(tmp_path):
    _needs_torch()
    proc, state = _run(tmp_path, TORCH_JOB)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "trained torch.float64\n" and proc.stderr == ""        # nothing of the probe's shows
    lines = {c.name: c.at.line for c in state.calls if c.at is not None and c.at.in_user_code}
    assert lines["torch.set_num_threads"] == 5 and lines["torch.set_default_dtype"] == 6
    anomaly = state.last_call("torch.set_anomaly_enabled")
    assert anomaly.at.library == "torch" and anomaly.at.user_place()[1] == 7     # through torch's own class
    assert state.calls_to("os.environ", key="OMP_NUM_THREADS")[0].after_torch is False
    (loader,) = state.loaders
    assert (loader.num_workers, loader.batch_size, loader.at.line) == (0, 8, 12)
    assert state.optimizers == ["SGD"] and state.steps == 24 and state.backwards == 24
    assert state.model.name == "Sequential" and state.model.dtypes == {"float64": 32 * 64 + 64 + 64 * 4 + 4}
    assert state.model.input_dtypes == ["float64"] and state.model.input_shapes == [[8, 32]]
    assert state.model.forward_flops == 2 * 8 * (32 * 64 + 64 * 4)                 # two GEMMs, one batch of 8
    assert state.model.called_at.user_place()[1] == 16
    sample = state.latest()
    assert sample.threads == 1 and sample.anomaly and sample.grad and sample.dtype == "float64" and sample.main_thread
    # what the training holds, counted from inside: float64 parameters, their gradients at the first step, SGD
    # without momentum keeps no state; the forward pass at batch 8 saved its input (8 x 32) and the ReLU's output
    # (8 x 64, which the second Linear saves too: one storage), the weights' transposes are the parameters' own
    params = (32 * 64 + 64 + 64 * 4 + 4) * 8
    f = state.forward_memory
    assert (f.module, f.chosen, f.complete, f.batch, f.param_bytes) == ("Sequential", True, True, 8, params)
    assert f.saved_bytes == 8 * (32 + 64) * 8 and f.bytes_per_sample == (32 + 64) * 8
    (step,) = state.step_memory
    assert (step.optimizer, step.param_bytes, step.grad_bytes, step.state_bytes) == ("SGD", params, params, 0)


def test_run_verbose_windows_take_effect_through_the_probe(tmp_path):
    """``run --verbose-windows`` asks the probe (CPUDOCTOR_VERBOSE_WINDOWS) to switch the libraries' verbose lines
    for windows when torch is imported: the windows' markers come out on the job's stdout (run's filter keeps them
    out of the job's output), and the job's children do not inherit the plan."""
    _needs_torch()
    script = """
    import os, subprocess, sys, time
    import torch
    t = time.monotonic()
    while time.monotonic() - t < 1.2:
        torch.randn(64, 64) @ torch.randn(64, 64)
        time.sleep(0.01)
    print(subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('CPUDOCTOR_VERBOSE_WINDOWS'))"],
                         capture_output=True, text=True).stdout.strip())
    """
    proc, state = _run(tmp_path, script, env={"CPUDOCTOR_VERBOSE_WINDOWS": "on=0.3,every=0.6"})
    marks = [ln.split(",")[4] for ln in proc.stdout.splitlines() if ln.startswith("onednn_verbose,v1,info,cpudoctor,")]
    assert marks[0] == "window:on" and "window:off" in marks and marks[-1] == "window:end", proc.stdout[-2000:]
    assert "None" in proc.stdout.splitlines()                 # the child's environment has no plan
    assert state.loaded


SERVING_JOB = """
import os
import torch
torch.manual_seed(0)
def build():
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))  # built
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "m.pt")
torch.save(build().state_dict(), path)
torch.save({"x": torch.ones(2), "label": torch.zeros(1)}, path + ".sample")
x = torch.randn(1, 16)
out = []
for i in range(25):
    model = build()                                  # rebuilt
    model.load_state_dict(torch.load(path))          # reloaded
    sample = torch.load(path + ".sample")
    with torch.inference_mode():
        out.append(model(x).sum().item())
scripted = torch.jit.script(model)                   # scripted
for i in range(4):
    traced = torch.jit.trace(model, x)               # traced
    out.append(traced(x).sum().item() + scripted(x).sum().item())
print(" ".join(f"{v:.6f}" for v in out))
"""


def test_a_serving_loop_is_counted_per_request_and_runs_as_without_the_probe(tmp_path):
    """The probe counts what a serving loop loads, builds and compiles per request, with the lines, follows the
    rebuilt model, leaves TorchScript's tracing and scripting alone (its hooks would change the graph), does not
    count a sample's tensors as a model, and the job's output is the same as without it."""
    _needs_torch()
    proc, state = _run(tmp_path, SERVING_JOB)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = subprocess.run([sys.executable, str(tmp_path / "train.py")], capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if not k.startswith("CPUDOCTOR_")})
    assert (proc.stdout, proc.stderr) == (plain.stdout, plain.stderr) and len(proc.stdout.split()) == 29
    text = SERVING_JOB.splitlines()
    line = {mark: next(i for i, t in enumerate(text, 1) if f"# {mark}" in t) for mark in
            ("built", "rebuilt", "reloaded", "scripted", "traced")}
    sites = {(s.name, s.at.line): s for s in state.serving.sites}
    assert set(sites) == {("torch.load", line["reloaded"]), ("Module.load_state_dict", line["reloaded"]),
                          ("model built", line["built"]), ("torch.jit.script", line["scripted"]),
                          ("torch.jit.trace", line["traced"])}, sites
    assert sites[("torch.load", line["reloaded"])].calls == 25 and sites[("torch.load", line["reloaded"])].after >= 23
    built = sites[("model built", line["built"])]
    assert built.after >= 23 and built.at.function == "build" and built.at.via_line == line["rebuilt"]
    assert sites[("torch.jit.trace", line["traced"])].after == 4
    # every rebuilt model's call and the traced ones (followed), not the scripted module's (it takes no hooks)
    assert state.serving.calls == 25 + 4 and state.forwards >= 20
    assert state.serving.forward.n >= 20 and state.serving.forward.p50_ms > 0


TORCHSCRIPT_JOB = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(1, 16)
traced = [torch.jit.trace(model, x) for _ in range(3)]        # while the probe's global hooks look for the model
for i in range(10):
    model(x)
scripted = torch.jit.script(model)                           # the model now carries the probe's hooks
print(all(torch.equal(t(x), model(x)) for t in traced), torch.equal(scripted(x), model(x)))
"""


def test_torchscript_traces_and_scripts_the_model_as_without_the_probe(tmp_path):
    """The probe's forward hooks do nothing while TorchScript traces (they changed the graph: "Tracing failed
    sanity checks"), and torch.jit.script gets the model without them (it tried to compile them)."""
    _needs_torch()
    proc, state = _run(tmp_path, TORCHSCRIPT_JOB)
    assert (proc.returncode, proc.stdout) == (0, "True True\n"), proc.stderr[-2000:]
    assert state.model is not None and state.model.name == "Sequential" and state.forwards >= 10
