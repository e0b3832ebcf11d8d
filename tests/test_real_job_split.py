"""PROC014 set up for real (issue 26): jobs started side by side, inspected, the printed split run as printed.

Each "training job" is a real process that maps a library file named
``libtorch_cpu.so`` (what the inspector looks for) and keeps one CPU busy; it
writes what it really got (its argv, CPU affinity, OMP_NUM_THREADS) to a
file when it starts. The jobs are started with taskset, a hidden argument on
the command line (``--api-key``), as another user (setpriv, when this runs as
root) and as a CPU Doctor child (its child token in the environment). The
finding must say what the commands do, give commands only for the user's own
jobs, and every command must paste into bash: as printed it stops and names
the hidden argument; with it supplied the job gets exactly the CPUs, the
threads and the arguments the text promised.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import wait_for
from real_situations import clean_environ, need_cpus

from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.kits.child.tree import environment_with_token, new_token
from cpudoctor.probes import probe_topology
from cpudoctor.probes.process.inspect import inspect_process

pytestmark = pytest.mark.slow

JOB = """
import json, mmap, os, sys, time
out, lib = sys.argv[1], sys.argv[2]
with open(lib, "rb") as f:
    mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC)   # mapped as code, as torch maps its library
with open(os.path.join(out, f"{os.getpid()}.json"), "w") as f:
    json.dump({"argv": sys.argv[1:], "cpus": sorted(os.sched_getaffinity(0)),
               "omp": os.environ.get("OMP_NUM_THREADS")}, f)
end = time.time() + 120
while time.time() < end:
    pass
"""


@pytest.fixture
def place():
    """A folder every user may read (the job script, its fake library, what the jobs report)."""
    if shutil.which("taskset") is None:
        pytest.skip("the printed split uses taskset, which is not installed")
    folder = Path(tempfile.mkdtemp(prefix="cpudoctor-split-", dir="/tmp"))
    folder.chmod(0o777)
    (folder / "job.py").write_text(JOB)
    (folder / "libtorch_cpu.so").write_bytes(b"\0" * 4096)
    for f in folder.iterdir():
        f.chmod(0o644)
    started: list[subprocess.Popen] = []
    yield folder, started
    for job in started:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except OSError:
            pass
        job.wait(timeout=10)
    shutil.rmtree(folder, ignore_errors=True)


def _start(place, argv: list[str], environ: dict[str, str]) -> subprocess.Popen:
    folder, started = place
    job = subprocess.Popen(argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           start_new_session=True)
    started.append(job)
    return job


def _job_argv(folder: Path, *extra: str, python: str = sys.executable) -> list[str]:
    return [python, str(folder / "job.py"), str(folder), str(folder / "libtorch_cpu.so"), *extra]


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _python_for_nobody() -> str:
    """An interpreter the unprivileged user may run (this venv's may live in root's 0700 home)."""
    for python in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if python and subprocess.run([*AS_NOBODY, python, "-c", "pass"], capture_output=True, timeout=60).returncode == 0:
            return python
    pytest.skip("no Python interpreter the unprivileged user may run")


def _one_cpu_per_core(topo, n: int) -> list[int]:
    """``n`` usable CPUs on different physical cores (the split gives one thread per core), else skip."""
    usable = set(need_cpus(n))
    picked = []
    for core in topo.core_list or []:
        inside = sorted(usable & set(core.cpus))
        if inside:
            picked.append(inside[0])
    if not topo.core_list:
        picked = sorted(usable)
    if len(picked) < n:
        pytest.skip(f"needs {n} usable CPUs on different cores, this process has {len(picked)}")
    return picked[:n]


def _report(folder: Path, pid: int) -> dict:
    path = folder / f"{pid}.json"
    wait_for(lambda: path.exists() and path.stat().st_size > 0, timeout=60, what=f"job {pid} to start")
    return json.loads(path.read_text())


def _inspect(pid: int, mine: list[int], topo):
    wait_for(lambda: all("libtorch_cpu" in Path(f"/proc/{p}/maps").read_text() for p in mine), timeout=60,
             what="the jobs to map their library")
    insp = inspect_process(pid, seconds=1.5, topology=topo)
    # Other sessions may train on this machine too: judge the jobs this test started.
    insp.peers = [p for p in insp.peers if p.pid in mine]
    assert sorted(p.pid for p in insp.peers) == sorted(set(mine) - {pid}), "every job started is seen as a peer"
    [finding] = [f for f in run_process_rules(insp, topo, strict=True) if f.code == "PROC014"]
    return finding


def _commands(snippet: str) -> dict[int | str, str]:
    """{pid: relaunch line} from the snippet's ``# PID n, ...:`` / ``# this job (PID n), ...:`` headers."""
    lines = snippet.splitlines()
    out = {}
    for head, line in zip(lines, lines[1:]):
        m = re.match(r"# (?:this job \(PID (\d+)\)|PID (\d+)), .*:$", head)
        if m:
            out[int(m.group(1) or m.group(2))] = line
    return out


def _promised(snippet: str) -> dict[int, tuple[list[int], int]]:
    """{pid: (CPUs, threads)} as the snippet's headers say them in words."""
    out = {}
    for m in re.finditer(r"# (?:this job \(PID (\d+)\)|PID (\d+)), CPUs? ([0-9,-]+), (\d+) threads?:", snippet):
        cpus = []
        for part in m.group(3).split(","):
            lo, _, hi = part.partition("-")
            cpus += list(range(int(lo), int(hi or lo) + 1))
        out[int(m.group(1) or m.group(2))] = (cpus, int(m.group(4)))
    return out


def _relaunch(place, line: str, environ: dict[str, str], argv: list[str] | None = None) -> subprocess.Popen:
    """The printed line run by bash as pasted, hidden arguments supplied from the job's real ``argv``."""
    pids = re.findall(r"JOB(\d+)_ARG(\d+):", line)
    supplied = {f"JOB{pid}_ARG{n}": (argv or [])[int(n)] for pid, n in pids if argv}
    return _start(place, ["bash", "-c", f"exec {line}"], {**environ, **supplied})


@pytest.mark.hardware
def test_a_job_pinned_to_one_cpu_keeps_it_and_the_other_jobs_get_the_rest(place):
    topo = probe_topology(Path("/"))
    cpus = _one_cpu_per_core(topo, 2)
    folder, _ = place
    environ = clean_environ()
    pinned = _start(place, ["taskset", "-c", str(cpus[0]), *_job_argv(folder)], environ)
    other = _start(place, ["taskset", "-c", ",".join(map(str, cpus)),
                           *_job_argv(folder, "--api-key", "sk-live-1234")], environ)
    finding = _inspect(pinned.pid, [pinned.pid, other.pid], topo)

    promised = _promised(finding.snippet)
    assert set(promised) == {pinned.pid, other.pid}
    assert promised[pinned.pid][0] == [cpus[0]], "the pinned job keeps its CPU"
    assert cpus[0] not in promised[other.pid][0], "nobody else is pinned onto it"
    assert "its own" in finding.fix and finding.evidence["own_jobs"] == [pinned.pid, other.pid]

    # Pasted as printed, the line with a hidden argument starts nothing and names what is missing.
    commands = _commands(finding.snippet)
    assert "<redacted>" not in finding.snippet
    hidden = subprocess.run(["bash", "-c", commands[other.pid]], env=environ, capture_output=True, text=True,
                            timeout=60)
    assert hidden.returncode != 0 and "hidden by CPU Doctor" in hidden.stderr
    assert "the value of --api-key" in finding.fix and "the value of --api-key" in commands[other.pid]

    # With the hidden values supplied (the fix names each variable), every job runs on exactly the CPUs and
    # threads the words promised, with its own arguments.
    originals = {pinned.pid: _job_argv(folder), other.pid: _job_argv(folder, "--api-key", "sk-live-1234")}
    for job in (pinned, other):
        os.killpg(job.pid, signal.SIGKILL)
    for pid, line in commands.items():
        assert all(f"JOB{pid}_ARG{n}" in finding.fix for n in re.findall(rf"JOB{pid}_ARG(\d+):", line))
        got = _report(folder, _relaunch(place, line, environ, originals[pid]).pid)
        assert got["cpus"] == promised[pid][0] and got["omp"] == str(promised[pid][1]), (line, got)
        assert got["argv"] == originals[pid][2:], "the job got its own arguments back"


@pytest.mark.hardware
def test_more_jobs_than_cpus_get_one_thread_each_and_the_words_say_they_take_turns(place):
    topo = probe_topology(Path("/"))
    cpus = _one_cpu_per_core(topo, 2)
    folder, _ = place
    environ = clean_environ()
    limit = ["taskset", "-c", ",".join(map(str, cpus))]
    jobs = [_start(place, [*limit, *_job_argv(folder)], environ) for _ in range(len(cpus) + 1)]
    finding = _inspect(jobs[0].pid, [j.pid for j in jobs], topo)

    promised = _promised(finding.snippet)
    assert set(promised) == {j.pid for j in jobs}
    assert all(threads == 1 and len(on) == 1 for on, threads in promised.values())
    assert "its own" not in finding.fix and "take turns" in finding.fix
    assert f"{len(jobs)} jobs of yours and {len(cpus)} CPUs" in finding.fix
    for job in jobs:
        os.killpg(job.pid, signal.SIGKILL)
    for pid, line in _commands(finding.snippet).items():
        got = _report(folder, _relaunch(place, line, environ, _job_argv(folder)).pid)
        assert got["cpus"] == promised[pid][0] and got["omp"] == "1", line


@pytest.mark.hardware
def test_no_relaunch_for_another_users_job_or_a_cpu_doctor_lab_job(place):
    topo = probe_topology(Path("/"))
    cpus = _one_cpu_per_core(topo, 2)
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("starting a job as another user needs root and setpriv")
    folder, _ = place
    environ = clean_environ(OMP_NUM_THREADS="2")
    limit = ["taskset", "-c", ",".join(map(str, cpus))]
    mine = _start(place, [*limit, *_job_argv(folder)], environ)
    theirs = _start(place, [*limit, *AS_NOBODY, *_job_argv(folder, python=_python_for_nobody())], environ)
    helper = _start(place, [*limit, *_job_argv(folder)], environment_with_token(environ, new_token()))
    finding = _inspect(mine.pid, [mine.pid, theirs.pid, helper.pid], topo)

    assert finding.evidence["own_jobs"] == [mine.pid]
    assert finding.evidence["other_users_jobs"] == [theirs.pid]
    assert finding.evidence["cpudoctor_jobs"] == [helper.pid]
    assert set(_commands(finding.snippet)) == {mine.pid}, "commands only for the user's own job"
    assert f"PID {theirs.pid} belongs to another user" in finding.fix
    assert f"PID {helper.pid} is a CPU Doctor lab job" in finding.fix
    promised = _promised(finding.snippet)[mine.pid]
    os.killpg(mine.pid, signal.SIGKILL)
    got = _report(folder, _relaunch(place, _commands(finding.snippet)[mine.pid], environ, _job_argv(folder)).pid)
    assert (got["cpus"], got["omp"]) == (promised[0], str(promised[1]))
