"""Operating-system facts that change how fast (or whether) CPU training runs.

Everything here is read from files under ``root`` so a captured tree gives the
same answers as the live machine: os-release, /proc/version (WSL), cpuinfo's
hypervisor flag, DMI, container markers, cpufreq, transparent huge pages,
/proc/meminfo and the cgroup memory limit. Only the few facts that exist
nowhere in a file tree (libc version, environment variables) are read from the
running process, and only when ``live`` is true.
"""

from __future__ import annotations

import os
import platform
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from cpudoctor.knowledge import SOFTWARE_FACTS
from cpudoctor.kits.cpulist import GarbledValue, parse_int
from cpudoctor.kits.rooted import numbered_dirs, read_int, read_lines, read_text, under
from cpudoctor.model import OsInfo

# cgroup v1 reports "no limit" as a huge page-rounded number (2^63 - 4096 on
# 64-bit kernels); anything above 2^60 bytes is no limit in practice.
_UNLIMITED = 1 << 60


def parse_os_release(text: str | None) -> tuple[str | None, str | None]:
    """``(NAME, VERSION_ID)`` of an os-release file; quotes removed."""
    if not text:
        return None, None
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("\"'")
    name = values.get("NAME") or values.get("PRETTY_NAME")
    version = values.get("VERSION_ID") or values.get("VERSION") or values.get("BUILD_ID")
    return name or None, version or None


def wsl_version(proc_version: str | None) -> int | None:
    """1 or 2 when /proc/version names a WSL kernel, else None.

    WSL2 kernels are built by Microsoft as ``...-microsoft-standard-WSL2``
    (older: ``-microsoft-standard``); WSL1 fakes a kernel whose version ends in
    ``-Microsoft`` (capital M, no "standard").
    """
    if not proc_version:
        return None
    low = proc_version.lower()
    if "microsoft" not in low:
        return None
    return 2 if ("wsl2" in low or "microsoft-standard" in low) else 1


def kernel_from_proc_version(text: str | None) -> str | None:
    """``6.1.0-18-amd64`` from ``Linux version 6.1.0-18-amd64 (...)``."""
    if not text:
        return None
    parts = text.split()
    if len(parts) >= 3 and parts[1] == "version":
        return parts[2]
    return None


def parse_thp(text: str | None) -> str | None:
    """The bracketed (active) value of ``always [madvise] never``."""
    if not text:
        return None
    start, end = text.find("["), text.find("]")
    if 0 <= start < end:
        return text[start + 1 : end].strip() or None
    return None


# 2**43 KiB = 8 PiB: more memory than any machine has; larger meminfo figures are garbled files.
_MAX_MEMINFO = 1 << 43


def parse_meminfo(text: str | None) -> dict[str, int]:
    """/proc/meminfo in bytes (the kernel writes kB, meaning KiB)."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or not fields:
            continue
        try:
            value = parse_int(fields[0], 0, _MAX_MEMINFO)      # ASCII digits, no 4,000-digit "sizes"
        except GarbledValue:
            continue
        out[key.strip()] = value * 1024 if len(fields) > 1 and fields[1].lower() == "kb" else value
    return out


def _first_match(text: str, table: list[dict], key: str) -> str | None:
    low = text.lower()
    for entry in table:
        if entry["match"].lower() in low:
            return entry[key]
    return None


def _cpuinfo_has_hypervisor(root: Path) -> bool | None:
    text = read_text(under(root, "/proc/cpuinfo"))
    if text is None:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return "hypervisor" in value.split()
    return False if text else None


def _virtualization(root: Path, notes: list[str]) -> tuple[bool | None, str | None]:
    facts = SOFTWARE_FACTS.data
    hypervisor = _cpuinfo_has_hypervisor(root)
    dmi = " ".join(
        t for t in (read_text(under(root, f"/sys/class/dmi/id/{f}")) for f in ("sys_vendor", "product_name")) if t
    )
    virt = _first_match(dmi, facts["dmi_virtualization"], "virtualization") if dmi else None
    xen = read_text(under(root, "/sys/hypervisor/type"))
    if virt is None and xen:
        virt = xen.lower()
    vm = True if (hypervisor or virt) else hypervisor
    if vm and virt is None:
        notes.append(UNNAMED_HYPERVISOR)
    if hypervisor is None and not dmi:
        notes.append("virtualization unknown: no /proc/cpuinfo and no DMI under the root")
    return vm, virt


UNNAMED_HYPERVISOR = "which hypervisor is unknown: DMI does not name it"


def hypervisor_from_cpuid(signature: str | None) -> str | None:
    """The hypervisor a CPUID leaf 0x40000000 signature names ("KVMKVMKVM" -> "kvm"); None when unknown."""
    if not signature:
        return None
    wanted = " ".join(signature.split())
    for entry in SOFTWARE_FACTS.data["cpuid_hypervisors"]:
        if " ".join(entry["match"].split()) == wanted:
            return entry["virtualization"]
    return None


def name_hypervisor(os_info: OsInfo, notes: list[str], signature: str | None) -> tuple[OsInfo, list[str]]:
    """``os_info`` and ``notes`` with the hypervisor named from CPUID's hypervisor leaf when DMI did not name it.

    The leaf is read by the CPUID check's child (:mod:`cpudoctor.probes.cpu.cpuid_check`); DMI, where it
    names the hypervisor, stays the answer (a cloud's product name says more than "KVMKVMKVM").
    """
    import dataclasses

    name = hypervisor_from_cpuid(signature)
    if name is None or os_info.virtualization is not None or os_info.vm is False:
        return os_info, notes                   # named already, or the OS's own facts say bare metal
    if name == "hyperv" and os_info.system == "Windows" and os_info.vm is not True:
        return os_info, notes                   # Windows runs itself under Hyper-V (VBS, WSL2): the leaf says so
    said = f"which hypervisor: {name}, from CPUID's hypervisor leaf ({signature!r}); DMI does not name it"
    notes = [said if n == UNNAMED_HYPERVISOR else n for n in notes]
    if said not in notes:
        notes.append(said)
    return dataclasses.replace(os_info, virtualization=name, vm=True), notes


def _container(root: Path, environ: Mapping[str, str] | None) -> str | None:
    """docker | podman | kubernetes | lxc | ... or None; the most specific marker wins."""
    facts = SOFTWARE_FACTS.data
    found: str | None = None
    # Method 1: the runtime's own marker files.
    if under(root, "/.dockerenv").exists():
        found = "docker"
    if under(root, "/run/.containerenv").exists():
        found = "podman"
    # Method 2: systemd-style /run/systemd/container (lxc, systemd-nspawn, podman, docker).
    marker = read_text(under(root, "/run/systemd/container"))
    if marker and found is None:
        found = marker.strip().lower() or None
    # Method 3: cgroup paths of PID 1 (or of the captured process) name the runtime.
    for rel in ("/proc/1/cgroup", "/proc/self/cgroup"):
        text = read_text(under(root, rel))
        if text:
            by_path = _first_match(text, facts["cgroup_containers"], "container")
            if by_path == "kubernetes" or (by_path and found is None):
                found = by_path
            break
    # Method 4: Kubernetes injects this into every pod (live process only).
    if environ is not None and environ.get("KUBERNETES_SERVICE_HOST"):
        found = "kubernetes"
    return found


def _cpufreq(root: Path, info: OsInfo, notes: list[str]) -> None:
    base = under(root, "/sys/devices/system/cpu/cpufreq")
    policies = [f"policy{n}" for n in numbered_dirs(base, "policy")]
    governors: Counter[str] = Counter()
    drivers: Counter[str] = Counter()
    boosts: list[bool] = []
    if policies:
        dirs = [base / p for p in policies]
    else:
        # Old kernels: per-CPU cpufreq folders without policyN.
        cpu_base = under(root, "/sys/devices/system/cpu")
        dirs = [cpu_base / f"cpu{n}" / "cpufreq" for n in numbered_dirs(cpu_base, "cpu")]
    for d in dirs:
        gov, drv = read_text(d / "scaling_governor"), read_text(d / "scaling_driver")
        if gov:
            governors[gov] += 1
        if drv:
            drivers[drv] += 1
        b = read_int(d / "boost")  # amd-pstate per-policy boost (Linux 6.11+)
        if b is not None:
            boosts.append(bool(b))
    if governors:
        info.governor = governors.most_common(1)[0][0]
        if len(governors) > 1:
            notes.append("CPUs use different governors: " + ", ".join(f"{g} x{n}" for g, n in sorted(governors.items())))
    if drivers:
        info.cpufreq_driver = drivers.most_common(1)[0][0]
    if not governors and not drivers:
        notes.append("no cpufreq in sysfs (VM, container or cpufreq disabled): governor and boost unknown")
    # Boost, Method 1: global switch (acpi-cpufreq, older amd-pstate).
    glob = read_int(base / "boost")
    if glob is not None:
        info.boost = bool(glob)
    elif boosts:
        # Method 2: per-policy switches; boost is on only if every policy has it.
        info.boost = all(boosts)
    else:
        # Method 3: intel_pstate exposes the inverse.
        no_turbo = read_int(under(root, "/sys/devices/system/cpu/intel_pstate/no_turbo"))
        if no_turbo is not None:
            info.boost = not no_turbo


def _cgroup_memory_limit(root: Path) -> int | None:
    """Smallest memory limit on the path of this process's cgroup, None when unlimited/unknown."""
    lines = read_lines(under(root, "/proc/self/cgroup")) or []
    v2_path = v1_path = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_path = parts[2]
        elif "memory" in parts[1].split(","):
            v1_path = parts[2]
    limits: list[int] = []

    def walk(base: Path, rel: str | None, name: str) -> None:
        # Walk from the process's cgroup up to the mount root: a parent's limit binds too.
        # Inside a container the path from /proc/self/cgroup may not exist under
        # the (namespaced) mount, so the mount root itself is always checked.
        parts = [p for p in (rel or "").split("/") if p]
        for depth in range(len(parts), -1, -1):
            text = read_text(base.joinpath(*parts[:depth], name))
            if text is None or text == "max":
                continue
            try:
                value = parse_int(text, 0)
            except GarbledValue:
                continue
            if 0 < value < _UNLIMITED:
                limits.append(value)

    cg = under(root, "/sys/fs/cgroup")
    if (cg / "cgroup.controllers").exists() or (cg / "memory.max").exists() or v2_path is not None:
        walk(cg, v2_path, "memory.max")
    walk(cg / "memory", v1_path, "memory.limit_in_bytes")
    return min(limits) if limits else None


def libc_version() -> str | None:
    """``glibc 2.36`` / ``musl`` of the running interpreter (live machine only)."""
    try:
        lib, ver = platform.libc_ver()
    except OSError:
        lib, ver = "", ""
    if lib:
        return f"{lib} {ver}".strip()
    try:
        conf = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        conf = None
    return conf or None


def probe_os(root: Path = Path("/"), environ: Mapping[str, str] | None = None) -> tuple[OsInfo, list[str]]:
    """OS facts under ``root`` and notes on what could not be known.

    ``environ`` is the live environment, given only when ``root`` is the live
    machine: WSL_DISTRO_NAME and KUBERNETES_SERVICE_HOST say nothing about a
    captured tree.
    """
    root = Path(root)
    live = environ is not None
    notes: list[str] = []
    info = OsInfo()

    proc_version = read_text(under(root, "/proc/version"))
    info.kernel = read_text(under(root, "/proc/sys/kernel/osrelease")) or kernel_from_proc_version(proc_version)
    linux_tree = under(root, "/proc/cpuinfo").exists() or under(root, "/sys/devices/system/cpu").is_dir()
    if proc_version or info.kernel or linux_tree:
        info.system = "Linux"  # /proc and /sys in this shape exist only on Linux
    elif live:  # macOS, Windows: ask the interpreter
        info.system = platform.system() or None
        info.kernel = platform.release() or None
    if info.system is None:
        notes.append("operating system unknown: no /proc or /sys under the root")
    elif info.kernel is None and info.system == "Linux":
        notes.append("kernel version unknown: no /proc/version under the root")

    name, version = parse_os_release(read_text(under(root, "/etc/os-release")) or read_text(under(root, "/usr/lib/os-release")))
    info.distro, info.distro_version = name, version
    if name is None and info.system == "Linux":
        notes.append("distribution unknown: no /etc/os-release")
    elif name is None and live and info.system == "Darwin":
        info.distro, info.distro_version = "macOS", platform.mac_ver()[0] or None

    info.wsl = wsl_version(proc_version)
    if info.wsl is None and live and environ.get("WSL_DISTRO_NAME"):
        # WSL says so in the environment even when /proc/version is unreadable.
        info.wsl = 2
        notes.append("WSL detected from WSL_DISTRO_NAME; version assumed 2 (the default since 2020)")

    info.vm, info.virtualization = _virtualization(root, notes)
    if info.wsl == 2:
        info.vm, info.virtualization = True, info.virtualization or "hyperv"
    info.container = _container(root, environ)

    _cpufreq(root, info, notes)
    info.thp = parse_thp(read_text(under(root, "/sys/kernel/mm/transparent_hugepage/enabled")))
    if info.thp is None:
        notes.append("transparent huge pages unknown: no /sys/kernel/mm/transparent_hugepage/enabled")

    mem = parse_meminfo(read_text(under(root, "/proc/meminfo")))
    if mem:
        info.mem_total_bytes = mem.get("MemTotal")
        info.mem_available_bytes = mem.get("MemAvailable", mem.get("MemFree"))
        info.swap_total_bytes = mem.get("SwapTotal")
        if "SwapTotal" in mem and "SwapFree" in mem:
            info.swap_used_bytes = mem["SwapTotal"] - mem["SwapFree"]
    else:
        notes.append("memory unknown: no /proc/meminfo under the root")
    info.cgroup_memory_limit_bytes = _cgroup_memory_limit(root)

    if live and info.system == "Linux":
        info.libc = libc_version()
    # The hostname is deliberately not collected: reports get pasted publicly.
    return info, notes
