"""Topology probe: every corpus machine against hwloc's ground truth, plus synthetic edge cases."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from conftest import HWLOC_MACHINES, MACHINES, MANIFEST, machine_root
from live_sources import lscpu_rows, sysfs_online_cpus
from cpudoctor.probes.cgroup import read_cgroup_limits
from cpudoctor.kits.cpulist import format_cpulist, parse_cpulist
from cpudoctor.model import Topology
from cpudoctor.probes import probe_topology
from cpudoctor.model.serde import from_data, to_data

PYCPUINFO = [m for m in MACHINES if m.startswith("pycpuinfo-")]
CGROUP_TREES = [
    "hwloc-16amd64-8n2c-cpusets",
    "hwloc-16amd64-4n4c-cgroup-distance-merge",
    "hwloc-32amd64-4s2n4c-cgroup2",
]


@functools.lru_cache(maxsize=None)
def corpus_topology(name: str) -> Topology:
    """Probe a corpus tree once per session (tests only read the result)."""
    return probe_topology(machine_root(name), live=False)


@pytest.mark.parametrize("name", HWLOC_MACHINES)
def test_hwloc_machine_matches_ground_truth(manifest, name):
    gt = manifest["machines"][name]["ground_truth"]
    topo = corpus_topology(name)
    assert topo.source == "sysfs"
    assert topo.packages == gt["packages"]
    assert len(topo.numa_nodes) == gt["numa_nodes"]
    assert len(topo.l3_domains) == gt["l3_caches"]
    assert topo.cores == gt["cores"]
    assert topo.logical_cpus == gt["pus"]
    assert topo.online_cpus == parse_cpulist(gt["pu_list"])
    # NUMA nodes: OS index and PU set, in order.
    assert [(n.id, format_cpulist(n.cpus)) for n in topo.numa_nodes] == [
        (d["os_index"], d["pus"]) for d in gt["numa_nodes_detail"]]
    # L3: PU sets and exact sizes; the public list is sorted by first CPU.
    assert sorted((format_cpulist(d.cpus), d.size_bytes) for d in topo.l3_domains) == sorted(
        (d["pus"], d["size_kib_exact"] * 1024) for d in gt.get("l3_detail", []))
    assert [d.cpus[0] for d in topo.l3_domains] == sorted(d.cpus[0] for d in topo.l3_domains)
    assert sorted({d.size_bytes // 1024 for d in topo.l3_domains}) == sorted(gt.get("l3_size_kib_exact", []))
    # Packages: physical_package_id (36, 8442, ...) and PU sets.
    assert sorted((p.id, format_cpulist(p.cpus)) for p in topo.package_list) == sorted(
        (d["os_index"], d["pus"]) for d in gt["packages_detail"])
    # Every online CPU is in exactly one core; cores agree with the per-CPU lists.
    all_cpus = sorted(c for core in topo.core_list for c in core.cpus)
    assert all_cpus == topo.online_cpus
    assert len(topo.core_list) == topo.cores
    assert topo.l3_known is True


def test_bulldozer_cmt_is_64_cores_of_one_thread(manifest):
    """hwloc's ground truth: compute-unit pairs with distinct core_ids are two cores."""
    for name in ("hwloc-64amd64-4s2n4ca2co", "hwloc-x86linux-64amd64-4p2n4ca2co"):
        topo = corpus_topology(name)
        naive = manifest["machines"][name]["sysfs_naive_reading"]
        assert topo.cores == 64 and topo.smt_threads_per_core == 1
        assert naive["cores_by_thread_siblings"] == 32   # what a naive reader gets
        # the compute units stay visible as shared-L2 pairs
        assert len(topo.l2_groups) == 32 and all(len(g) == 2 for g in topo.l2_groups)


def test_offline_cpus_and_offline_node():
    topo = corpus_topology("hwloc-offline-cpu0-node0")
    assert topo.offline_cpus == [0, 1, 2, 3, 21, 22, 23]
    # L3 shared_cpu_list and node1/cpulist include offline CPUs; they must be dropped.
    assert all(c in topo.online_cpus for d in topo.l3_domains for c in d.cpus)
    assert [n.id for n in topo.numa_nodes] == [1]
    assert any("no online NUMA node" in n for n in topo.notes)
    pkg0_core = next(c for c in topo.core_list if c.cpus == [4])
    assert pkg0_core.numa is None and pkg0_core.l3 == 0


def test_sparse_numa_ids_and_distances():
    topo = corpus_topology("hwloc-48amd64-4pa2n6c-sparse")
    ids = [n.id for n in topo.numa_nodes]
    assert ids == [0, 1, 2, 33, 34, 45, 72, 73]
    node33 = topo.numa_nodes[3]
    assert node33.distances == [22, 16, 16, 10, 16, 16, 22, 22]
    assert all(len(n.distances) == len(ids) for n in topo.numa_nodes)
    assert topo.numa_memory_bytes["33"] == 16777216 * 1024


def test_nul_bytes_everywhere_arm():
    topo = corpus_topology("hwloc-128arm-2pa2n8cluster4co")
    assert sorted(p.id for p in topo.package_list) == [36, 8442]
    assert topo.cores == 128 and topo.logical_cpus == 128


def test_no_l3_on_k8_is_known_absent():
    topo = corpus_topology("hwloc-16amd64-8n2c")
    assert topo.l3_known is True and topo.l3_domains == []
    assert any("no L3" in n for n in topo.notes)


@pytest.mark.parametrize("name", CGROUP_TREES)
def test_cgroup_allowed_view(manifest, name):
    """A captured tree: the cpuset found in it is the allowed set (hwloc's default view)."""
    allowed = manifest["machines"][name]["ground_truth"]["cgroup_allowed_view_from_hwloc_expected_output"]
    topo = corpus_topology(name)
    assert format_cpulist(topo.affinity.allowed_cpus) == allowed["pu_list"]
    assert topo.affinity.usable_cpus == allowed["pus"]
    allowed_set = set(topo.affinity.allowed_cpus)
    # Objects seen through the cpuset: non-empty PU sets agree with hwloc's allowed view.
    l3_view = [format_cpulist(sorted(set(d.cpus) & allowed_set)) for d in topo.l3_domains]
    assert [s for s in l3_view if s] == [s for s in allowed["l3_pu_sets"] if s]
    pkg_view = [format_cpulist(sorted(set(p.cpus) & allowed_set)) for p in topo.package_list]
    assert sorted(s for s in pkg_view if s) == sorted(s for s in allowed["package_pu_sets"] if s)
    # NUMA nodes hwloc keeps are the allowed memory nodes.
    mems = topo.affinity.allowed_mems
    assert mems is not None and len([n for n in topo.numa_nodes if n.id in mems]) == allowed["numa_nodes"]
    numa_view = [format_cpulist(sorted(set(n.cpus) & allowed_set)) for n in topo.numa_nodes if n.id in mems]
    assert numa_view == allowed["numa_pu_sets"]
    assert any("allows" in n for n in topo.notes)


@pytest.mark.parametrize("name", PYCPUINFO)
def test_cpuinfo_only_dumps(manifest, name):
    gt = manifest["machines"][name]["ground_truth"]
    topo = corpus_topology(name)
    assert topo.source == "cpuinfo"
    assert (topo.packages, topo.cores, topo.logical_cpus) == (gt["packages"], gt["cores"], gt["pus"])
    assert topo.l3_known is False and topo.l3_domains == []
    assert any("unknown" in n for n in topo.notes)


def test_every_corpus_machine_probes_without_error():
    for name in MACHINES:
        topo = corpus_topology(name)
        assert isinstance(topo, Topology)
        # public JSON contract, exact keys
        data = to_data(topo)
        assert all(set(d) == {"cpus", "size_bytes"} for d in data["l3_domains"])
        assert all(set(d) == {"id", "cpus", "distances"} for d in data["numa_nodes"])
        assert from_data(Topology, data) == topo


def test_empty_root_gives_unknown_with_note(tmp_path):
    topo = probe_topology(tmp_path, live=False)
    assert topo.logical_cpus is None and topo.notes


@pytest.mark.hardware
def test_live_machine_agrees_with_sysfs_lscpu_and_the_affinity():
    """This machine's topology against the kernel's online list, util-linux's `lscpu -p` and
    os.sched_getaffinity: whatever the core count, SMT, NUMA or L3 layout, and under `taskset` too."""
    online = sysfs_online_cpus()
    topo = probe_topology()
    assert topo.source == "sysfs"
    assert topo.online_cpus == online and topo.logical_cpus == len(online)
    allowed = sorted(os.sched_getaffinity(0))
    assert topo.affinity.allowed_cpus == allowed
    assert 1 <= topo.affinity.usable_cpus <= len(allowed)
    rows = [r for r in lscpu_rows() if r.cpu in online]
    assert sorted(r.cpu for r in rows) == online
    if all(r.socket is not None and r.core is not None for r in rows):
        assert topo.packages == len({r.socket for r in rows})
        assert topo.cores == len({(r.socket, r.core) for r in rows})
    if all(r.l3 is not None for r in rows):
        by_l3 = {}
        for r in rows:
            by_l3.setdefault(r.l3, []).append(r.cpu)
        assert sorted(sorted(d.cpus) for d in topo.l3_domains) == sorted(by_l3.values())
    if all(r.node is not None for r in rows):
        by_node = {}
        for r in rows:
            by_node.setdefault(r.node, []).append(r.cpu)
        assert {n.id: sorted(n.cpus) for n in topo.numa_nodes if n.cpus} == by_node


# ---------------------------------------------------------------------------
# Synthetic sysfs trees


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def build_sysfs(root: Path, *, packages: int, ccx_per_pkg: list[list[int]], smt: int = 2,
               l3_kib: list[int] | None = None, numa: list[list[int]] | None = None,
               distances: list[list[int]] | None = None, offline: list[int] = (), caches: bool = True,
               smt_interleave: bool = True) -> dict[int, int]:
    """A Zen-like tree. ``ccx_per_pkg[p]`` = core counts of each CCX (L3) of package p.

    CPU numbering follows Linux on AMD: all first threads, then all second
    threads (``cpu + n_cores`` is the sibling). Returns {cpu: l3 index}.
    """
    cpu_root = root / "sys/devices/system/cpu"
    n_cores = sum(sum(c) for c in ccx_per_pkg)
    l3_members: list[list[int]] = []
    core = 0
    core_info = []
    for pkg in range(packages):
        for ccx_cores in ccx_per_pkg[pkg]:
            members = []
            for _ in range(ccx_cores):
                threads = [core + t * n_cores for t in range(smt)] if smt_interleave else [core]
                members += threads
                core_info.append((pkg, core, threads))
                core += 1
            l3_members.append(sorted(members))
    l3_of = {c: i for i, m in enumerate(l3_members) for c in m}
    all_cpus = sorted(c for _, _, t in core_info for c in t)
    online = [c for c in all_cpus if c not in offline]
    _w(cpu_root / "online", format_cpulist(online))
    _w(cpu_root / "possible", format_cpulist(all_cpus))
    if offline:
        _w(cpu_root / "offline", format_cpulist(offline))
    for pkg, core_id, threads in core_info:
        for c in threads:
            d = cpu_root / f"cpu{c}"
            if c in offline:
                _w(d / "online", "0")
                continue
            _w(d / "topology/physical_package_id", str(pkg))
            _w(d / "topology/die_id", str(l3_of[c]))
            _w(d / "topology/core_id", str(core_id))
            _w(d / "topology/thread_siblings_list", format_cpulist(threads))
            if caches:
                _w(d / "cache/index0/level", "1")
                _w(d / "cache/index0/type", "Data")
                _w(d / "cache/index0/size", "32K")
                _w(d / "cache/index0/shared_cpu_list", format_cpulist(threads))
                _w(d / "cache/index1/level", "1")
                _w(d / "cache/index1/type", "Instruction")
                _w(d / "cache/index1/size", "32K")
                _w(d / "cache/index1/shared_cpu_list", format_cpulist(threads))
                _w(d / "cache/index2/level", "2")
                _w(d / "cache/index2/type", "Unified")
                _w(d / "cache/index2/size", "1024K")
                _w(d / "cache/index2/shared_cpu_list", format_cpulist(threads))
                _w(d / "cache/index3/level", "3")
                _w(d / "cache/index3/type", "Unified")
                size = (l3_kib or [32768] * len(l3_members))[l3_of[c]]
                _w(d / "cache/index3/size", f"{size}K")
                _w(d / "cache/index3/shared_cpu_list", format_cpulist(l3_members[l3_of[c]]))
    node_root = root / "sys/devices/system/node"
    numa = numa if numa is not None else [all_cpus]
    _w(node_root / "online", format_cpulist(range(len(numa))))
    for k, cpus in enumerate(numa):
        _w(node_root / f"node{k}/cpulist", format_cpulist(cpus))
        row = distances[k] if distances else [10 if i == k else 32 for i in range(len(numa))]
        _w(node_root / f"node{k}/distance", " ".join(map(str, row)))
        _w(node_root / f"node{k}/meminfo", f"Node {k} MemTotal:       65536000 kB\nNode {k} MemFree: 1 kB")
    return l3_of


def test_asymmetric_l3_7950x3d(tmp_path):
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[8, 8]], l3_kib=[98304, 32768])
    topo = probe_topology(tmp_path, live=False)
    assert topo.cores == 16 and topo.logical_cpus == 32 and topo.smt_threads_per_core == 2
    assert [(format_cpulist(d.cpus), d.size_bytes) for d in topo.l3_domains] == [
        ("0-7,16-23", 96 << 20), ("8-15,24-31", 32 << 20)]
    assert topo.core_list[0].cpus == [0, 16] and topo.core_list[0].l3 == 0
    assert topo.core_list[15].l3 == 1


def test_zen2_two_ccx_per_ccd(tmp_path):
    # Ryzen 9 3950X: 2 CCDs x 2 CCX x 4 cores, 16 MiB L3 per CCX.
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[4, 4, 4, 4]], l3_kib=[16384] * 4)
    topo = probe_topology(tmp_path, live=False)
    assert len(topo.l3_domains) == 4
    assert [format_cpulist(d.cpus) for d in topo.l3_domains] == ["0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31"]
    assert all(d.size_bytes == 16 << 20 for d in topo.l3_domains)


def test_two_socket_nps4_epyc(tmp_path):
    # 2 x 32 cores, 8 CCX of 4 cores per socket, NPS4: 4 nodes per socket, 2 CCX each.
    n_cores = 64
    nodes = []
    for k in range(8):
        cores = range(k * 8, k * 8 + 8)
        nodes.append(sorted(list(cores) + [c + n_cores for c in cores]))
    dist = [[10 if i == j else (12 if i // 4 == j // 4 else 32) for j in range(8)] for i in range(8)]
    build_sysfs(tmp_path, packages=2, ccx_per_pkg=[[4] * 8, [4] * 8], numa=nodes, distances=dist)
    topo = probe_topology(tmp_path, live=False)
    assert topo.packages == 2 and topo.cores == 64 and topo.logical_cpus == 128
    assert len(topo.numa_nodes) == 8 and len(topo.l3_domains) == 16
    assert topo.numa_nodes[5].distances == dist[5]
    assert topo.numa_nodes[0].cpus == list(range(8)) + list(range(64, 72))
    assert {c.numa for c in topo.core_list if c.package == 1} == {4, 5, 6, 7}
    assert topo.numa_memory_bytes == {str(k): 65536000 * 1024 for k in range(8)}


def test_smt_off(tmp_path):
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[8, 8]], smt=1)
    topo = probe_topology(tmp_path, live=False)
    assert topo.cores == topo.logical_cpus == 16 and topo.smt_threads_per_core == 1


def test_offline_cpus_synthetic(tmp_path):
    # 8 cores x 2 threads, siblings are n and n + 8; cpu3 (core 3) and cpu12 (core 4) offline
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[4, 4]], offline=[3, 12])
    topo = probe_topology(tmp_path, live=False)
    assert topo.offline_cpus == [3, 12]
    assert topo.logical_cpus == 14 and topo.cores == 8
    assert 3 not in topo.l3_domains[0].cpus and 12 not in topo.l3_domains[1].cpus
    # a core with one thread offline keeps its online sibling
    assert next(c for c in topo.core_list if 11 in c.cpus).cpus == [11]
    assert next(c for c in topo.core_list if 4 in c.cpus).cpus == [4]
    assert any("offline" in n for n in topo.notes)


def test_no_cache_dirs(tmp_path):
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[4]], caches=False)
    topo = probe_topology(tmp_path, live=False)
    assert topo.l3_known is False and topo.l3_domains == []
    assert any("cache" in n and "unknown" in n for n in topo.notes)
    assert topo.cores == 4 and topo.logical_cpus == 8


def _cgroup_v2(root: Path, cpu_max: str, cpuset: str | None = None, path: str = "/docker/abc") -> None:
    _w(root / "proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0")
    _w(root / "proc/self/cgroup", f"0::{path}")
    base = root / "sys/fs/cgroup"
    _w(base / "cgroup.controllers", "cpuset cpu io memory")
    _w(base / path.strip("/") / "cpu.max", cpu_max)
    if cpuset is not None:
        _w(base / path.strip("/") / "cpuset.cpus.effective", cpuset)


def test_cgroup_v2_quota_four_cpus(tmp_path):
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[8, 8]])
    _cgroup_v2(tmp_path, "400000 100000")
    topo = probe_topology(tmp_path, live=False)
    assert topo.affinity.cpu_quota == 4.0
    assert topo.affinity.usable_cpus == 4
    assert len(topo.affinity.allowed_cpus) == 32
    assert any("quota" in n for n in topo.notes)


def test_cgroup_v2_quota_parent_limit_and_fraction(tmp_path):
    _cgroup_v2(tmp_path, "max 100000", cpuset="2-5")
    _w(tmp_path / "sys/fs/cgroup/docker/cpu.max", "150000 100000")     # parent caps the child
    limits = read_cgroup_limits(tmp_path)
    assert limits.cpu_quota == 1.5 and limits.cpuset_cpus == [2, 3, 4, 5] and limits.version == "v2"
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[4]])
    topo = probe_topology(tmp_path, live=False)
    assert topo.affinity.allowed_cpus == [2, 3, 4, 5]
    assert topo.affinity.usable_cpus == 2          # ceil(1.5)


def test_cgroup_v2_unlimited(tmp_path):
    _cgroup_v2(tmp_path, "max 100000")
    assert read_cgroup_limits(tmp_path).cpu_quota is None


def test_cgroup_v1_quota_and_cpuset(tmp_path):
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[8, 8]])
    _w(tmp_path / "proc/self/mounts", "\n".join([
        "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0",
        "cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,cpuset 0 0"]))
    _w(tmp_path / "proc/self/cgroup", "4:cpu,cpuacct:/kubepods/pod1\n3:cpuset:/kubepods/pod1\n0::/")
    cpu = tmp_path / "sys/fs/cgroup/cpu,cpuacct/kubepods/pod1"
    _w(cpu / "cpu.cfs_quota_us", "250000")
    _w(cpu / "cpu.cfs_period_us", "100000")
    _w(tmp_path / "sys/fs/cgroup/cpuset/kubepods/pod1/cpuset.cpus", "0-7")
    topo = probe_topology(tmp_path, live=False)
    assert topo.affinity.cpu_quota == 2.5
    assert topo.affinity.cgroup_cpuset == list(range(8))
    assert topo.affinity.usable_cpus == 3


def test_cgroup_v1_unlimited_quota(tmp_path):
    _w(tmp_path / "proc/self/mounts", "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0")
    _w(tmp_path / "proc/self/cgroup", "1:cpu:/")
    _w(tmp_path / "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1")
    _w(tmp_path / "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000")
    assert read_cgroup_limits(tmp_path).cpu_quota is None


# ---------------------------------------------------------------------------
# Rendering (text tree like lstopo-no-graphics, Markdown)

from cpudoctor.kits.format import cache_size  # noqa: E402
from cpudoctor.render.topology import build_tree, cpus_text, markdown_lines, text_lines  # noqa: E402


@pytest.mark.parametrize("name", HWLOC_MACHINES)
def test_tree_holds_every_core_once(name):
    topo = corpus_topology(name)
    tree = build_tree(topo)
    cores = [n for n in tree.walk() if n.kind == "core"]
    assert sorted(n.index for n in cores) == list(range(topo.cores))
    # every node's CPUs lie inside its parent's
    def check(node):
        for child in node.children:
            assert set(child.cpus) <= set(node.cpus) or node.kind == "machine"
            check(child)
    check(tree)
    lines = text_lines(topo)
    pus = [int(tok) for ln in lines for cell in ln.split("Core ")[1:] for tok in cell.split("PU")[1].split()]
    assert sorted(pus) == topo.online_cpus


def test_repeated_objects_of_one_kind_are_siblings_not_a_chain():
    """`make fuzz`: a Windows capture repeating one cache record 700 times nested each L3 in the one before, a tree
    770 deep that drawing the HTML topology walked for over 30 s. Equal sets of one kind sit side by side."""
    from dataclasses import replace

    from cpudoctor.render.svg_topology import render_svg

    topo = corpus_topology("hwloc-32amd64-4s2n4c-cgroup2")
    first = topo.l3_domains[0]
    topo = replace(topo, l3_domains=list(topo.l3_domains) + [replace(first) for _ in range(700)])
    tree = build_tree(topo)

    def depth(node) -> int:
        return 1 + max((depth(c) for c in node.children), default=0)

    assert depth(tree) <= 5
    copies = [n for n in tree.walk() if n.kind == "l3" and n.cpus == first.cpus]
    assert len(copies) == 701 and all(not any(c.kind == "l3" for c in n.children) for n in copies)
    assert "<svg" in render_svg(topo)


def test_tree_nesting_follows_the_machine():
    # IBM x3950: each NUMA node spans 4 packages.
    tree = build_tree(corpus_topology("hwloc-96em64t-4no4pa3ca2co"))
    assert [c.kind for c in tree.children] == ["numa"] * 4
    assert {g.kind for c in tree.children for g in c.children} == {"package"}
    # SNC2: one L3 per package holds two NUMA nodes.
    tree = build_tree(corpus_topology("hwloc-memorysidecaches"))
    pkg = tree.children[0]
    assert pkg.kind == "package" and pkg.children[0].kind == "l3"
    assert [c.kind for c in pkg.children[0].children] == ["numa", "numa"]
    # usual AMD: package > NUMA > L3 (CCX)
    tree = build_tree(corpus_topology("hwloc-32amd64-4s2n4c-cgroup2"))
    assert [n.kind for n in tree.walk()][:5] == ["machine", "package", "numa", "l3", "core"]


def test_text_and_markdown_sections():
    topo = corpus_topology("hwloc-32amd64-4s2n4c-cgroup2")
    text = "\n".join(text_lines(topo))
    # K10 Magny-Cours (family 0x10): an L3 per die, but "CCX" is a Zen term.
    assert topo.cpu_family == 0x10
    assert text.startswith("4 packages, 32 cores, 32 logical CPUs (no SMT), 8 L3 domains, 8 NUMA nodes")
    assert "L3 #3 · 5118 KiB  CPUs 12-15" in text and "CCX" not in text
    assert "Usable: 6 CPUs" in text and "allowed 0-5 by the cgroup cpuset" in text
    md = markdown_lines(topo)
    assert "| L3 | L3 size | Package | NUMA node | Cores | CPUs |" in md
    assert "| 3 | 5118 KiB | 1 | 3 | 4 | 12-15 |" in md
    assert md.count("```text") == 1 and md[-1] == "</details>"
    # The same layout on a Zen part (family 0x17 and later) names its L3 domains CCXs.
    topo.cpu_family = 0x19
    text = "\n".join(text_lines(topo))
    assert "8 L3 domains (CCXs)" in text and "L3 5118 KiB · CCX 3  CPUs 12-15" in text
    assert "| CCX | L3 size | Package | NUMA node | Cores | CPUs |" in markdown_lines(topo)


def test_no_l3_at_all_says_so():
    """K8 Opterons have no L3: the summary says "no L3", not "0 L3 domains (CCXs)"."""
    text = text_lines(corpus_topology("hwloc-16amd64-8n2c"))[0]
    assert "no L3" in text and "0 L3" not in text and "CCX" not in text


def test_render_unknown_topology_does_not_crash():
    topo = corpus_topology("archspec-rocky9-zen5")
    assert text_lines(topo)[0].endswith("L3 unknown")
    assert markdown_lines(Topology())
    assert "cores unknown" in text_lines(corpus_topology("archspec-rocky8-a64fx"))[0]   # not "? cores"


def test_render_helpers():
    assert cache_size(32 << 20) == "32 MiB"
    assert cache_size(28160 * 1024) == "27.5 MiB"
    assert cache_size(5118 * 1024) == "5118 KiB"
    assert cpus_text(list(range(0, 80, 2))) == "0-78:2"
    assert cpus_text([0, 1, 2, 3]) == "0-3"
    assert parse_cpulist(cpus_text(list(range(1, 80, 4)) + [90])) == list(range(1, 80, 4)) + [90]


def test_no_sysfs_on_live_system_uses_psutil_counts(tmp_path):
    """macOS/Windows path: no /sys, no /proc: counts from psutil, topology unknown, a note."""
    import psutil

    topo = probe_topology(tmp_path, live=True)
    assert topo.source == "psutil"
    assert topo.logical_cpus == psutil.cpu_count(logical=True)
    assert topo.cores == psutil.cpu_count(logical=False)
    assert topo.l3_known is False and topo.l3_domains == [] and topo.numa_nodes == []
    assert any("only CPU counts" in n for n in topo.notes)
    assert "L3 unknown" in text_lines(topo)[0]


def test_size_units():
    from cpudoctor.kits.format import size

    assert size(8 << 30) == "8 GiB"
    assert size(int(6.1 * (1 << 30))) == "6.1 GiB"
    assert size(512 << 30) == "512 GiB"
    assert size(int(23.5 * (1 << 30))) == "23.5 GiB"        # one style everywhere: never "24 GiB" elsewhere
    assert size(1536) == "1.5 KiB" and size(100) == "100 B"
    assert size(None) == "unknown" and size(None, "?") == "?"


def test_shared_l2_groups():
    """Raptor Lake E-cores share one L2 per 4-core cluster; P-cores (SMT pairs) do not count."""
    topo = corpus_topology("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t")
    assert topo.l2_groups == [[12, 13, 14, 15], [16, 17, 18, 19]]
    assert topo.smt_threads_per_core == 2 and topo.cores == 14
    assert corpus_topology("hwloc-memorysidecaches").l2_groups == []


def test_cpuset_without_online_cpus_is_ignored(tmp_path):
    build_sysfs(tmp_path, packages=1, ccx_per_pkg=[[4]])
    _cgroup_v2(tmp_path, "max 100000", cpuset="40-47")
    topo = probe_topology(tmp_path, live=False)
    assert topo.affinity.cgroup_cpuset is None and topo.affinity.usable_cpus == 8
    assert any("lists no online CPU" in n for n in topo.notes)


@pytest.mark.parametrize("name", HWLOC_MACHINES)
def test_cpu_kinds_match_hwloc(name, manifest):
    """Hybrid core kinds equal hwloc's cpukinds (Raptor Lake P/E, Lakefield, GB10 X925/A725); none elsewhere."""
    truth = manifest["machines"][name]["ground_truth"].get("cpukinds") or []
    kinds = corpus_topology(name).cpu_kinds
    if len(truth) < 2:
        assert kinds == []      # one kind, e.g. preferred-core rankings or equal capacities, is not hybrid
    else:
        assert [format_cpulist(k.cpus) for k in kinds] == [k["pus"] for k in truth]   # slowest first, like hwloc
        assert kinds[0].perf < kinds[-1].perf
    line = "\n".join(text_lines(corpus_topology(name)))
    assert ("Hybrid core kinds: performance CPUs" in line) == (len(truth) >= 2)


@pytest.mark.parametrize("machine, ccx", [
    ("hwloc-64amd64-4s2n4ca2co", False),        # Bulldozer: an L3 per die, not a CCX
    ("hwloc-32amd64-4s2n4c-cgroup2", False),    # Magny-Cours (K10)
    ("hwloc-memorysidecaches", False),          # Intel
    ("pycpuinfo-ubuntu22.04-ryzen7-2700x", True),  # Zen: two CCXs
])
def test_l3_is_a_ccx_only_on_zen(corpus, machine, ccx):
    assert probe_topology(machine_root(machine)).l3_is_ccx() is ccx


@pytest.mark.parametrize("name", [m for m in HWLOC_MACHINES if "l2_caches" in MANIFEST["machines"][m]["ground_truth"]])
def test_l1_l2_caches_match_hwloc(name):
    """The map's L1/L2 boxes: as many L2 caches as hwloc counts, every core covered by an L1d."""
    truth = MANIFEST["machines"][name]["ground_truth"]
    topo = corpus_topology(name)
    l2 = [c for c in topo.core_caches if c.name == "L2"]
    assert len(l2) == truth["l2_caches"]
    l1d = {cpu for c in topo.core_caches if c.name == "L1d" for cpu in c.cpus}
    if l1d:                                  # some dumps carry no L1 directories
        assert l1d == set(topo.online_cpus)
    assert all(c.size_bytes is None or c.size_bytes > 0 for c in topo.core_caches)
