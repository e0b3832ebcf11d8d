"""Every word right on the job side (issue 41): real jobs run by ``cpudoctor run``, each a situation a user met.

The jobs here need no torch and last a second or two: a job that only sleeps, a job that dies of a signal.
"""

from __future__ import annotations

import io
import platform
import signal
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


@pytest.mark.parametrize("signame", ["SIGILL", "SIGSEGV", "SIGBUS", "SIGKILL"])
def test_a_job_that_dies_of_a_signal_is_reported_as_crashed(signame):
    """Issue 41 item 1, the issue's own command: a job that died of SIGILL (exit 132) was "idle ... sample
    longer". It is reported as crashed: the signal, what it means, no breakdown verdict, no EVID009."""
    code = f"import os, signal, time; time.sleep(1); os.kill(os.getpid(), signal.{signame})"
    proc = run_cli(code)
    assert proc.returncode == 128 + getattr(signal, signame)
    report = proc.stderr[proc.stderr.index("cpudoctor run:"):]
    assert f"died of {signame}" in report.splitlines()[1]
    assert "it was idle" not in report and "Sample longer" not in report and "EVID009" not in report
    assert f"[✗] EVID023 The job crashed: {signame}" in report
    meaning = {"SIGILL": "instruction this\n", "SIGSEGV": "Segmentation fault", "SIGBUS": "shared memory",
               "SIGKILL": "out-of-memory"}[signame]
    assert " ".join(meaning.split()) in " ".join(report.split())
    if signame != "SIGKILL":      # Python's fault handler, switched on by run, printed the stack and run kept it
        assert "Fatal Python error" in proc.stderr and 'File "<string>", line 1' in report


def test_a_job_that_exits_with_an_error_is_not_a_crash():
    proc = run_cli("import sys; sys.exit(3)")
    assert proc.returncode == 3 and "exited with code 3" in proc.stderr and "EVID023" not in proc.stderr


@pytest.mark.slow
@pytest.mark.alongside
def test_sigill_in_numpy_on_an_older_cpu_names_numpy_its_floor_and_the_release_that_runs(tmp_path):
    """Issue 41 items 1 and 5, for real: the job imports NumPy 2.4 on QEMU's kvm64 (no x86-64-v2) and dies of
    SIGILL. The run, judged against that CPU (a kvm64 guest's tree), names numpy, its version and floor, and the
    release that runs there (as ISA003 does), not "reinstall it in a clean virtual environment"."""
    from qemu_guest import QEMU, cpuid_under, guest_tree
    from real_situations import clean_environ, need_module

    if QEMU is None or platform.machine() != "x86_64":
        pytest.skip("needs qemu-x86_64 (qemu-user) on an x86-64 machine")
    need_module("numpy")
    import numpy

    if tuple(int(x) for x in numpy.__version__.split(".")[:2]) < (2, 4):
        pytest.skip(f"needs NumPy 2.4 or later (x86-64-v2), this is {numpy.__version__}")
    from cpudoctor.jobrun import Machine, run_job
    from cpudoctor.pipeline import Source

    machine = Machine.of_source(Source.tree(guest_tree(tmp_path / "guest", cpuid_under("kvm64"))))
    err = io.BytesIO()
    obs, findings = run_job([QEMU, "-cpu", "kvm64", sys.executable, "-c", "import time; time.sleep(0.5); import numpy"],
                            machine=machine, env=clean_environ(), stdout=io.BytesIO(), stderr=err)
    assert obs.crash is not None and obs.crash.signal == "SIGILL", (obs.exit_code, err.getvalue()[-2000:])
    assert (obs.crash.module, obs.crash.distribution, obs.crash.version) == ("numpy", "numpy", numpy.__version__)
    assert b"Fatal Python error: Illegal instruction" in err.getvalue()     # the job's own stderr kept its report
    [f] = [f for f in findings if f.code == "EVID023"]
    assert f"NumPy {numpy.__version__} needs x86-64-v2" in f.title and "numpy/" in f.why
    assert f.snippet == "python -m pip install 'numpy<2.4'" and "numpy<2.4" in f.fix
    assert "clean virtual environment" not in f.fix and not [g for g in findings if g.code == "EVID009"]


def test_a_shell_that_reports_its_command_s_crash_is_a_crash_too():
    """`run -- bash -c "python train.py"`: bash exits 139 when its command died of SIGSEGV."""
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--", "bash", "-c", f'{sys.executable} -c "{code}"; exit $?'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 139
    assert "exited with code 139: its command died of SIGSEGV (Segmentation fault)" in proc.stderr
    assert "EVID023" in proc.stderr and "Fatal Python error: Segmentation fault" in proc.stderr


def test_the_thread_fix_sets_every_pool_s_count_the_shell_exports():
    """Issue 41 item 12: in a shell that exports OMP_NUM_THREADS=7 MKL_NUM_THREADS=3, EVID001's `OMP_NUM_THREADS=1
    python train.py` left MKL's variable in force (PyTorch takes MKL_NUM_THREADS over OMP_NUM_THREADS) and the job
    still waited. The fix sets every count the job's pools read, and unsets a count it cannot write into."""
    from cpudoctor.advisor.evidence_rules import Evidence, run_evidence_rules
    from cpudoctor.model.breakdown import ProcessTime, Share, ThreadTime, TimeBreakdown

    def evid001(env: dict[str, str]):
        shares = [Share("openmp_wait", 6.0, 0.6, 60), Share("compute", 2.0, 0.2, 20), Share("python", 2.0, 0.2, 20)]
        driver = ThreadTime(10, 10, "python", "driver", "stacks", samples=100, seconds=10.0, shares=shares)
        main = ProcessTime(10, 1, "python", "python train.py", "main", True, True, affinity=[0, 1],
                           thread_vars=dict(env), samples=100, seconds=10.0, shares=shares, threads=[driver])
        bd = TimeBreakdown(10, window_s=10.0, samples=100, seconds=10.0, shares=shares, processes=[main],
                           driver="10/10", driver_samples=100, job_cpus=1.9, others_cpus=0.0, online_cpus=2, cpus=2)
        [f] = run_evidence_rules(Evidence(command="python train.py", pid=10, breakdown=bd, env=dict(env)), {"EVID001"})
        return f

    shell = evid001({"OMP_NUM_THREADS": "7", "MKL_NUM_THREADS": "3"})
    assert shell.snippet == "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python train.py"
    domains = evid001({"MKL_DOMAIN_NUM_THREADS": "MKL_BLAS=3", "GOTO_NUM_THREADS": "4"})
    assert domains.snippet == ("env -u MKL_DOMAIN_NUM_THREADS OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "
                               "OPENBLAS_NUM_THREADS=1 GOTO_NUM_THREADS=1 python train.py")
    assert "MKL_DOMAIN_NUM_THREADS unset" in domains.fix


def _compiling_breakdown(share: float = 0.98):
    from cpudoctor.model.breakdown import ProcessTime, Share, ThreadTime, TimeBreakdown

    shares = [Share("compile", 20 * share, share, int(200 * share)), Share("python", 20 * (1 - share), 1 - share, 4)]
    driver = ThreadTime(10, 10, "python", "driver", "stacks", samples=200, seconds=20.0, shares=shares)
    main = ProcessTime(10, 1, "python", "python train.py", "main", True, True, affinity=[0, 1], samples=200,
                       seconds=20.0, shares=shares, threads=[driver])
    compilers = [ProcessTime(20 + k, 10, "cc1plus", "cc1plus", "compiler", False, False, samples=20, seconds=2.0,
                             shares=[Share("compile", 2.0, 1.0, 20)]) for k in range(9)]
    return TimeBreakdown(10, window_s=20.0, samples=200, seconds=20.0, shares=shares, processes=[main, *compilers],
                         driver="10/10", driver_samples=200, job_cpus=0.4, others_cpus=0.0, online_cpus=2, cpus=2)


def test_a_job_that_compiles_is_not_waiting_on_data():
    """Issue 41 items 2 and 3: PROC008 said "the job is waiting ... I/O, a lock ... data loading" for a job whose
    own breakdown shows torch.compile at 98 % and nine compiler processes; a run whose --seconds ended inside the
    first compile found nothing. Now: no PROC008, and EVID024 says the window ended inside the compile and what
    to do."""
    from cpudoctor.jobrun import Machine, diagnose
    from cpudoctor.model.evidence import JobEvidence
    from cpudoctor.model.inspection import Inspection, ThreadInfo

    threads = [ThreadInfo(10 + k, "python", "S", cpu_percent=3.0) for k in range(8)]
    insp = Inspection(pid=10, name="python", cmdline="python train.py", argv=["python", "train.py"], status="ok",
                      window_s=20.0, samples=40, num_threads=8, threads=threads, cpu_percent=20.0, usable_cpus=2,
                      affinity=[0, 1], runnable_mean=0.3, wait_percent=2.0, children_cpu_percent=180.0,
                      time=_compiling_breakdown())
    found = {f.code: f for f in diagnose(JobEvidence.of_inspection(insp), Machine())}
    assert "PROC008" not in found and "EVID009" not in found, sorted(found)
    f = found["EVID024"]
    assert "still compiling (98 % of the time)" in f.title and "9 compiler processes" in f.why
    assert "inspected for 20 s" in f.why and f.snippet.startswith("cpudoctor inspect 10")
    ran = diagnose(JobEvidence(command="python train.py", pid=10, breakdown=_compiling_breakdown(),
                               ended_by="seconds"), Machine())
    [g] = [g for g in ran if g.code == "EVID024"]
    assert "stopped after 20 s" in g.why and g.snippet == "cpudoctor run --seconds 90 -- python train.py"
    assert not [g for g in diagnose(JobEvidence(command="python train.py", pid=10, breakdown=_compiling_breakdown(),
                                                ended_by="exit"), Machine()) if g.code == "EVID024"]
