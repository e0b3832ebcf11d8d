"""Pinning snippets: the one generator behind the topology map, the advisor and the inspector."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import machine_root
from cpudoctor.advisor.pinning import (
    AFFINITY_VARS,
    KINDS,
    _omp_places,
    cores_of,
    l3_cpu_sets,
    launch_prefix,
    numa_cpu_sets,
    one_thread_per_core,
    package_cpu_sets,
    pinning_plan,
)
from cpudoctor.kits.cpulist import parse_cpulist
from cpudoctor.model import Affinity, Core, L3Domain, NumaNode, Package, Topology
from cpudoctor.probes.cpu.topology import probe_topology


def expand_places(text: str) -> list[list[int]]:
    """Expand an OMP_PLACES string the way an OpenMP runtime does (spec 6.5)."""
    out: list[list[int]] = []
    for m in re.finditer(r"\{([\d,]+)\}(?::(\d+)(?::(-?\d+))?)?", text):
        base = [int(x) for x in m.group(1).split(",")]
        count = int(m.group(2) or 1)
        stride = int(m.group(3) or 1)
        out.extend([c + k * stride for c in base] for k in range(count))
    return out


def zen_topology(ccx: int = 4, cores_per_ccx: int = 4, nodes: int = 2) -> Topology:
    """A 1-socket, SMT-2 Zen-like topology: sibling of cpu c is c + n_cores."""
    n = ccx * cores_per_ccx
    cores = [Core(0, i, [i, i + n], l3=i // cores_per_ccx, numa=(i * nodes) // n) for i in range(n)]
    l3 = [L3Domain(sorted(c for k in range(i * cores_per_ccx, (i + 1) * cores_per_ccx) for c in (k, k + n)),
                   32 << 20) for i in range(ccx)]
    numa = [NumaNode(j, sorted(c for core in cores if core.numa == j for c in core.cpus),
                     [10 if i == j else 12 for i in range(nodes)]) for j in range(nodes)]
    return Topology(packages=1, cores=n, logical_cpus=2 * n, l3_domains=l3, numa_nodes=numa,
                    online_cpus=list(range(2 * n)), smt_threads_per_core=2,
                    package_list=[Package(0, list(range(2 * n)))], core_list=cores,
                    affinity=Affinity(allowed_cpus=list(range(2 * n)), usable_cpus=2 * n), l3_known=True)


def test_l3_domain_snippets_are_exact():
    topo = zen_topology()
    ccx1 = l3_cpu_sets(topo)[1]
    assert ccx1 == [4, 5, 6, 7, 20, 21, 22, 23]
    plan = pinning_plan(ccx1, topo, environ={})   # an environment without binding variables: nothing to clear
    assert [s.kind for s in plan.snippets] == list(KINDS)
    assert plan.threads == 4 and plan.l3_domains == [1] and plan.numa_nodes == [0]
    assert not plan.whole_numa_nodes
    assert plan.snippet("taskset").text == "OMP_NUM_THREADS=4 taskset -c 4-7,20-23 python train.py"
    assert plan.snippet("numactl").text == (
        "OMP_NUM_THREADS=4 numactl --physcpubind=4-7,20-23 --membind=0 python train.py")
    omp = plan.snippet("openmp").text
    assert "export OMP_NUM_THREADS=4" in omp and "OMP_PROC_BIND=close" in omp
    places = re.search(r'OMP_PLACES="([^"]+)"', omp).group(1)
    assert expand_places(places) == [[4, 20], [5, 21], [6, 22], [7, 23]]
    assert plan.snippet("gomp").text == 'OMP_NUM_THREADS=4 GOMP_CPU_AFFINITY="4-7" python train.py'
    assert plan.warnings == []


def test_whole_numa_node_uses_cpunodebind_and_membind():
    topo = zen_topology()
    plan = pinning_plan(numa_cpu_sets(topo)[1], topo, command="python -m bench", environ={})
    assert plan.whole_numa_nodes and plan.numa_nodes == [1]
    assert plan.snippet("numactl").text == (
        "OMP_NUM_THREADS=8 numactl --cpunodebind=1 --membind=1 python -m bench")
    both = pinning_plan(sorted(c for s in numa_cpu_sets(topo).values() for c in s), topo)
    assert "--cpunodebind=0-1 --membind=0-1" in both.snippet("numactl").text


def test_inherited_binding_variables_are_cleared_not_kept():
    """A GOMP_CPU_AFFINITY/OMP_PROC_BIND left in the shell would override the set: every snippet clears it."""
    topo = zen_topology()
    ccx1 = l3_cpu_sets(topo)[1]
    plan = pinning_plan(ccx1, topo, environ={"GOMP_CPU_AFFINITY": "0", "OMP_PROC_BIND": "true", "OMP_NUM_THREADS": "8"})
    assert plan.snippet("taskset").text == (
        "env -u OMP_PROC_BIND -u GOMP_CPU_AFFINITY OMP_NUM_THREADS=4 taskset -c 4-7,20-23 python train.py")
    assert plan.snippet("numactl").text.startswith("env -u OMP_PROC_BIND -u GOMP_CPU_AFFINITY OMP_NUM_THREADS=4 numactl")
    # The OpenMP form sets OMP_PROC_BIND itself and clears the libgomp list; the GOMP form the other way round.
    assert plan.snippet("openmp").text.splitlines()[0] == "unset GOMP_CPU_AFFINITY"
    assert plan.snippet("gomp").text.startswith('env -u OMP_PROC_BIND OMP_NUM_THREADS=4 GOMP_CPU_AFFINITY="4-7"')
    assert "os.environ.pop(name, None)" in plan.snippet("python").text
    # Environment unknown (a saved report from a captured tree, the GUI): clear all four.
    unknown = pinning_plan(ccx1, topo).snippet("taskset").text
    assert unknown.startswith("env " + " ".join(f"-u {v}" for v in AFFINITY_VARS) + " OMP_NUM_THREADS=4 taskset")
    # The prefix alone (for callers that build their own env) never carries the env part.
    assert plan.snippet("taskset").prefix == "taskset -c 4-7,20-23"


def test_partial_multi_node_set_warns_and_uses_localalloc():
    topo = zen_topology()
    plan = pinning_plan([6, 7, 8, 9], topo)
    assert plan.numa_nodes == [0, 1] and not plan.whole_numa_nodes
    assert "--physcpubind=6-9 --localalloc" in plan.snippet("numactl").text
    assert any("L3 domains" in w for w in plan.warnings)
    assert any("in part" in w for w in plan.warnings)


def test_one_thread_per_core_drops_smt_siblings():
    topo = zen_topology()
    assert one_thread_per_core(range(32), topo) == list(range(16))
    assert one_thread_per_core([20, 4, 5], topo) == [4, 5]
    assert cores_of([20, 4, 5], topo) == [[4, 20], [5]]


def test_snippets_are_valid_shell():
    topo = zen_topology()
    plan = pinning_plan([0, 1, 2, 3, 16, 17], topo)
    for s in plan.snippets:
        if s.kind == "python":
            compile(s.text, "<snippet>", "exec")
        else:
            for line in s.text.splitlines():
                shlex.split(line)          # balanced quotes


def test_python_snippet_sets_the_same_cpus():
    topo = zen_topology()
    for cpus in ([1, 2, 3], list(range(32)), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 31]):
        text = pinning_plan(cpus, topo).snippet("python").text
        line = next(ln for ln in text.splitlines() if "sched_setaffinity" in ln)
        expr = line[line.index(",") + 1: line.rindex(")")]
        assert eval(expr) == set(cpus)   # noqa: S307 - our own generated literal


def test_omp_places_compression_round_trips():
    cases = [
        [[0], [1], [2], [3]],
        [[0, 64], [1, 65], [2, 66]],
        [[0], [2], [4], [7], [8]],
        [[3]],
        [[0, 1], [4, 5], [8, 9], [10, 11]],
    ]
    for groups in cases:
        assert expand_places(_omp_places(groups)) == groups


def test_empty_selection_is_a_warning_not_an_error():
    plan = pinning_plan([], zen_topology())
    assert plan.snippets == [] and plan.warnings
    with pytest.raises(KeyError):
        plan.snippet("taskset")


def test_quota_and_disallowed_cpus_warn():
    topo = zen_topology()
    topo.affinity = Affinity(allowed_cpus=list(range(8)), cpu_quota=2.0, usable_cpus=2)
    plan = pinning_plan([0, 1, 2, 3, 8], topo)
    assert any("outside this process's allowed set" in w for w in plan.warnings)
    assert any("quota" in w for w in plan.warnings)


def test_corpus_l3_domains_give_matching_snippets():
    """On real trees: each L3 set gives a taskset list and OMP places covering one thread per core."""
    for name in ("hwloc-memorysidecaches", "hwloc-128arm-2pa2n8cluster4co", "hwloc-64amd64-4s2n4ca2co"):
        topo = probe_topology(machine_root(name), live=False)
        for i, cpus in enumerate(l3_cpu_sets(topo)):
            plan = pinning_plan(cpus, topo)
            assert plan.l3_domains == [i]
            tl = plan.snippet("taskset").text.split("taskset -c ")[1].split()[0]
            assert parse_cpulist(tl) == cpus
            places = expand_places(re.search(r'OMP_PLACES="([^"]+)"', plan.snippet("openmp").text).group(1))
            assert sorted(c for p in places for c in p) == cpus
            assert len(places) == plan.threads
            assert len(places) == len([c for c in topo.core_list if c.l3 == i])
        assert sorted(c for s in package_cpu_sets(topo).values() for c in s) == topo.online_cpus


def test_snippet_prefix_and_launch_prefix():
    topo = zen_topology()
    plan = pinning_plan(numa_cpu_sets(topo)[0], topo)
    assert plan.snippet("numactl").prefix == "numactl --cpunodebind=0 --membind=0"
    assert plan.snippet("taskset").prefix == "taskset -c 0-7,16-23"
    assert launch_prefix(topo, numa_cpu_sets(topo)[1], numa_node=1) == "numactl --cpunodebind=1 --membind=1"
    assert launch_prefix(topo, [4, 5], numa_node=0) == "numactl --physcpubind=4-5 --membind=0"
    assert launch_prefix(topo, [4, 5]) == "taskset -c 4-5"
    one_node = probe_topology(machine_root("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"), live=False)
    assert launch_prefix(one_node, [0, 1, 2, 3]) == "taskset -c 0-3"
    with pytest.raises(ValueError):
        launch_prefix(one_node, [])
