"""Thread-sweep variants from synthetic topologies, and the recommendation."""

from __future__ import annotations

import pytest

from cpudoctor.lab import sweep
from cpudoctor.probes.cpu.topology import Affinity, Core, L3Domain, NumaNode, Topology
from cpudoctor.report import ThreadRecommendation


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
    vs = sweep.derive_variants(make_topology(2))
    assert names(vs) == ["PyTorch defaults", "1 thread", "2 threads"]
    assert vs[0].threads is None and vs[0].cpus is None


def test_ryzen_16_cores_smt_two_ccx():
    vs = sweep.derive_variants(make_topology(16, smt=2, ccx_cores=8))
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
    vs = sweep.derive_variants(make_topology(32, smt=2, ccx_cores=8, numa=2))
    nodes = [v for v in vs if v.name.startswith("NUMA")]
    assert [v.cpus for v in nodes] == [list(range(16)), list(range(16, 32))]
    assert all(v.threads == 16 for v in nodes)


def test_affinity_restricts_every_variant():
    topo = make_topology(8, smt=2, ccx_cores=4)
    vs = sweep.derive_variants(topo, allowed=[0, 1, 8, 9])
    assert max(v.threads or 0 for v in vs) == 4
    assert all(set(v.cpus or []) <= {0, 1, 8, 9} for v in vs)
    assert "all cores, no SMT (CPUs 0-1)" in names(vs)
    assert not any("CCX" in n for n in names(vs))                   # all allowed CPUs share one L3


def test_cgroup_quota_caps_the_thread_counts():
    topo = make_topology(16, smt=2, ccx_cores=8)
    topo.affinity.usable_cpus = 4                     # e.g. docker --cpus=4 on a 32-thread Ryzen
    vs = sweep.derive_variants(topo)
    assert [v.threads for v in vs if v.group == "threads"] == [1, 2, 4]
    assert all(v.threads <= 4 for v in vs if v.threads)
    assert "one CCX, no SMT (CPUs 0-7), 4 threads (CPU quota)" in names(vs)


def test_unknown_topology_falls_back_to_the_allowed_cpus():
    vs = sweep.derive_variants(Topology(), allowed=[0, 1, 2, 3])
    assert [v.threads for v in vs] == [None, 1, 2, 4]


def test_pinning_choices_list_every_ccx_and_node():
    choices = sweep.pinning_choices(make_topology(32, smt=2, ccx_cores=8, numa=2))
    labels = [c[0] for c in choices]
    assert labels[:4] == ["CCX 0 (CPUs 0-7,32-39)", "CCX 1 (CPUs 8-15,40-47)", "CCX 2 (CPUs 16-23,48-55)",
                          "CCX 3 (CPUs 24-31,56-63)"]
    assert labels[4:] == ["NUMA node 0 (CPUs 0-15,32-47)", "NUMA node 1 (CPUs 16-31,48-63)",
                          "all cores, no SMT (CPUs 0-31)"]
    assert sweep.pinning_choices(make_topology(2)) == []
    intel = make_topology(32, smt=2, ccx_cores=8, numa=2)
    intel.vendor, intel.cpu_family = "GenuineIntel", 6
    assert sweep.pinning_choices(intel)[0][0] == "L3 domain 0 (CPUs 0-7,32-39)"    # CCX is a Zen word


def test_pinning_choices_offer_the_performance_cores_of_a_hybrid_chip():
    from conftest import machine_root
    from cpudoctor.probes import probe_topology

    topo = probe_topology(machine_root("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"))
    labels = [c[0] for c in sweep.pinning_choices(topo)]
    assert "performance cores (CPUs 0-11)" in labels and "all cores, no SMT (CPUs 0,2,4,6,8,10,12-19)" in labels


def test_thread_ladder():
    assert sweep.thread_ladder(1, 1) == [1]
    assert sweep.thread_ladder(12, 6) == [1, 2, 4, 6, 8, 12]


def _pt(variant, threads, sps, group="threads", cpus=None):
    return {"variant": variant, "threads": threads, "samples_per_s": sps, "group": group, "cpus": cpus,
            "threads_used": threads}


def test_recommend_prefers_fewer_threads_within_tolerance():
    points = [_pt("PyTorch defaults", None, 900.0, "default"), _pt("4 threads", 4, 1000.0), _pt("8 threads", 8, 1020.0),
              _pt("16 threads", 16, 700.0), _pt("one CCX", 8, 990.0, "pinning", list(range(8)))]
    rec = sweep.recommend(points, "simplecnn")
    assert isinstance(rec, ThreadRecommendation)
    assert rec.threads == 4 and rec.variant == "4 threads" and rec.cpus is None
    assert rec.samples_per_s == 1000.0 and rec.default_samples_per_s == 900.0 and rec.model == "simplecnn"


def test_recommend_clear_winner_and_nothing_measured():
    rec = sweep.recommend([_pt("1 thread", 1, 100.0), _pt("pinned", 2, 300.0, "pinning", [0, 1])])
    assert rec.variant == "pinned" and rec.cpus == [0, 1]
    assert sweep.recommend([_pt("1 thread", 1, None)]) is None


def test_hybrid_chip_measures_the_performance_cores_alone():
    """Raptor Lake i7-1370P (corpus): P cores 0-11 (6 x SMT2), E cores 12-19."""
    from conftest import machine_root
    from cpudoctor.probes import probe_topology

    topo = probe_topology(machine_root("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"))
    vs = {v.name: v for v in sweep.derive_variants(topo)}
    p = vs["performance cores, no SMT (CPUs 0,2,4,6,8,10)"]
    assert p.threads == 6 and p.cpus == [0, 2, 4, 6, 8, 10] and p.group == "pinning"
    assert vs["performance cores with SMT (CPUs 0-11)"].cpus == list(range(12))
    assert not any("performance" in n for n in names(sweep.derive_variants(make_topology(8, smt=2))))


def test_noise_note_when_one_setting_measures_far_apart():
    """'PyTorch defaults' (2 threads used) and '2 threads' are one setting: 7,334 vs 842 samples/s means a busy machine."""
    default = _pt("PyTorch defaults", None, 7334.0, "default")
    default["threads_used"] = 2
    points = [default, _pt("1 thread", 1, 5785.0), _pt("2 threads", 2, 842.0)]
    notes = sweep.noise_notes(points)
    assert len(notes) == 1
    assert "'PyTorch defaults' and '2 threads' ran the same setting (2 threads)" in notes[0]
    assert "7,334 vs 842 samples/s (8.7x apart)" in notes[0] and "rerun" in notes[0]
    # Within noise, or different settings (pinned vs unpinned): no note.
    points[2]["samples_per_s"] = 7000.0
    assert sweep.noise_notes(points) == []
    assert sweep.noise_notes([_pt("2 threads", 2, 800.0), _pt("pinned", 2, 3000.0, "pinning", [0, 1])]) == []


@pytest.mark.slow
def test_real_sweep_on_this_machine():
    from cpudoctor.lab import runner

    out = runner.run_job("sweep", {"seconds": 1.5, "max_variants": 2, "train": {"batch_size": 32}}, timeout=180)
    assert out.status == "ok", out.message
    assert len(out.result["points"]) == 2 and len(out.progress) == 2
    rec = out.result["recommendation"]
    assert rec["threads"] >= 1 and rec["samples_per_s"] > 0


@pytest.mark.slow
def test_cancelled_sweep_keeps_measured_variants():
    import time

    from cpudoctor.lab import runner

    job = runner.Job(runner.job_command("sweep", {"seconds": 1.5, "train": {"batch_size": 32}})).start()
    deadline = time.monotonic() + 120
    while not job.outcome.progress and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.outcome.progress, "the sweep measured nothing"
    out = job.stop()
    assert out.status == "cancelled"
    assert out.progress[0]["variant"] == "PyTorch defaults" and out.progress[0]["samples_per_s"] > 0
    if out.result is not None:                    # the sweep had time to send its partial result
        assert out.result["status"] == "cancelled" and out.result["points"]


def test_busy_sweep_says_so_in_its_result(monkeypatch):
    """run() end to end with fake training children: one setting measured 8.7x apart marks the result busy."""
    from cpudoctor.lab import protocol, runner

    measured = {None: 7334.0, 1: 5785.0, 2: 842.0}          # PyTorch defaults use 2 threads here

    class FakeJob:
        def __init__(self, argv, what=""):
            self.threads = argv["threads"]
            self._proc = None

        def start(self):
            return self

        def wait(self):
            return runner.JobOutcome(status="ok", result={"samples_per_s": measured[self.threads],
                                                          "threads": self.threads or 2, "interop_threads": 2})

    monkeypatch.setattr(runner, "Job", FakeJob)
    monkeypatch.setattr(runner, "job_command", lambda job, settings: settings)
    monkeypatch.setattr(protocol, "progress", lambda **kw: None)
    args = {"seconds": 1.0, "train": {"batch_size": 32}, "topology": _topology_data(make_topology(2))}
    res = sweep.run(args, protocol.StopFlag())
    assert [p["variant"] for p in res["points"]] == ["PyTorch defaults", "1 thread", "2 threads"]
    assert res["busy"] is True and len(res["notes"]) == 1 and "idle machine" in res["notes"][0]
    measured[2] = 7100.0                                      # the same setting agrees with itself: quiet machine
    res = sweep.run(args, protocol.StopFlag())
    assert res["busy"] is False and res["notes"] == []
    assert res["recommendation"]["threads"] == 2


def _topology_data(topo):
    from cpudoctor.serde import to_data

    return to_data(topo)
