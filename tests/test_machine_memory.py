"""The machine's memory is MemTotal, never the NUMA nodes' sum; a note says when the nodes do not add up.

Issue 26: the text report said "Machine (10.8 GiB total)" on a VM whose MemTotal was 23.5 GiB: its kernel
reports per-node totals that move and do not add up.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cpudoctor.kits.format import size
from cpudoctor.probes import probe_topology
from cpudoctor.render.topology import display_notes, text_lines, tree_lines
from tests.conftest import machine_root


def _tree_with_meminfo(tmp_path: Path, mem_total_kib: int | None) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), root, symlinks=True)
    if mem_total_kib is not None:
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc" / "meminfo").write_text(f"MemTotal:       {mem_total_kib} kB\nMemFree:        1000 kB\n")
    return root


def _node_sum_kib(root: Path) -> int:
    return sum(int(re.search(r"MemTotal:\s+(\d+)", p.read_text()).group(1))
               for p in (root / "sys/devices/system/node").glob("node*/meminfo"))


def test_nodes_that_do_not_add_up_to_memtotal(tmp_path):
    """This VM's own figures scaled onto a corpus machine: MemTotal is a third more than the nodes' sum."""
    root = _tree_with_meminfo(tmp_path, None)
    nodes = _node_sum_kib(root)
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "meminfo").write_text(f"MemTotal:       {nodes * 4 // 3} kB\n")
    topo = probe_topology(root)
    assert topo.memory_total_bytes == nodes * 4 // 3 * 1024
    assert tree_lines(topo)[0] == f"Machine ({size(nodes * 4 // 3 * 1024)} total)"
    note = [n for n in display_notes(topo) if "MemTotal" in n]
    assert len(note) == 1 and note[0].startswith(f"the NUMA nodes' totals add up to {size(nodes * 1024)}, but the "
                                                 f"machine has {size(nodes * 4 // 3 * 1024)}")
    assert any("do not add up" in ln for ln in text_lines(topo))


def test_nodes_that_add_up_get_no_note_and_a_tree_without_meminfo_says_so(tmp_path):
    root = _tree_with_meminfo(tmp_path, None)
    nodes = _node_sum_kib(root)
    topo = probe_topology(root)
    assert topo.memory_total_bytes is None
    assert tree_lines(topo)[0] == f"Machine ({size(nodes * 1024)} in its NUMA nodes; MemTotal unknown)"
    (root / "proc" / "meminfo").write_text(f"MemTotal:       {nodes + 100} kB\n")
    topo = probe_topology(root)
    assert tree_lines(topo)[0] == f"Machine ({size((nodes + 100) * 1024)} total)"
    assert not [n for n in display_notes(topo) if "MemTotal" in n]


@pytest.mark.skipif(shutil.which("free") is None or not Path("/sys/devices/system/node/node0/meminfo").exists(),
                    reason="needs procps' free and NUMA sysfs")
@pytest.mark.hardware
def test_this_machine_line_is_what_free_says():
    """`free -b` (procps) is the independent source of MemTotal; the note appears exactly when the nodes'
    totals on this machine differ from it by more than 2 %."""
    total = int(subprocess.run(["free", "-b"], capture_output=True, text=True, check=True).stdout.splitlines()[1]
                .split()[1])
    topo = probe_topology(Path("/"))
    assert tree_lines(topo)[0] == f"Machine ({size(total)} total)"
    nodes = _node_sum_kib(Path("/")) * 1024
    noted = any("do not add up" in n for n in display_notes(topo))
    assert noted == (abs(nodes - total) > 0.02 * total)


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("tree, recorded", [
    ("windows/threadripper-3990x-win11",
     lambda root: json.loads((root / "windows/system.json").read_text())["memory"]["total"]),
    ("macos/apple-m3-max",
     lambda root: int(re.search(r"^hw\.memsize: (\d+)", (root / "macos/sysctl.txt").read_text(), re.M).group(1))),
])
def test_a_windows_or_mac_capture_states_the_machines_memory(tree, recorded):
    """Windows and macOS have no MemTotal: the machine line carries what the OS recorded (system.json's
    memory total, sysctl's hw.memsize), as the OS section does; it was bare before."""
    root = FIXTURES / tree
    topo = probe_topology(root)
    assert topo.memory_total_bytes == recorded(root)
    assert tree_lines(topo)[0] == f"Machine ({size(recorded(root))} total)"
