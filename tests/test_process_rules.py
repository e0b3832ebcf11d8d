"""Process rules: one firing and one quiet inspection per rule, and the relaunch commands."""

from __future__ import annotations

import dataclasses

import pytest

from cpudoctor.advisor import process_rules as pr
from cpudoctor.advisor.engine import REPORT_RULES, RuleDefinitionError
from cpudoctor.model.inspection import ChildProcess, Inspection, NativeLib, ThreadInfo
from cpudoctor.probes.process.inspect import inspect_process, place_threads
from cpudoctor.model import Topology
from inspect_fakes import FakeProc, StepClock, two_ccx_topology

GOMP = NativeLib("libgomp.so.1", "openmp", "libgomp", "gomp", "torch")
IOMP = NativeLib("libiomp5.so", "openmp", "libiomp5", "iomp", "intel_openmp")


def healthy(**kw) -> Inspection:
    """A well-behaved 2-thread job on one CCX of the 8-CPU test topology."""
    threads = [
        ThreadInfo(100, "python", "R", cpu_percent=95.0, last_cpu=0, cpus_seen=[0]),
        ThreadInfo(101, "python", "R", cpu_percent=90.0, last_cpu=1, cpus_seen=[1]),
        ThreadInfo(102, "python", "S", cpu_percent=0.0, last_cpu=5, cpus_seen=[5]),
    ]
    base = dict(pid=100, name="python", cmdline="python train.py --epochs 3", is_python=True, window_s=2.0,
                samples=21, num_threads=3, threads=threads, cpu_percent=185.0, runnable_mean=2.0, runnable_max=2,
                wait_percent=3.0, migrations=0, affinity=list(range(8)), usable_cpus=8,
                env={"OMP_NUM_THREADS": "2"}, env_readable=True, libraries=[GOMP], libraries_readable=True,
                rss_bytes=800 << 20, swap_bytes=0, major_faults=0, major_faults_per_s=0.0)
    base.update(kw)
    insp = Inspection(**base)
    place_threads(insp, two_ccx_topology())
    return insp


def codes(insp: Inspection, only: str | None = None, topo: Topology | None = None) -> list[str]:
    found = pr.run_process_rules(insp, topo if topo is not None else two_ccx_topology(),
                                 only={only} if only else None, strict=True)
    return [f.code for f in found]


def test_healthy_job_has_no_findings():
    assert codes(healthy()) == []


def test_every_rule_documented_and_codes_stable():
    rules = pr.process_rules()
    assert [r.code for r in rules] == [f"PROC{n:03d}" for n in range(1, 15)]
    assert len({r.symbol for r in rules}) == len(rules)
    for r in rules:
        assert set(r.sections()) == {"What it checks", "Why it matters", "Fix"}, r.code
        assert pr.resolve(r.symbol) is r and pr.resolve(r.code.lower()) is r


def test_explain_text():
    from cpudoctor.advisor.engine import UnknownRuleError
    from cpudoctor.render.rules import explain_text

    text = explain_text("proc005", pr.PROCESS_RULES).rstrip("\n")
    # Same layout as the report rules' explain text: "CODE (symbol) — title", underline, wrapped sections.
    assert text.startswith("PROC005 (two-openmp-runtimes) — Two OpenMP runtimes loaded in one process\n===")
    assert "\nWhy it matters:\n  Each runtime keeps its own thread pool" in text
    assert max(len(line) for line in text.splitlines()) <= 90
    assert text.endswith("Docs: docs/process_rules.md#proc005")
    with pytest.raises(UnknownRuleError):
        explain_text("ISA001", pr.PROCESS_RULES)


def test_codes_and_symbols_unique_across_both_rule_sets():
    """`cpudoctor explain` looks a code or symbol up in both sets: no name may mean two rules."""
    procs, reports = pr.process_rules(), REPORT_RULES.all()
    assert not {r.code for r in procs} & {r.code for r in reports}
    assert not {r.symbol for r in procs} & {r.symbol for r in reports}


def test_process_rules_share_the_report_rules_conventions():
    with pytest.raises(RuleDefinitionError, match="PROC and 3 digits"):
        pr.proc_rule("ISA777", "x-y", category="threads", severity="info", title="x")(lambda ctx: [])
    with pytest.raises(RuleDefinitionError, match="already used by PROC007"):
        @pr.proc_rule("PROC998", "swapping", category="memory", severity="info", title="x")
        def dup(ctx):
            """What it checks: a.

            Why it matters: b.

            Fix: c.
            """
            return []
    with pytest.raises(RuleDefinitionError, match="unknown category"):
        pr.proc_rule("PROC997", "x-y", category="gpu", severity="info", title="x")(lambda ctx: [])
    # Categories select rules in --only, as for the report rules.
    insp = healthy(swap_bytes=512 << 20, major_faults_per_s=40.0)
    assert codes(insp, "memory") == ["PROC007"]
    assert "PROC998" not in {r.code for r in pr.process_rules()}


def test_registration_refuses_missing_doc_sections():
    with pytest.raises(RuleDefinitionError, match="lacks"):
        @pr.proc_rule("PROC999", "bad-rule", category="threads", severity="info", title="x")
        def bad(ctx):
            """What it checks: only this."""
            return []


# --- PROC001 oversubscribed ---

def test_oversubscribed_fires_with_relaunch():
    insp = healthy(runnable_mean=9.5, runnable_max=12, wait_percent=480.0, num_threads=12,
                   env={"OMP_NUM_THREADS": "12"})
    [f] = pr.run_process_rules(insp, two_ccx_topology(), only={"PROC001"}, strict=True)
    assert f.severity == "warning" and f.category == "threads" and "9.5 runnable threads on 8" in f.title
    assert f.snippet == ("env OMP_NUM_THREADS=8 MKL_NUM_THREADS=8 OPENBLAS_NUM_THREADS=8 "
                         "python train.py --epochs 3")
    assert f.evidence["usable_cpus"] == 8 and f.docs == "docs/process_rules.md#proc001"


def test_oversubscribed_error_at_double_and_quiet_without_waits():
    assert pr.run_process_rules(healthy(runnable_mean=17.0, wait_percent=900.0), two_ccx_topology(),
                                only={"PROC001"})[0].severity == "error"
    # Many runnable by sampling but no run-queue wait measured: not oversubscribed.
    assert codes(healthy(runnable_mean=9.0, wait_percent=10.0), "PROC001") == []


def test_oversubscribed_leaves_cpus_for_workers():
    kids = [ChildProcess(200 + i, "python", threads=1, cpu_percent=20.0) for i in range(3)]
    insp = healthy(runnable_mean=12.0, wait_percent=300.0, children=kids, children_threads=3)
    [f] = pr.run_process_rules(insp, two_ccx_topology(), only={"PROC001"})
    assert "OMP_NUM_THREADS=5 " in f.snippet and "leaving 3 CPUs for the DataLoader workers" in f.fix


# --- PROC002 / PROC003 spread ---

def spread() -> Inspection:
    threads = [
        ThreadInfo(100, "python", "R", cpu_percent=95.0, last_cpu=0, cpus_seen=[0]),
        ThreadInfo(101, "python", "R", cpu_percent=90.0, last_cpu=2, cpus_seen=[1, 2]),
    ]
    return healthy(threads=threads)


def test_spread_over_ccx_and_numa_fire_with_pinning():
    found = {f.code: f for f in pr.run_process_rules(spread(), two_ccx_topology(), strict=True)}
    ccx, numa = found["PROC002"], found["PROC003"]
    # Two busy threads fit in CCX 0 (cores 0 and 1 -> CPUs 0,1; siblings 4,5 left out).
    # The prefix comes from advisor.pinning (numactl on this 2-node topology), the env and command from us.
    topo = two_ccx_topology()
    assert ccx.snippet.startswith(pr.launch_prefix(topo, [0, 1]) + " env OMP_NUM_THREADS=2 ")
    # The CPU set comes from taskset/numactl, not from OpenMP binding (which would pin the main thread and,
    # through fork, every DataLoader worker to one CPU).
    assert "0-1" in ccx.snippet.split(" env ")[0] and "OMP_PLACES" not in ccx.snippet
    assert ccx.snippet.endswith("python train.py --epochs 3")
    assert numa.snippet.startswith(pr.launch_prefix(topo, [0, 1], numa_node=0) + " env OMP_NUM_THREADS=2")
    assert "--membind=0" in numa.snippet
    assert ccx.evidence["domains_used"] == [0, 1]


def test_spread_names_ccx_only_on_zen():
    """An Intel (or K10 Opteron) L3 domain is not a CCX: the finding says "L3 domain" there."""
    for vendor, family, word in (("AuthenticAMD", 0x19, "CCX"), ("GenuineIntel", 6, "L3 domain"),
                                 ("AuthenticAMD", 0x10, "L3 domain")):
        topo = two_ccx_topology()
        topo.vendor, topo.cpu_family = vendor, family
        f = next(f for f in pr.run_process_rules(spread(), topo, strict=True) if f.code == "PROC002")
        assert f"Each {word} has its own L3" in f.why, (vendor, family)
        assert ("CCX" in f.title + f.why) == (word == "CCX"), (vendor, family)


def test_spread_quiet_when_job_does_not_fit_one_ccx():
    threads = [ThreadInfo(100 + i, "python", "R", cpu_percent=90.0, last_cpu=c, cpus_seen=[c])
               for i, c in enumerate([0, 1, 2])]     # 3 busy threads > 2 cores per CCX
    assert codes(healthy(threads=threads), "PROC002") == []
    assert codes(healthy(threads=threads), "PROC003") == []


def test_spread_quiet_on_one_ccx_machine():
    topo = two_ccx_topology()
    topo = dataclasses.replace(topo, l3_domains=topo.l3_domains[:1], numa_nodes=topo.numa_nodes[:1])
    assert codes(spread(), "PROC002", topo) == []


# --- PROC004 SMT siblings ---

def test_smt_siblings_both_busy():
    threads = [ThreadInfo(100, "python", "R", cpu_percent=95.0, last_cpu=0, cpus_seen=[0]),
               ThreadInfo(101, "python", "R", cpu_percent=90.0, last_cpu=4, cpus_seen=[4])]
    [f] = pr.run_process_rules(healthy(threads=threads), two_ccx_topology(), only={"PROC004"})
    assert "core 0 (CPUs 0,4)" in f.why
    assert f.snippet.startswith(pr.launch_prefix(two_ccx_topology(), [0, 1]) + " env OMP_NUM_THREADS=2")


def test_smt_siblings_quiet_when_cores_are_all_busy():
    threads = [ThreadInfo(100 + c, "python", "R", cpu_percent=90.0, last_cpu=c, cpus_seen=[c]) for c in range(8)]
    assert codes(healthy(threads=threads), "PROC004") == []


# --- PROC005 OpenMP runtimes ---

def test_two_different_openmp_runtimes_is_an_error():
    [f] = pr.run_process_rules(healthy(libraries=[GOMP, IOMP]), two_ccx_topology(), only={"PROC005"})
    assert f.severity == "error" and "libgomp.so.1 (from torch), libiomp5.so (from intel_openmp)" in f.title
    assert "KMP_DUPLICATE_LIB_OK" in f.fix and f.snippet.startswith("env OMP_NUM_THREADS=4 ")


def test_two_copies_of_libgomp_is_a_warning():
    system = NativeLib("libgomp.so.1.0.0", "openmp", "libgomp", "gomp", "system")
    [f] = pr.run_process_rules(healthy(libraries=[GOMP, system]), two_ccx_topology(), only={"PROC005"})
    assert f.severity == "warning" and "2 copies" in f.title


def test_two_openmp_runtimes_from_fake_proc_maps(tmp_path):
    """No libiomp5 is installed here, so the maps file of a fake /proc root lists both runtimes."""
    fp = FakeProc(tmp_path)
    fp.add_process(321, maps=["/env/lib/python3.11/site-packages/torch/lib/libgomp.so.1",
                              "/env/lib/libiomp5.so", "/env/lib/libmkl_intel_thread.so.2"],
                   threads={321: dict(processor=0)})
    clock = StepClock()
    insp = inspect_process(321, 0.3, root=tmp_path, topology=two_ccx_topology(), clock=clock, sleep=clock.sleep)
    found = pr.run_process_rules(insp, two_ccx_topology(), strict=True)
    assert [f.code for f in found] == ["PROC005"] and found[0].severity == "error"
    assert found[0].evidence["openmp_runtimes"] == ["libgomp.so.1", "libiomp5.so"]


# --- PROC006 workers x threads ---

def test_worker_thread_explosion():
    kids = [ChildProcess(200 + i, "python", threads=9, cpu_percent=30.0, runnable_mean=1.0) for i in range(4)]
    # Idle pools in the workers (what forked DataLoader workers usually have): no finding.
    assert codes(healthy(children=kids, children_threads=36), "PROC006") == []
    kids[1] = ChildProcess(201, "python", threads=9, cpu_percent=240.0, runnable_mean=3.2)
    insp = healthy(children=kids, children_threads=36)
    [f] = pr.run_process_rules(insp, two_ccx_topology(), only={"PROC006"})
    # Only libgomp is mapped: torch's own switch is the one that matters.
    assert f.snippet_lang == "python" and "torch.set_num_threads(1)" in f.snippet
    assert "threadpool_limits" not in f.snippet and "cv2" not in f.snippet
    assert "torch.set_num_threads(4)" in f.snippet and "num_workers=4" in f.snippet
    assert "4 workers x up to 9 threads: 39 threads on 8 CPUs" == f.title
    # numpy's OpenBLAS and OpenCV mapped too: each library's own switch is named.
    libs = [GOMP, NativeLib("libscipy_openblas64_-ff651d7f.so", "blas", "openblas", None, "numpy.libs"),
            NativeLib("cv2.abi3.so", "threads", "opencv", None, "cv2")]
    [f] = pr.run_process_rules(healthy(children=kids, children_threads=36, libraries=libs), two_ccx_topology(),
                               only={"PROC006"})
    assert "threadpool_limits(1)" in f.snippet and "cv2.setNumThreads(1)" in f.snippet
    assert "cv2.setNumThreads(1)" in f.fix and "threadpool_limits(1)" in f.fix


def test_single_thread_workers_are_fine():
    kids = [ChildProcess(200 + i, "python", threads=1, cpu_percent=30.0) for i in range(6)]
    assert codes(healthy(children=kids, children_threads=6), "PROC006") == []


# --- PROC007 swapping ---

def test_swapping():
    [f] = pr.run_process_rules(healthy(swap_bytes=512 << 20, major_faults_per_s=40.0), two_ccx_topology(),
                               only={"PROC007"})
    assert f.severity == "warning" and "512 MiB" in f.why
    assert pr.run_process_rules(healthy(major_faults_per_s=2500.0), two_ccx_topology(),
                                only={"PROC007"})[0].severity == "error"
    assert codes(healthy(swap_bytes=4 << 20, major_faults_per_s=3.0), "PROC007") == []


# --- PROC008 starved ---

def test_starved_waiting_on_workers():
    threads = [ThreadInfo(100 + i, "python", "S", cpu_percent=5.0, last_cpu=i) for i in range(8)]
    kids = [ChildProcess(200 + i, "python", threads=1, cpu_percent=95.0) for i in range(2)]
    insp = healthy(threads=threads, num_threads=8, cpu_percent=40.0, children=kids, children_threads=2,
                   children_cpu_percent=190.0, runnable_mean=2.0)
    [f] = pr.run_process_rules(insp, two_ccx_topology(), only={"PROC008"})
    assert "DataLoader workers are busy" in f.title and f.snippet == "py-spy dump --pid 100"


def test_starved_quiet_for_busy_job_and_for_exited():
    assert codes(healthy(num_threads=8, cpu_percent=700.0), "PROC008") == []
    assert codes(healthy(num_threads=8, cpu_percent=10.0, status="exited"), "PROC008") == []


# --- PROC009 env asks too much ---

def test_thread_env_exceeds_quota():
    insp = healthy(env={"OMP_NUM_THREADS": "64", "MKL_NUM_THREADS": "4"}, cpu_quota=4.0, usable_cpus=4)
    [f] = pr.run_process_rules(insp, two_ccx_topology(), only={"PROC009"})
    assert f.title == "OMP_NUM_THREADS=64 exceeds the 4 usable CPUs" and "cgroup quota 4 CPUs" in f.why
    assert "OMP_NUM_THREADS=4" in f.snippet
    assert codes(healthy(env={"OMP_NUM_THREADS": "8"}), "PROC009") == []


# --- PROC010 migrations ---

def test_threads_migrate():
    threads = [ThreadInfo(100, "python", "R", cpu_percent=95.0, last_cpu=3, cpus_seen=[0, 1, 2, 3], migrations=12),
               ThreadInfo(101, "python", "R", cpu_percent=90.0, last_cpu=1, cpus_seen=[1, 0], migrations=6)]
    [f] = pr.run_process_rules(healthy(threads=threads), two_ccx_topology(), only={"PROC010"})
    assert f.severity == "info" and "18 times in 2.0 s" in f.why
    assert codes(healthy(), "PROC010") == []


def test_unknown_command_gets_placeholder_and_rules_survive_unknowns():
    insp = healthy(cmdline=None, runnable_mean=20.0, wait_percent=900.0)
    [f] = pr.run_process_rules(insp, None, only={"PROC001"})
    assert f.snippet.endswith("python train.py  # your command")
    # Everything unknown: no rule fires, none crashes.
    assert pr.run_process_rules(Inspection(pid=1), None, strict=True) == []


def test_unknown_rule_code():
    with pytest.raises(KeyError, match="no process rule"):
        pr.run_process_rules(healthy(), None, only={"PROC404"})


# --- PROC011 / PROC012 myths ---

def test_myth_env_from_shared_knowledge():
    [f] = pr.run_process_rules(healthy(env={"TORCH_LOOP_CORE_PINNING": "1", "OMP_NUM_THREADS": "2"}),
                               two_ccx_topology(), only={"PROC011"})
    assert f.category == "myth" and "TORCH_LOOP_CORE_PINNING=1" in f.title
    from cpudoctor.knowledge import ADVISOR_KNOWLEDGE

    reason = ADVISOR_KNOWLEDGE.data["myth_env"]["TORCH_LOOP_CORE_PINNING"]
    assert reason in f.why and f.snippet.startswith("unset TORCH_LOOP_CORE_PINNING")
    assert codes(healthy(), "PROC011") == []


def test_kmp_vars_ignored_with_libgomp_only():
    env = {"KMP_AFFINITY": "granularity=fine,compact,1,0", "KMP_BLOCKTIME": "1", "OMP_NUM_THREADS": "4"}
    [f] = pr.run_process_rules(healthy(env=env), two_ccx_topology(), only={"PROC012"})
    assert "KMP_AFFINITY, KMP_BLOCKTIME ignored" in f.title
    assert f.snippet.splitlines()[0] == "unset KMP_AFFINITY KMP_BLOCKTIME"
    relaunch = f.snippet.splitlines()[1]
    assert relaunch.startswith(pr.launch_prefix(two_ccx_topology(), [0, 1, 2, 3]) + " env -u KMP_AFFINITY ")
    assert "OMP_PLACES=" not in relaunch and "OMP_PROC_BIND=" not in relaunch
    # With Intel OpenMP loaded the KMP_* variables do work.
    assert codes(healthy(env=env, libraries=[IOMP]), "PROC012") == []
    assert codes(healthy(env=env, libraries_readable=False, libraries=[]), "PROC012") == []


def test_docs_page_is_in_sync():
    from pathlib import Path

    from cpudoctor.render.rules import render_process_rules_md

    path = Path(__file__).resolve().parents[1] / "docs" / "process_rules.md"
    assert path.read_text(encoding="utf-8") == render_process_rules_md(), (
        "docs/process_rules.md is out of date: run "
        "`python -m cpudoctor.render.rules process > docs/process_rules.md`")


# --- PROC013 contention ---

def test_cpu_contention_from_other_programs():
    insp = healthy(runnable_mean=2.0, wait_percent=150.0, cpu_percent=60.0)
    [f] = pr.run_process_rules(insp, two_ccx_topology(), only={"PROC013"})
    assert "waited 1.5 s/s" in f.title and f.snippet.startswith("ps -eLo")
    # Low CPU with a long run-queue wait is contention, not a job waiting on data (PROC008 stays quiet).
    many = healthy(num_threads=8, runnable_mean=2.0, wait_percent=150.0, cpu_percent=60.0)
    assert codes(many) == ["PROC013"]
    assert codes(healthy(runnable_mean=12.0, wait_percent=400.0), "PROC013") == []     # self-inflicted: PROC001
    assert codes(healthy(wait_percent=20.0), "PROC013") == []


def test_relaunch_prefix_from_pinning_module_and_fallback():
    from cpudoctor.advisor import pinning
    from cpudoctor.model import L3Domain, NumaNode

    topo = two_ccx_topology()
    assert pr.launch_prefix(topo, [0, 1]) == pinning.launch_prefix(topo, [0, 1])
    one_node = Topology(online_cpus=[0, 1, 2, 3], l3_domains=[L3Domain([0, 1, 2, 3])],
                        numa_nodes=[NumaNode(0, [0, 1, 2, 3])])
    assert pr.launch_prefix(one_node, [0, 1]) == "taskset -c 0-1"
    assert pr.launch_prefix(None, [2, 3]) == "taskset -c 2-3"                  # no topology: plain taskset
    assert pr.launch_prefix(None, [2, 3], numa_node=1) == "numactl --cpunodebind=1 --membind=1"


@pytest.mark.hardware
@pytest.mark.slow
def test_real_oversubscribed_torch_job_fires_proc001():
    """A torch job with 4x more OpenMP threads than usable CPUs, inspected for real."""
    import os
    import subprocess
    import sys

    from cpudoctor.probes import probe_topology

    usable = len(os.sched_getaffinity(0))
    threads = 4 * usable
    code = ("import torch\n"
            f"torch.set_num_threads({threads})\n"
            "a = torch.randn(384, 384)\n"
            "print('ready', flush=True)\n"
            "while True:\n    a = torch.tanh(a @ a)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    try:
        assert proc.stdout.readline().strip() == "ready"
        topo = probe_topology()
        insp = inspect_process(proc.pid, seconds=1.0, topology=topo)
    finally:
        proc.kill()
        proc.wait()
    assert insp.num_threads >= threads
    found = {f.code: f for f in pr.run_process_rules(insp, topo, strict=True)}
    assert "PROC001" in found, (insp.runnable_mean, insp.wait_percent, [f.code for f in found.values()])
    f = found["PROC001"]
    assert f"OMP_NUM_THREADS={usable}" in f.snippet and f.evidence["usable_cpus"] == usable
    assert "PROC009" in found                      # OMP_NUM_THREADS above the usable CPUs, too


def test_libgomp_sleeping_oversubscription_is_proc001_not_contention():
    """8 OpenMP threads on 2 CPUs average only ~2.3 runnable threads (libgomp sleeps at barriers
    once oversubscribed), yet all 8 run in turn: that is the job's own oversubscription (PROC001),
    not other programs (PROC013). Measured on a loaded 2-CPU machine: runnable_mean 2.36, wait 281%."""
    from cpudoctor.model.inspection import Inspection, ThreadInfo

    insp = Inspection(pid=1234, num_threads=8, runnable_mean=2.36, runnable_max=8, wait_percent=281.0,
                      cpu_percent=190.0, window_s=1.0,
                      threads=[ThreadInfo(tid=1234 + k, name="python", state="R", cpu_percent=24.0) for k in range(8)])
    insp.affinity = [0, 1]
    insp.usable_cpus = 2
    codes = {f.code for f in pr.run_process_rules(insp, None, strict=True)}
    assert "PROC001" in codes and "PROC013" not in codes
    # Two busy threads on two CPUs that still wait a lot: the waiting comes from someone else.
    insp.threads = insp.threads[:2]
    insp.num_threads, insp.runnable_mean = 2, 1.9
    codes = {f.code for f in pr.run_process_rules(insp, None, strict=True)}
    assert "PROC013" in codes and "PROC001" not in codes


def test_an_oversubscribed_job_starved_by_other_programs_is_still_proc001():
    """The same 16-thread job (8 OpenMP workers, 8 idle threads) on 2 CPUs, with two busy loops and other torch
    jobs taking most of the CPU (seen in a suite run: runnable_mean 1.73, wait 312 %): each worker got ~3.5 %
    of a CPU, below the 5 % that counts a thread as working on an idle machine. Working is judged against the
    CPU the job got, so the job's own oversubscription is still named."""
    from cpudoctor.model.inspection import Inspection, ThreadInfo

    workers = [ThreadInfo(tid=2000 + k, name="python", state="R", cpu_percent=3.5) for k in range(8)]
    idle = [ThreadInfo(tid=2100 + k, name="python", state="S", cpu_percent=0.0) for k in range(8)]
    insp = Inspection(pid=2000, num_threads=16, runnable_mean=1.73, runnable_max=6, wait_percent=312.4,
                      cpu_percent=28.0, window_s=1.0, threads=workers + idle)
    insp.affinity = [0, 1]
    insp.usable_cpus = 2
    codes = {f.code for f in pr.run_process_rules(insp, None, strict=True)}
    assert "PROC001" in codes
    # Idle threads never count: two working threads of a starved job are not oversubscription.
    insp.threads = workers[:2] + idle
    codes = {f.code for f in pr.run_process_rules(insp, None, strict=True)}
    assert "PROC001" not in codes
