"""The topology map's logic without a window: layout, cache strips, NUMA distances, CCD temperatures."""

from __future__ import annotations

import sys

import pytest

from conftest import machine_root
from cpudoctor.gui import topology_model as tm
from cpudoctor.gui.topology_layout import (CORE_PAD, PU_H, PU_W, STRIP_GAP, STRIP_H, LayoutRules, Placed,
                                           balanced_cols, flow, layout)
from cpudoctor.probes import probe_topology
from cpudoctor.model import Cache, Core, L3Domain, NumaNode, Package, Topology

EPYC_ZEN2 = "hwloc-x86linux-64amd64-4p2n4ca2co"     # 4 packages, AMD: L3 domains are CCXs
HYBRID = "hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"     # Raptor Lake: E-cores share an L2 per 4-core cluster


def zen_socket(ccx: int, cores_per_ccx: int = 2) -> Topology:
    """One AMD socket with ``ccx`` CCXs of ``cores_per_ccx`` single-thread cores."""
    n = ccx * cores_per_ccx
    cores = [Core(0, i, [i], l3=i // cores_per_ccx, numa=0) for i in range(n)]
    l3 = [L3Domain(list(range(j * cores_per_ccx, (j + 1) * cores_per_ccx)), 32 << 20) for j in range(ccx)]
    return Topology(packages=1, cores=n, logical_cpus=n, l3_domains=l3, numa_nodes=[NumaNode(0, list(range(n)), [10])],
                    online_cpus=list(range(n)), smt_threads_per_core=1, package_list=[Package(0, list(range(n)))],
                    core_list=cores, l3_known=True, source="test", vendor="AuthenticAMD", cpu_family=0x19)


def fake_hwmon(root, chips: list[dict[str, float]]) -> None:
    """``root/sys/class/hwmon/hwmonN``: one k10temp chip per socket, inputs in millidegrees (hwmon sysfs ABI)."""
    for n, sensors in enumerate(chips):
        d = root / "sys" / "class" / "hwmon" / f"hwmon{n}"
        d.mkdir(parents=True)
        (d / "name").write_text("k10temp\n")
        for i, (label, celsius) in enumerate(sensors.items(), start=1):
            (d / f"temp{i}_label").write_text(label + "\n")
            (d / f"temp{i}_input").write_text(f"{int(celsius * 1000)}\n")


# -- layout ---------------------------------------------------------------------

def test_flow_fills_rows_evenly_and_wraps():
    boxes = [Placed(50, 20) for _ in range(8)]
    w, h, pos = flow(boxes, max_w=300)
    rows = sorted({y for _x, y, _p in pos})
    assert len(rows) == 2 and [sum(1 for _x, y, _p in pos if y == r) for r in rows] == [4, 4]
    assert w <= 300
    assert balanced_cols(10, 8) == 5


def test_core_strips_sit_above_the_threads_and_widen_the_core():
    topo = zen_socket(1, 1)
    tree = tm.map_tree(topo)
    rules = LayoutRules(header_width=lambda node: 20.0, strip_width=lambda text: 10.0 * len(text),
                        strips={0: ["L2 512 KiB", "L1d 32 KiB"]})
    _w, _h, tops = layout(tree, 800, rules)
    core = next(p for _x, _y, top in tops for _ax, _ay, p in top.walk() if p.node is not None and p.node.kind == "core")
    (px, py, pu), = core.children
    assert py == CORE_PAD + 2 * (STRIP_H + STRIP_GAP)               # two strips, then the thread row
    assert core.w >= 10.0 * len("L2 512 KiB") + 6                   # wide enough for the longest strip
    assert px == pytest.approx((core.w - PU_W) / 2) and core.h == py + PU_H + CORE_PAD


def test_cache_labels_and_shared_l2_boxes_on_a_hybrid_chip(corpus):
    topo = probe_topology(machine_root(HYBRID), live=False)
    strips = tm.core_cache_labels(topo)
    assert strips[0][0].startswith("L2 ") and any(s.startswith("L1d ") for s in strips[0])
    e_core = next(i for i, c in enumerate(topo.core_list) if c.cpus == [12])
    assert not any(s.startswith("L2") for s in strips[e_core])      # its L2 is the cluster's box
    tree = tm.map_tree(topo, caches=True)
    l2 = [n for n in tree.walk() if n.kind == "l2"]
    assert [n.cpus for n in l2] == topo.l2_groups == [[12, 13, 14, 15], [16, 17, 18, 19]]
    assert all(len(n.children) == 4 and all(c.kind == "core" for c in n.children) for n in l2)
    assert "shared by 4 cores" in l2[0].label
    assert not [n for n in tm.map_tree(topo).walk() if n.kind == "l2"]     # only when caches are shown


# -- texts ----------------------------------------------------------------------

def test_numa_distances_and_memory_note(corpus):
    topo = probe_topology(machine_root(EPYC_ZEN2), live=False)
    ids, matrix = tm.numa_distances(topo)
    assert ids == [n.id for n in topo.numa_nodes] and len(matrix) == len(ids)
    assert all(matrix[i][i] == 10 for i in range(len(ids)))
    assert tm.numa_distances(zen_socket(2)) is None                   # one node: nothing to show
    node = next(n for n in tm.map_tree(topo).walk() if n.kind == "numa")
    tip = tm.box_tooltip(node, node.label, topo, tm.index_cpus(topo), {})
    if topo.numa_memory_bytes:
        assert "kernel's MemTotal for this node" in tip
    assert "Distances to nodes" in tip


def test_pu_tooltip_lists_caches(corpus):
    topo = probe_topology(machine_root(HYBRID), live=False)
    facts = tm.index_cpus(topo)
    tip = tm.pu_tooltip(12, topo, facts[12])
    assert "efficiency core (E)" in tip and "L2 " in tip and "shared with 13-15" in tip


# -- per-CCD temperatures ------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hwmon is Linux sysfs")
def test_tccd_sensors_of_a_faked_hwmon_tree_land_on_their_ccx(tmp_path):
    from cpudoctor.probes.live.sampler import Sampler

    # an 8-CCD socket with 4 CCDs populated numbers them by slot: Tccd1, Tccd3, Tccd5, Tccd7
    fake_hwmon(tmp_path, [{"Tctl": 70.0, "Tccd1": 61.0, "Tccd3": 63.5, "Tccd5": 58.0, "Tccd7": 90.0}])
    temps = Sampler(tmp_path).sample().temps_c
    assert temps["k10temp Tccd3"] == 63.5
    placed = tm.ccx_temperatures(zen_socket(4), temps)
    assert {k: v.celsius for k, v in placed.items()} == {0: 61.0, 1: 63.5, 2: 58.0, 3: 90.0}
    assert placed[1].sensor == "k10temp Tccd3" and placed[1].shared_with == 0
    # Zen 2: two CCXs per CCD share its sensor
    zen2 = tm.ccx_temperatures(zen_socket(8), temps)
    assert zen2[2].celsius == zen2[3].celsius == 63.5 and zen2[2].shared_with == 1
    assert "shared with 1 other CCX" in tm.temperature_text(zen2[2])
    # counts that do not divide: no guess
    assert tm.ccx_temperatures(zen_socket(3), temps) == {}
    # Intel has no CCX, and Tctl alone places nothing
    intel = zen_socket(4)
    intel.vendor = "GenuineIntel"
    assert tm.ccx_temperatures(intel, temps) == {}
    assert tm.ccx_temperatures(zen_socket(4), {"k10temp Tctl": 70.0}) == {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hwmon is Linux sysfs")
def test_second_socket_sensors_go_to_the_second_package(tmp_path):
    from cpudoctor.probes.live.sampler import Sampler

    fake_hwmon(tmp_path, [{"Tccd1": 50.0, "Tccd2": 51.0}, {"Tccd1": 60.0, "Tccd2": 61.0}])
    temps = Sampler(tmp_path).sample().temps_c
    two = zen_socket(4)
    for core in two.core_list:
        core.package = 0 if core.l3 < 2 else 1
    two.package_list = [Package(0, [0, 1, 2, 3]), Package(1, [4, 5, 6, 7])]
    placed = tm.ccx_temperatures(two, temps)
    assert {k: v.celsius for k, v in placed.items()} == {0: 50.0, 1: 51.0, 2: 60.0, 3: 61.0}


def test_core_caches_in_order(corpus):
    topo = Topology(core_list=[Core(0, 0, [0, 1])], online_cpus=[0, 1],
                    core_caches=[Cache("L1i", [0, 1], 32 << 10), Cache("L2", [0, 1], 1 << 20),
                                 Cache("L1d", [0, 1], 48 << 10)])
    assert tm.core_cache_labels(topo) == {0: ["L2 1 MiB", "L1d 48 KiB", "L1i 32 KiB"]}


def test_numa_memory_line_says_what_the_node_figure_is_and_when_it_moves():
    """Issue 28, 7: a VM's only NUMA node read 9.2 GiB, then 16.8 GiB, while the Overview said 23.5 GiB."""
    gib = 1 << 30
    topo = Topology(numa_nodes=[NumaNode(0, [0, 1])], numa_memory_bytes={"0": int(9.2 * gib)})
    line = tm.numa_memory_line(topo, int(23.5 * gib), True, "2026-12-01T10:02:33+00:00")
    assert "NUMA node 0's 9.2 GiB is the kernel's MemTotal for that node" in line
    assert "the machine's MemTotal (the Overview's figure) is 23.5 GiB" in line
    assert "read at 2026-12-01 10:02 UTC" in line and "moves with memory hot-plug and the balloon driver" in line
    # bare metal whose nodes add up to MemTotal: nothing to explain
    two = Topology(numa_nodes=[NumaNode(0, [0]), NumaNode(1, [1])], numa_memory_bytes={"0": 32 * gib, "1": 32 * gib})
    assert tm.numa_memory_line(two, 64 * gib - (300 << 20), False, None) == ""
    # nodes that do not add up, even on bare metal: say so, in all
    assert "(40 GiB in all)" in tm.numa_memory_line(
        Topology(numa_nodes=two.numa_nodes, numa_memory_bytes={"0": 32 * gib, "1": 8 * gib}), 64 * gib, False, None)
    assert tm.numa_memory_line(Topology(), 64 * gib, True, None) == ""
