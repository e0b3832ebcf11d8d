"""What the running machine says about itself, read WITHOUT CPU Doctor's probes.

The live-machine tests (``@pytest.mark.hardware``) compare a probe's answer with
one of these readers, so they hold on whatever machine runs them: a 2-core
Intel guest with AVX-512, a Zen 3 VM without it, a container limited by
``taskset``. Each reader parses the kernel's own text in a few lines of its own
(never the product's parsers) or asks a separate program (``lscpu``), and skips
the calling test, saying what is missing, where the source does not exist
(no /proc on macOS, no lscpu in a slim container).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CPUINFO = Path("/proc/cpuinfo")
SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass
class KernelCpuinfo:
    """The kernel's /proc/cpuinfo: identity of the first processor block, flags common to all."""

    processors: int = 0
    first: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)          # "flags" (x86) or "Features" (ARM), on every CPU

    def int_field(self, key: str) -> int | None:
        value = self.first.get(key)
        return int(value, 0) if value else None


def kernel_cpuinfo() -> KernelCpuinfo:
    """/proc/cpuinfo as the kernel prints it; skips the test where there is none."""
    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError as exc:
        pytest.skip(f"no readable /proc/cpuinfo on this machine ({exc}): the Linux machines run this test")
    blocks = [b for b in text.split("\n\n") if b.strip()]
    out = KernelCpuinfo()
    flag_sets: list[set[str]] = []
    for block in blocks:
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if "processor" not in fields:
            continue
        out.processors += 1
        if not out.first:
            out.first = fields
        line = fields.get("flags") or fields.get("Features")
        if line is not None:
            flag_sets.append(set(line.split()))
    out.flags = set.intersection(*flag_sets) if flag_sets else set()
    return out


def cpulist(text: str) -> list[int]:
    """The kernel's list format ("0-3,8,10-11") as numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def sysfs_online_cpus() -> list[int]:
    """/sys/devices/system/cpu/online; skips the test where sysfs does not list it."""
    try:
        return cpulist((SYS_CPU / "online").read_text())
    except OSError as exc:
        pytest.skip(f"no /sys/devices/system/cpu/online here ({exc}): the Linux machines with sysfs run this test")


@dataclass
class LscpuRow:
    cpu: int
    core: int | None
    socket: int | None
    node: int | None
    l3: int | None


def lscpu_rows() -> list[LscpuRow]:
    """``lscpu -p``: one row per online CPU with its core, socket, NUMA node and L3 (util-linux's reading)."""
    exe = shutil.which("lscpu")
    if exe is None:
        pytest.skip("lscpu (util-linux) is not installed: a machine with it runs this cross-check")
    proc = subprocess.run([exe, "-p=CPU,CORE,SOCKET,NODE,CACHE"], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        pytest.skip(f"lscpu -p failed here ({proc.stderr.strip()[:200]}): a machine where it works runs this test")
    header: list[str] = []
    rows: list[LscpuRow] = []
    for line in proc.stdout.splitlines():
        if line.startswith("#"):
            header = line.lstrip("# ").split(",")       # CPU,Core,Socket,Node,,L1d,L1i,L2,L3
            continue
        if not line.strip():
            continue
        cols = dict(zip(header, line.split(","))) if header else {}

        def num(name: str) -> int | None:
            value = cols.get(name, "")
            return int(value) if value.strip().isdigit() else None

        rows.append(LscpuRow(cpu=int(line.split(",")[0]), core=num("Core"), socket=num("Socket"),
                             node=num("Node"), l3=num("L3")))
    return rows


def lscpu_fields() -> dict[str, str]:
    """``lscpu``'s summary ("Vendor ID", "CPU family", "Model", "Flags", ...), in the C locale."""
    exe = shutil.which("lscpu")
    if exe is None:
        pytest.skip("lscpu (util-linux) is not installed: a machine with it runs this cross-check")
    proc = subprocess.run([exe], capture_output=True, text=True, timeout=30, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        pytest.skip(f"lscpu failed here ({proc.stderr.strip()[:200]}): a machine where it works runs this test")
    fields: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return fields
