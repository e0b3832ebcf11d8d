"""Issue 15 classes 3 and 6, set up for real: crashes after import, forced instruction sets, thread pools.

A forced OpenBLAS core the CPU lacks is run for real under ``qemu-x86_64 -cpu
Haswell`` (an x86 CPU without AVX-512): numpy imports, its first matrix
product dies of SIGILL, and the finding must blame numpy's OpenBLAS, never
torch. The thread-pool situations run real torch jobs, a real DataLoader and
a real restricted affinity. Each test applies the fix CPU Doctor printed and
checks the problem is gone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cpudoctor.advisor import engine
from cpudoctor.advisor.process_rules import run_process_rules
from cpudoctor.advisor.rules.crashes import judge
from cpudoctor.probes import probe_topology
from cpudoctor.kits.child.runner import ChildSpec, run_child
from cpudoctor.probes.child.scripts import script_argv
from cpudoctor.probes.child.scripts import FOLDER as SCRIPTS
from cpudoctor.probes.process.inspect import inspect_process
from cpudoctor.probes.software.importcheck import to_import_check, to_order_check
from cpudoctor.probes.software.stack import _torch_build
from real_situations import child_command, clean_environ, live_report, need_cpus, need_module, run_shell

pytestmark = pytest.mark.slow


def _findings(report, code):
    return [f for f in engine.run_rules(report, only={code}, strict=True) if f.code == code]


def _host_openblas(environ: dict[str, str]) -> dict | None:
    result = run_child(ChildSpec(script_argv("blas_facts"), what="numpy", timeout=120, env=environ))
    pools = [p for p in result.data.get("numpy_blas") or [] if p.get("internal_api") == "openblas"]
    return pools[0] if pools else None


# ----------------------------------------------------------------- class 3: crashes after import


def _qemu_for_openblas() -> str:
    """qemu-x86_64 to run as a CPU without AVX-512, and a numpy that uses OpenBLAS; else the test skips."""
    need_module("numpy")
    qemu = shutil.which("qemu-x86_64")
    if qemu is None or platform.machine() != "x86_64":
        pytest.skip("needs qemu-x86_64 on an x86-64 machine to run as a CPU without AVX-512")
    if _host_openblas(clean_environ()) is None:
        pytest.skip("numpy here does not use OpenBLAS")
    return qemu


@pytest.mark.alongside          # qemu-emulated imports: nothing of this machine is measured
def test_forced_openblas_core_the_cpu_lacks_crashes_numpy_not_torch_and_unsetting_fixes_it():
    qemu = _qemu_for_openblas()
    environ = clean_environ(OPENBLAS_CORETYPE="SkylakeX")
    emulated = [qemu, "-cpu", "Haswell"]   # AVX2 and FMA, no AVX-512 (TCG has none)
    result = run_child(ChildSpec(emulated + script_argv("import_check", "--workload", "numpy"), what="import numpy",
                                 timeout=240, env=environ))
    check = to_import_check("numpy", "numpy", result)
    assert check.status == "ok", "the import itself works"
    assert check.workload_status == "crashed" and check.signal_name == "SIGILL"
    assert "OpenBLAS" in (check.workload_library or "") and "SkylakeX" in check.workload_library

    report = live_report(environ, children=False)
    report.cpu.flags = [f for f in report.cpu.flags if not f.startswith(("avx512", "amx"))]   # the emulated CPU
    report.software.import_checks = [check]
    report.software.children_ran = True
    [crash] = _findings(report, "KERNEL001")
    assert crash.severity == "error" and crash.title.startswith("numpy imports, then")
    assert "OPENBLAS_CORETYPE=SkylakeX" in crash.why and "torch" not in crash.title
    assert not [f for f in _findings(report, "ISA003") + _findings(report, "ISA004") if f.severity != "ok"]
    [forced] = [f for f in _findings(report, "ISAENV001") if "OPENBLAS_CORETYPE" in f.title]
    assert forced.severity == "error"

    # The printed fix, run in the same (emulated) place: numpy's first product now completes.
    [relaunch] = [line for line in crash.snippet.splitlines() if line.startswith("env -u ")]
    command = relaunch.replace("python train.py", " ".join(emulated) + " " + child_command(
        "import_check", "--workload", "numpy"))
    code, data, err = run_shell(command, {**environ, "OPENBLAS_NUM_THREADS": "1"}, timeout=400)
    assert code == 0, err[-500:]
    assert data["stage"] == "done" and "numpy" in data["workloads"]


@pytest.mark.alongside          # qemu-emulated imports: nothing of this machine is measured
def test_forced_openblas_core_kills_every_import_order_with_numpy_and_omp001_blames_no_openmp_runtime():
    """Issue 26: the doctor's import-order child dies in numpy's first product too; that is KERNEL001's cause."""
    qemu = _qemu_for_openblas()
    need_module("cv2")
    emulated = [qemu, "-cpu", "Haswell"]
    modules = ["numpy", "cv2"]

    def checks(environ):
        alone = [to_import_check(m, m, run_child(ChildSpec(emulated + script_argv("import_check", "--workload", m),
                                                           what=f"import {m}", timeout=240, env=environ)))
                 for m in modules]
        order = to_order_check(modules, run_child(ChildSpec(emulated + script_argv("import_check", "--workload",
                                                                                      *modules),
                                                            what="import numpy, then cv2", timeout=240, env=environ)))
        report = live_report(environ, children=False)
        report.cpu.flags = [f for f in report.cpu.flags if not f.startswith(("avx512", "amx"))]   # the emulated CPU
        report.software.import_checks, report.software.import_orders = alone, [order]
        report.software.children_ran = True
        return report, order

    report, order = checks(clean_environ(OPENBLAS_CORETYPE="SkylakeX"))
    assert order.status == "crashed" and order.stage == "workload numpy", order
    assert not [f for f in _findings(report, "OMP001") if f.severity != "ok"], "no OpenMP runtime is to blame"
    [crash] = _findings(report, "KERNEL001")
    assert "OPENBLAS_CORETYPE=SkylakeX" in crash.why

    # With each package fine alone, a SIGILL in the order is still an instruction, never two runtimes.
    report.software.import_checks = [dataclasses.replace(c, workload_status="ok" if c.workload_status else None)
                                     for c in report.software.import_checks]
    [omp] = _findings(report, "OMP001")
    assert "SIGILL" in omp.title and "not two OpenMP runtimes" in omp.why and "ecosystem" not in omp.fix

    # The fix KERNEL001 printed (unset the variable): the same order now runs on the same emulated CPU.
    fixed, order = checks(clean_environ())
    assert order.status == "ok", order.message
    assert [f.severity for f in _findings(fixed, "OMP001")] == ["ok"]


def test_forcing_a_lower_openblas_core_is_a_warning_and_unsetting_restores_the_cpus_best():
    need_module("numpy")
    baseline = _host_openblas(clean_environ())
    if baseline is None:
        pytest.skip("numpy here does not use OpenBLAS")
    from real_situations import live_report as _report

    flags = set(_report(clean_environ(), children=False).cpu.flags)
    lowest = judge("OPENBLAS_CORETYPE", "prescott", flags)
    if lowest is None or not lowest.lower:
        pytest.skip("this CPU's best OpenBLAS kernels are the oldest ones already")
    environ = clean_environ(OPENBLAS_CORETYPE="Prescott")
    report = live_report(environ)
    [warning] = [f for f in _findings(report, "ISAENV001") if "OPENBLAS_CORETYPE" in f.title]
    assert warning.severity == "warning" and "SSE" in warning.title
    forced = _host_openblas(environ)
    assert forced["architecture"] != baseline["architecture"], "the variable really changed the kernels"

    [relaunch] = [line for line in warning.snippet.splitlines() if line.startswith("env -u ")]
    code, data, err = run_shell(relaunch.replace("python train.py", child_command("blas_facts")), environ)
    assert code == 0, err
    [pool] = [p for p in data["numpy_blas"] if p["internal_api"] == "openblas"]
    assert pool["architecture"] == baseline["architecture"]


# ----------------------------------------------------------------- class 6: thread pools


def _affinity_wrapper(cpus: list[int], script: Path, *args: str) -> list[str]:
    """Run a child script on ``cpus`` only (what `taskset -c` does), without needing taskset."""
    code = (f"import os, runpy, sys; os.sched_setaffinity(0, {set(cpus)!r}); "
            f"sys.argv = [{str(script)!r}, *{list(args)!r}]; runpy.run_path({str(script)!r}, run_name='__main__')")
    return [sys.executable, "-c", code]


def test_interop_pool_sized_for_the_host_under_a_restricted_affinity():
    need_module("torch")
    cpus = need_cpus(2)
    one = [cpus[0]]
    result = run_child(ChildSpec(_affinity_wrapper(one, SCRIPTS / "torch_facts.py"), what="import torch",
                                 timeout=120, env=clean_environ()))
    build = _torch_build(result, None)
    assert build.status == "ok", build.error
    report = live_report(clean_environ(), children=False)
    report.software.torch = build
    report.topology.affinity.allowed_cpus = one
    report.topology.affinity.usable_cpus = 1
    [finding] = _findings(report, "THR004")
    if build.inter_op_threads <= 1:
        assert finding.severity == "ok"   # this torch sizes the pool from the affinity: nothing to fix
        return
    assert finding.severity == "warning" and f"{build.inter_op_threads} threads on 1 usable CPU" in finding.title

    # The printed Python, at the top of a script run on that one CPU.
    probe = finding.snippet + "\nprint(torch.get_num_interop_threads())\n"
    out = subprocess.run(_affinity_wrapper(one, Path("-"))[:2] + [
        f"import os; os.sched_setaffinity(0, {set(one)!r}); exec(compile({probe!r}, 'fix', 'exec'))"],
        capture_output=True, text=True, timeout=120, env=clean_environ())
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) <= 1


BUSY_JOB = """
import time, torch
a = torch.ones(512, 512)
end = time.time() + {seconds}
while time.time() < end:
    torch.mm(a, a)
"""


def _start_job(command: str, environ: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", f"exec {command}"], env=environ, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _cpu_seconds(pid: int) -> float:
    """User and system time ``pid`` used so far (all its threads), 0 when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_busy(pids: list[int], timeout: float = 90.0) -> None:
    """Until every job has torch mapped and has then run its matmul loop for a CPU-second: a condition, not
    a fixed pause (a busy machine only makes it come later)."""
    from conftest import wait_for

    def mapped(pid: int) -> bool:
        try:
            return "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return False

    wait_for(lambda: all(mapped(p) for p in pids), timeout, "the torch jobs to start", interval=0.3)
    start = {p: _cpu_seconds(p) for p in pids}
    wait_for(lambda: all(_cpu_seconds(p) >= start[p] + 1.0 for p in pids), timeout,
             "the torch jobs to run their loop", interval=0.3)


def _stop(jobs: list[subprocess.Popen]) -> None:
    for job in jobs:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except OSError:
            pass
        job.wait(timeout=10)


@pytest.mark.hardware
def test_two_training_jobs_each_sized_for_every_cpu_and_the_printed_split_fixes_it(tmp_path):
    need_module("torch")
    need_cpus(2)
    if shutil.which("taskset") is None:
        pytest.skip("the printed split uses taskset, which is not installed")
    script = tmp_path / "train.py"
    script.write_text(BUSY_JOB.format(seconds=60))
    environ = clean_environ()
    command = f"{sys.executable} {script}"
    jobs = [_start_job(command, environ) for _ in range(2)]
    try:
        _wait_busy([j.pid for j in jobs])
        topo = probe_topology(Path("/"))
        insp = inspect_process(jobs[0].pid, seconds=2.0, topology=topo)
        assert jobs[1].pid in [p.pid for p in insp.peers]
        # Other sessions may train on this machine too: judge the two jobs this test started.
        insp.peers = [p for p in insp.peers if p.pid == jobs[1].pid]
        [finding] = [f for f in run_process_rules(insp, topo, strict=True) if f.code == "PROC014"]
        assert finding.severity == "warning" and jobs[1].pid in finding.evidence["peers"]
        lines = finding.snippet.splitlines()
        ours = {lines[i].split(",")[0]: lines[i + 1] for i in range(0, len(lines) - 1, 2)}
        relaunches = [ours[f"# this job (PID {jobs[0].pid})"], ours[f"# PID {jobs[1].pid}"]]
        assert all("taskset -c" in line and "OMP_NUM_THREADS=" in line for line in relaunches)
        sets = [line.split("taskset -c ")[1].split()[0] for line in relaunches]
        assert sets[0] != sets[1]
    finally:
        _stop(jobs)

    # The printed relaunch lines, run as printed: each job on its own CPUs with threads that fit them.
    fixed = [_start_job(line, environ) for line in relaunches]
    try:
        _wait_busy([j.pid for j in fixed])
        insp = inspect_process(fixed[0].pid, seconds=2.0, topology=topo)
        assert fixed[1].pid not in [p.pid for p in insp.peers]
        for f in run_process_rules(insp, topo, strict=True):
            assert f.code != "PROC014" or fixed[1].pid not in f.evidence["peers"]
    finally:
        _stop(fixed)


@pytest.mark.hardware
def test_a_profiler_is_not_a_job_and_each_job_gets_one_answer(tmp_path):
    """Issue 40 item 8, for real: `py-spy record --native` attached to a training job maps libtorch_cpu.so (read-only,
    to read its symbols) and used a CPU: PROC014 counted it as a PyTorch job and printed a relaunch line for
    `py-spy record ...`; and for the inspected job PROC001 said "2 compute threads" right above PROC014's "CPU 0,
    1 thread". Now the profiler is no job, every relaunch line is a training job of the user's, and PROC001
    relaunches the job exactly as PROC014's split does. A job that runs no PyTorch gets no PROC014."""
    from cpudoctor.probes.process.stacks import find_pyspy
    from conftest import wait_for

    need_module("torch")
    usable = need_cpus(2)
    pyspy = find_pyspy()
    if pyspy is None or shutil.which("taskset") is None:
        pytest.skip("needs py-spy (the stack sampler's) and taskset")
    script = tmp_path / "train.py"
    script.write_text(BUSY_JOB.format(seconds=60))
    environ = clean_environ()
    oversized = dict(environ, OMP_NUM_THREADS=str(4 * len(usable)))    # this job oversubscribes itself: PROC001
    jobs = [_start_job(f"{sys.executable} {script}", oversized), _start_job(f"{sys.executable} {script}", environ)]
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    profiler = None
    try:
        _wait_busy([j.pid for j in jobs])
        profiler = subprocess.Popen([pyspy, "record", "--native", "--pid", str(jobs[1].pid), "--duration", "60",
                                     "--rate", "200", "-o", str(tmp_path / "profile.svg")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: "libtorch_cpu" in Path(f"/proc/{profiler.pid}/maps").read_text(), 60,
                 "py-spy to map libtorch_cpu.so", interval=0.3)
        topo = probe_topology(Path("/"))
        mine = {jobs[1].pid, profiler.pid}
        insp = inspect_process(jobs[0].pid, seconds=2.0, topology=topo)
        sleeper = inspect_process(idle.pid, seconds=1.0, topology=topo)
    finally:
        _stop(jobs + ([profiler] if profiler else []))
        idle.kill()
        idle.wait()
    seen = [p.pid for p in insp.peers]
    assert jobs[1].pid in seen and profiler.pid not in seen, insp.peers
    insp.peers = [p for p in insp.peers if p.pid in mine]       # other sessions may train on this machine too
    found = {f.code: f for f in run_process_rules(insp, topo, strict=True)}
    proc14 = found["PROC014"]
    assert "py-spy" not in proc14.snippet and "py-spy" not in proc14.why
    lines = proc14.snippet.splitlines()
    ours = {lines[k].split(",")[0]: lines[k + 1] for k in range(0, len(lines) - 1, 2)}
    assert set(ours) == {f"# this job (PID {jobs[0].pid})", f"# PID {jobs[1].pid}"}, proc14.snippet
    this = ours[f"# this job (PID {jobs[0].pid})"]
    assert "PROC009" in found, sorted(found)            # OMP_NUM_THREADS above the CPUs; PROC001 when not contended
    for code in {"PROC001", "PROC009"} & set(found):
        assert found[code].snippet == this, (code, found[code].snippet, this)
    assert "PROC014" not in {f.code for f in run_process_rules(sleeper, topo, strict=True)}, sleeper.peers


DATALOADER = """
import json, os, sys
sys.path.insert(0, {scripts!r})
import native_pools
import numpy
import torch
try:
    import cv2
except ImportError:
    cv2 = None


class Pools(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        blas = [p["num_threads"] for p in native_pools.native_pools() if p["user_api"] == "blas"]
        return json.dumps({{"blas": blas, "torch": torch.get_num_threads(),
                            "cv2": cv2.getNumThreads() if cv2 else None}})


dataset = Pools()
if {fixed!r}:
    exec(compile(open({snippet!r}).read(), "printed fix", "exec"))
else:
    loader = torch.utils.data.DataLoader(dataset, num_workers=2)
print(json.dumps([json.loads(item[0]) for item in loader]))
"""


def test_dataloader_workers_get_one_thread_per_pool_from_the_printed_worker_init_fn(tmp_path):
    need_module("torch")
    need_module("numpy")
    need_cpus(2)
    report = live_report(clean_environ())
    [finding] = _findings(report, "THR005")
    if finding.severity == "ok":
        pytest.skip("numpy's BLAS runs one thread here: workers inherit no pool")
    assert finding.severity == "info" and "cv2.setNumThreads(1)" in finding.snippet
    snippet = tmp_path / "fix.py"
    snippet.write_text(finding.snippet)

    def workers(fixed: bool) -> list[dict]:
        script = tmp_path / f"loader_{fixed}.py"
        script.write_text(textwrap.dedent(DATALOADER).format(scripts=str(SCRIPTS), fixed=fixed, snippet=str(snippet)))
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                             env=clean_environ())
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    before = workers(False)
    assert any(max(w["blas"] or [1]) > 1 or (w["cv2"] or 1) > 1 for w in before), before
    after = workers(True)
    for w in after:
        assert w["torch"] == 1 and all(n == 1 for n in w["blas"]) and w["cv2"] in (None, 1), after


def test_a_gemm_benchmark_that_dies_in_numpys_openblas_is_blamed_on_numpy(monkeypatch):
    """The lab's GEMM job says which library it is about to time; a SIGILL there names numpy, not torch."""
    qemu = _qemu_for_openblas()
    from cpudoctor.lab.runner import Job, job_command

    for name in [k for k in os.environ if k.startswith(("OMP_", "OPENBLAS_", "MKL_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")
    argv = [qemu, "-cpu", "Haswell"] + job_command(
        "gemm", {"size": 128, "backends": ["numpy-fp64"], "threads": [1], "min_seconds": 0.01})
    outcome = Job(argv, what="the gemm job").start().wait(300)
    assert outcome.status == "crashed" and outcome.diagnosis.signal_name == "SIGILL"
    assert outcome.stage_library == "numpy"
    assert "running numpy" in outcome.message and "OPENBLAS_CORETYPE=SkylakeX" in outcome.message
    assert "torch" not in outcome.message
