"""The thread sweep: variants from synthetic topologies, the interleaved measurement, and its verdict."""

from __future__ import annotations

import time

import pytest

from cpudoctor.lab import sweep, variants
from cpudoctor.lab import verdicts as words
from cpudoctor.lab.settings import SweepSettings
from cpudoctor.model import Affinity, Core, L3Domain, NumaNode, Topology


def make_topology(cores: int, smt: int = 1, ccx_cores: int | None = None, numa: int = 1) -> Topology:
    """A Ryzen/EPYC-like layout: core i has CPUs i, i+cores, ...; CCX and NUMA split cores in order."""
    ncpu = cores * smt
    core_list = [Core(0, i, [i + k * cores for k in range(smt)]) for i in range(cores)]
    ccx_cores = ccx_cores or cores
    l3 = [L3Domain(sorted(c for core in core_list[i:i + ccx_cores] for c in core.cpus))
          for i in range(0, cores, ccx_cores)]
    per = cores // numa
    nodes = [NumaNode(n, sorted(c for core in core_list[n * per:(n + 1) * per] for c in core.cpus)) for n in range(numa)]
    return Topology(packages=1, cores=cores, logical_cpus=ncpu, l3_domains=l3, numa_nodes=nodes,
                    online_cpus=list(range(ncpu)), smt_threads_per_core=smt, core_list=core_list,
                    affinity=Affinity(allowed_cpus=list(range(ncpu)), usable_cpus=ncpu),
                    vendor="AuthenticAMD", cpu_family=0x19)


def names(vs):
    return [v.name for v in vs]


def test_two_vcpus_without_smt_like_this_vm():
    vs = variants.derive_variants(make_topology(2))
    assert names(vs) == ["PyTorch defaults", "1 thread", "2 threads"]
    assert vs[0].threads is None and vs[0].cpus is None


def test_ryzen_16_cores_smt_two_ccx():
    vs = variants.derive_variants(make_topology(16, smt=2, ccx_cores=8))
    by = {v.name: v for v in vs}
    assert [v.threads for v in vs if v.group == "threads"] == [1, 2, 4, 8, 16, 32]
    ccx = by["one CCX, no SMT (CPUs 0-7)"]
    assert ccx.threads == 8 and ccx.cpus == list(range(8))
    assert by["one CCX with SMT (CPUs 0-7,16-23)"].threads == 16
    assert by["all cores, no SMT (CPUs 0-15)"].cpus == list(range(16))
    assert by["all cores with SMT (CPUs 0-31)"].threads == 32
    assert not any(v.name.startswith("NUMA") for v in vs)          # one node: nothing to compare
    assert len({v.key() for v in vs}) == len(vs)


def test_epyc_two_numa_nodes():
    vs = variants.derive_variants(make_topology(32, smt=2, ccx_cores=8, numa=2))
    nodes = [v for v in vs if v.name.startswith("NUMA")]
    assert [v.cpus for v in nodes] == [list(range(16)), list(range(16, 32))]
    assert all(v.threads == 16 for v in nodes)


def test_affinity_restricts_every_variant():
    topo = make_topology(8, smt=2, ccx_cores=4)
    vs = variants.derive_variants(topo, allowed=[0, 1, 8, 9])
    assert max(v.threads or 0 for v in vs) == 4
    assert all(set(v.cpus or []) <= {0, 1, 8, 9} for v in vs)
    assert "all cores, no SMT (CPUs 0-1)" in names(vs)
    assert not any("CCX" in n for n in names(vs))                   # all allowed CPUs share one L3


def test_cgroup_quota_caps_the_thread_counts():
    topo = make_topology(16, smt=2, ccx_cores=8)
    topo.affinity.usable_cpus = 4                     # e.g. docker --cpus=4 on a 32-thread Ryzen
    vs = variants.derive_variants(topo)
    assert [v.threads for v in vs if v.group == "threads"] == [1, 2, 4]
    assert all(v.threads <= 4 for v in vs if v.threads)
    assert "one CCX, no SMT (CPUs 0-7), 4 threads (CPU quota)" in names(vs)


def test_unknown_topology_falls_back_to_the_allowed_cpus():
    vs = variants.derive_variants(Topology(), allowed=[0, 1, 2, 3])
    assert [v.threads for v in vs] == [None, 1, 2, 4]


def test_pinning_choices_list_every_ccx_and_node():
    choices = variants.pinning_choices(make_topology(32, smt=2, ccx_cores=8, numa=2))
    labels = [c[0] for c in choices]
    assert labels[:4] == ["CCX 0 (CPUs 0-7,32-39)", "CCX 1 (CPUs 8-15,40-47)", "CCX 2 (CPUs 16-23,48-55)",
                          "CCX 3 (CPUs 24-31,56-63)"]
    assert labels[4:] == ["NUMA node 0 (CPUs 0-15,32-47)", "NUMA node 1 (CPUs 16-31,48-63)",
                          "all cores, no SMT (CPUs 0-31)"]
    assert variants.pinning_choices(make_topology(2)) == []
    intel = make_topology(32, smt=2, ccx_cores=8, numa=2)
    intel.vendor, intel.cpu_family = "GenuineIntel", 6
    assert variants.pinning_choices(intel)[0][0] == "L3 domain 0 (CPUs 0-7,32-39)"    # CCX is a Zen word


def test_pinning_choices_offer_the_performance_cores_of_a_hybrid_chip():
    from conftest import machine_root
    from cpudoctor.probes import probe_topology

    topo = probe_topology(machine_root("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"))
    labels = [c[0] for c in variants.pinning_choices(topo)]
    assert "performance cores (CPUs 0-11)" in labels and "all cores, no SMT (CPUs 0,2,4,6,8,10,12-19)" in labels


def test_thread_ladder():
    assert variants.thread_ladder(1, 1) == [1]
    assert variants.thread_ladder(12, 6) == [1, 2, 4, 6, 8, 12]


def _measured(name, threads, rates, group="threads", cpus=None, used=None):
    m = sweep.Measured(variants.Variant(name, threads, cpus, group), threads_used=used or threads)
    m.rates = list(rates)
    return m


def test_decide_picks_a_clear_winner_beyond_both_spreads():
    ms = [_measured("1 thread", 1, [700, 710, 690]), _measured("2 threads", 2, [1000, 1010, 990])]
    d = sweep.decide(ms)
    assert d.settled and d.pick[0].variant.name == "2 threads" and d.runner_up[0].variant.name == "1 thread"


def test_decide_prefers_fewer_threads_when_tied_precisely():
    ms = [_measured("4 threads", 4, [1000, 1005, 995]), _measured("8 threads", 8, [1020, 1015, 1025])]
    d = sweep.decide(ms)
    assert d.settled and d.pick[0].variant.name == "4 threads"          # within 3 %: the cores stay free


def test_decide_waits_while_spreads_overlap():
    ms = [_measured("1 thread", 1, [700, 1200, 900]), _measured("2 threads", 2, [800, 1300, 1000])]
    d = sweep.decide(ms)
    assert not d.settled
    assert d.reason == "'2 threads' and '1 thread' measured within each other's spread"


def test_the_same_setting_counts_once():
    """On 2 CPUs "PyTorch defaults" runs 2 threads: it and "2 threads" are one setting, pooled."""
    ms = [_measured("PyTorch defaults", None, [1000, 1010], "default", used=2), _measured("2 threads", 2, [1005]),
          _measured("1 thread", 1, [600, 610, 605])]
    d = sweep.decide(ms)
    assert d.settled and [m.variant.name for m in d.pick] == ["PyTorch defaults", "2 threads"]
    rec = sweep._recommendation(d, ms, "simplecnn")
    assert rec["variant"] == "2 threads (the PyTorch default here)" and rec["threads"] == 2
    assert rec["samples_per_s"] == rec["default_samples_per_s"] == 1005.0


def test_interference_is_weighted_by_capacity():
    records = [{"other_share": 0.5, "steal_share": 0.0, "wall_s": 1.0, "cpus": [0, 1]},
               {"other_share": 0.0, "steal_share": 0.1, "wall_s": 3.0, "cpus": [0, 1]}, None, {}]
    share = sweep.interference_share(records)
    assert share == {"other_share": 0.125, "steal_share": 0.075, "share": 0.2, "seconds": 8.0}
    assert sweep.interference_share([]) is None


class FakeWorker:
    """A warmed-up worker whose segments come from a script: rates and the share others took."""

    def __init__(self, variant, script, calls):
        self.variant = variant
        self.ready = {"threads": variant.threads or 2, "interop_threads": 2}
        self.script = script
        self.calls = calls

    def measure(self, seconds, stop, until=None):
        if stop.is_set():
            return None
        self.calls.append(self.variant.name)
        rate, share = self.script(self.variant, len([c for c in self.calls if c == self.variant.name]))
        if rate == "a step that outlasts the budget":
            self.calls.append(("waited until", until))
            while until is not None and time.monotonic() < until and not stop.is_set():
                stop.wait(0.01)
            return None
        return {"samples_per_s": rate, "interference": {"other_share": share, "steal_share": 0.0, "wall_s": seconds,
                                                        "cpus": [0, 1]}}

    def failure(self):
        return None

    def request_stop(self):
        self.calls.append(f"stop {self.variant.name}")


def fake_pool(monkeypatch, script, calls, stop_after=None):
    class Pool:
        def __init__(self, vs, train, python, max_alive):
            self.workers = {v.name: FakeWorker(v, script, calls) for v in vs}

        def start_all(self, names, stop, deadline):
            return {}

        def ensure(self, name, stop, deadline):
            if stop_after is not None and len([c for c in calls if not c.startswith("stop ")]) >= stop_after:
                stop.set()
            return self.workers[name]

        def request_stop_all(self):
            pass

        def reap_all(self):
            pass

    monkeypatch.setattr(sweep, "WorkerPool", Pool)
    monkeypatch.setattr(sweep, "SETTLE_S", 0.0)


def _settings(**kw):
    return SweepSettings(train={"batch_size": 32}, budget_s=kw.pop("budget_s", 30.0), segment_s=0.01, **kw).validate()


def test_quiet_separated_sweep_recommends_after_the_minimum_rounds_in_abab_order(monkeypatch):
    calls = []
    speeds = {None: 1000.0, 1: 700.0, 2: 1010.0}
    fake_pool(monkeypatch, lambda v, i: (speeds[v.threads] + i, 0.01), calls)
    seen = []
    res = sweep.run_sweep(_settings(), make_topology(2), on_progress=seen.append)
    assert res["verdict"] == "recommended" and res["rounds"] == 3 and res["status"] == "ok"
    # round 1 in order, round 2 reversed (defaults and "2 threads" are one setting after round 1)
    assert calls == ["PyTorch defaults", "1 thread", "2 threads", "stop 2 threads", "1 thread", "PyTorch defaults",
                     "PyTorch defaults", "1 thread"]
    rec = res["recommendation"]
    assert rec["threads"] == 2 and rec["variant"] == "2 threads (the PyTorch default here)"
    points = {p["variant"]: p for p in res["points"]}
    assert points["2 threads"]["same_as"] == "PyTorch defaults"
    assert points["1 thread"]["samples_per_s_n"] == 3 and points["1 thread"]["samples_per_s_lo"] == 701.0
    assert res["interference"]["share"] == pytest.approx(0.01)
    assert seen[0]["phase"] == "plan" and seen[1]["phase"] == "segment" and seen[1]["variant"] == "PyTorch defaults"


def test_busy_machine_makes_the_sweep_inconclusive(monkeypatch):
    """A busy loop on one of two CPUs (48 %): whatever the ranking, nothing is recommended."""
    calls = []
    fake_pool(monkeypatch, lambda v, i: ({None: 300.0, 1: 1200.0, 2: 310.0}[v.threads], 0.48), calls)
    res = sweep.run_sweep(_settings(), make_topology(2))
    assert res["verdict"] == "inconclusive" and res["recommendation"] is None
    assert res["reason"] == "inconclusive: 48 % of the CPU went to other programs"
    assert res["best_measured"]["variant"] == "1 thread"             # still shown, never adopted
    assert res["rounds"] == 3                                          # clearly busy: no more rounds


def test_settings_that_never_separate_end_with_the_budget(monkeypatch):
    import itertools

    noise = itertools.cycle([0.7, 1.3, 1.0])
    fake_pool(monkeypatch, lambda v, i: ((1000.0 if v.threads != 1 else 950.0) * next(noise), 0.0), [])
    res = sweep.run_sweep(_settings(budget_s=0.5), make_topology(2))
    assert res["verdict"] == "inconclusive" and res["recommendation"] is None
    assert "measured within each other's spread" in res["reason"] and "0.5 s budget" in res["reason"]
    assert res["elapsed"] <= 1.0


def test_a_step_longer_than_the_budget_ends_the_sweep_at_its_hard_stop(monkeypatch):
    """resnet18 in bf16 took 24 s a step here: a segment ends only after a whole step, so the sweep waited up to
    60 s for it whatever its budget. Now it waits until the budget's hard stop, says so, and ends."""
    calls = []
    fake_pool(monkeypatch, lambda v, i: ("a step that outlasts the budget" if v.threads == 1 else 1000.0, 0.0), calls)
    began = time.monotonic()
    res = sweep.run_sweep(_settings(budget_s=0.5), make_topology(2))
    waited = [c[1] for c in calls if isinstance(c, tuple)]
    assert len(waited) == 1 and began < waited[0] - sweep.hard_stop(0.5) <= time.monotonic()
    assert calls.index(("waited until", waited[0])) == len(calls) - 1          # nothing measured after it
    assert res["reason"].endswith("; " + words.budget_cut(0.5, "1 thread")) and res["verdict"] == "inconclusive"
    assert "1 thread: " not in " ".join(res["failures"])                       # cut by the budget, not failed


def test_the_budget_counts_the_commands_start_up(monkeypatch):
    """`bench sweep --budget` counts from the command's start (interpreter, environment discovery), not from when
    the sweep began: a budget already spent measures nothing, and when it began is no setting of the run."""
    from cpudoctor.lab import session

    calls = []
    fake_pool(monkeypatch, lambda v, i: (1000.0, 0.0), calls)
    import cpudoctor.probes as probes

    monkeypatch.setattr(probes, "probe_topology", lambda root: make_topology(2))
    settings = _settings(budget_s=5.0).to_dict()
    settings["started"] = time.monotonic() - 10.0                 # a command that started 10 s ago
    outcome, result = session.run("sweep", settings)
    assert calls == [] and outcome.result["rounds"] == 0 and outcome.result["elapsed"] >= 10.0
    assert "started" not in result.settings and "started" not in result.bench_run().settings


def test_a_cancelled_sweep_keeps_what_it_measured(monkeypatch):
    calls = []
    fake_pool(monkeypatch, lambda v, i: (1000.0, 0.0), calls, stop_after=4)
    res = sweep.run_sweep(_settings(), make_topology(2))
    assert res["status"] == "cancelled" and res["verdict"] == "inconclusive"
    assert res["reason"] == "inconclusive: the sweep was cancelled after 1 round"
    assert sum(p["segments"] for p in res["points"]) == 4


def test_a_worker_that_cannot_start_is_a_failure_not_a_crash(monkeypatch):
    calls = []
    fake_pool(monkeypatch, lambda v, i: (1000.0 * (v.threads or 2), 0.0), calls)
    original = sweep.WorkerPool

    class Pool(original):
        def start_all(self, names, stop, deadline):
            return {"1 thread": "Illegal instruction (SIGILL): torch needs AVX2"}

    monkeypatch.setattr(sweep, "WorkerPool", Pool)
    res = sweep.run_sweep(_settings(), make_topology(2))
    assert res["failures"] == ["1 thread: Illegal instruction (SIGILL): torch needs AVX2"]
    assert "1 thread" not in calls and res["verdict"] == "recommended"


@pytest.mark.slow
def test_a_sweep_child_stopped_hands_back_its_figures_at_once():
    """The GUI's way: `python -m cpudoctor.lab.sweep` as a child; a stop gets the partial result within the runner's
    staged stop (it is sent before the workers are reaped), and no worker outlives it."""
    import time

    import psutil

    from cpudoctor.lab import runner

    args = SweepSettings(train={"batch_size": 16}, budget_s=120.0, segment_s=0.2, max_variants=2).to_dict()
    job = runner.Job(runner.job_command("sweep", args)).start()
    deadline = time.monotonic() + 120
    while not any(p.get("phase") == "segment" for p in job.outcome.progress) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(p.get("phase") == "segment" for p in job.outcome.progress), "the sweep measured nothing"
    workers = psutil.Process(job.pid).children(recursive=True)
    out = job.stop()
    assert out.status == "cancelled"
    assert out.result is not None and out.result["status"] == "cancelled"
    assert out.result["verdict"] == "inconclusive" and out.result["recommendation"] is None
    assert any(p["segments"] for p in out.result["points"])
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"training workers left behind: {alive}"


@pytest.mark.hardware
@pytest.mark.slow
def test_a_sweep_beside_a_busy_loop_says_inconclusive_with_the_share(tmp_path):
    """A real busy loop pinned to one of the (at most two) CPUs the sweep may use: the sweep reports how much
    of the CPU went to other programs and recommends nothing. Never a speed."""
    import json
    import os
    import subprocess
    import sys

    cpus = sorted(os.sched_getaffinity(0))[:2]
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, [{cpus[-1]}])\nwhile True: pass"])
    try:
        out = subprocess.run([sys.executable, "-m", "cpudoctor", "bench", "sweep", "--budget", "40", "--segment", "0.2",
                              "--batch-size", "16", "--json", "--quiet"], capture_output=True, text=True, timeout=240,
                             preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    finally:
        hog.kill()
        hog.wait()
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout)
    result = res["result"]
    assert result["verdict"] == "inconclusive" and res["recommendation"] is None
    assert result["reason"].startswith("inconclusive: ") and "% of the CPU went to other programs" in result["reason"]
    assert result["interference"]["share"] > 0.1
    assert res["bench_run"]["metrics"]["verdict"] == "inconclusive"
    measured = [p for p in result["points"] if p["segments"] and not p.get("same_as")]
    assert all(p["samples_per_s_lo"] <= p["samples_per_s"] <= p["samples_per_s_hi"] for p in measured)
    assert all(0 <= p["other_share"] <= 1 for p in measured)
