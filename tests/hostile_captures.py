"""Windows and macOS captures a few hundred kB long that once took `report --root` over a minute (issue 39).

Each builder copies a real capture (tests/fixtures/windows, tests/fixtures/macos) and
adds what no machine has: thousands of NUMA records, single-CPU processor groups,
records with 65,535 group masks, a ``sysctl.txt`` of 16 performance levels of 4,096
CPUs, or a ``cpu.json`` nested 100,000 deep. Used by tests/test_hostile_surfaces.py
and the fuzz family of capture files (tests/test_fuzz.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import REPO
from cpudoctor.probes.platforms import _windows_lpi as lpi

WINDOWS = REPO / "tests" / "fixtures" / "windows" / "threadripper-3990x-win11"
MACOS = REPO / "tests" / "fixtures" / "macos" / "apple-m3-max"
LPI = "windows/logical-processor-information-ex.bin"


def copy_of(source: Path, folder: Path) -> Path:
    shutil.copytree(source, folder, symlinks=True)
    for p in [folder, *folder.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
        else:
            p.chmod(0o644)
    return folder


def numa_records(count: int = 5000) -> bytes:
    """``count`` NUMA records, each a different node over one group's first CPU."""
    return b"".join(lpi.encode_numa(n, [lpi.GroupMask(n % 2, 1 << (n % 64))]) for n in range(count))


def single_cpu_groups(count: int = 16384) -> bytes:
    """A group record of ``count`` groups of one CPU each, and a core per group."""
    groups = lpi.encode_groups([lpi.GroupInfo(1, 1, 1) for _ in range(count)])
    cores = b"".join(lpi.encode_processor("core", [lpi.GroupMask(g, 1)]) for g in range(count))
    return groups + cores


def many_masks(records: int = 3, masks: int = 65535) -> bytes:
    """``records`` cores whose GroupCount is 65,535, one full mask (64 CPUs) in each of 65,535 groups."""
    one = lpi.encode_processor("core", [lpi.GroupMask(g, (1 << 64) - 1) for g in range(masks)])
    return one * records


def windows_capture(folder: Path, extra: bytes = b"", replace: bytes | None = None) -> Path:
    """The Threadripper capture with ``extra`` records appended to its buffer (or the buffer ``replace``)."""
    root = copy_of(WINDOWS, folder)
    path = root / LPI
    path.write_bytes((path.read_bytes() if replace is None else replace) + extra)
    return root


def deep_cpu_json(folder: Path, depth: int = 100_000) -> Path:
    root = copy_of(WINDOWS, folder)
    (root / "windows" / "cpu.json").write_text('{"pycpuinfo": ' + "[" * depth + "]" * depth + "}")
    return root


def macos_levels(folder: Path, levels: int = 16, cpus: int = 4096) -> Path:
    """The M3 Max capture claiming ``levels`` performance levels of ``cpus`` CPUs, L2 per CPU."""
    root = copy_of(MACOS, folder)
    path = root / "macos" / "sysctl.txt"
    keep = [line for line in path.read_text().splitlines() if not line.startswith(("hw.perflevel", "hw.nperflevels"))]
    lines = [f"hw.nperflevels: {levels}"]
    for level in range(levels):
        lines += [f"hw.perflevel{level}.physicalcpu: {cpus}", f"hw.perflevel{level}.logicalcpu: {cpus}",
                  f"hw.perflevel{level}.l1dcachesize: 65536", f"hw.perflevel{level}.l1icachesize: 131072",
                  f"hw.perflevel{level}.l2cachesize: 4194304", f"hw.perflevel{level}.cpusperl2: 1",
                  f"hw.perflevel{level}.l3cachesize: 8388608", f"hw.perflevel{level}.cpusperl3: 1",
                  f"hw.perflevel{level}.name: level{level}"]
    path.write_text("\n".join(keep + lines) + "\n")
    return root


BUILDERS = {
    "5,000 NUMA records": lambda folder: windows_capture(folder, numa_records()),
    "16,384 single-CPU groups": lambda folder: windows_capture(folder, replace=single_cpu_groups()),
    "65,535 group masks per record": lambda folder: windows_capture(folder, many_masks()),
    "a buffer of 8 MB": lambda folder: windows_capture(folder, many_masks(records=8)),
    "sysctl.txt of 16 levels x 4,096 CPUs": macos_levels,
    "cpu.json nested 100,000 deep": deep_cpu_json,
}
