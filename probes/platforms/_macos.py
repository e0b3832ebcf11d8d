"""macOS, live or captured: cores, performance levels, caches and identity from ``sysctl``.

One text holds everything (``sysctl -a`` keeps its ``name: value`` lines):
live, ``sysctl hw machdep.cpu kern.osproductversion kern.osrelease
sysctl.proc_translated``; in a capture, ``macos/sysctl.txt`` (the same lines,
docs/capture.md). What the report reads:

* Apple silicon: ``hw.nperflevels`` and ``hw.perflevelN.{physicalcpu,logicalcpu,
  l1dcachesize,l1icachesize,l2cachesize,cpusperl2,l3cachesize,cpusperl3,name}``,
  level 0 being the fastest; flags from ``hw.optional.arm.FEAT_*``;
* Intel Macs: ``hw.physicalcpu``/``hw.logicalcpu``, caches from ``hw.cacheconfig``
  (how many logical CPUs share each level: memory, L1, L2, L3) and
  ``hw.cachesize``; identity and flags from ``machdep.cpu.*``.

macOS says how many CPUs share a cache but not which: CPU numbers follow the
order macOS uses on Apple silicon (efficiency cores first, then each faster
level; a shared L2 is a run of neighbouring CPUs) and, on Intel, SMT siblings
next to each other. There is no NUMA and no CPU affinity on macOS: the report
says so, and pinning snippets are not offered.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpudoctor.model import CpuInfo
    from cpudoctor.model.topology import Topology
    from cpudoctor.probes.platforms import Where
    from cpudoctor.model import OsInfo

SYSCTL_FILE = "macos/sysctl.txt"
SYSCTL_KEYS = ("hw", "machdep.cpu", "kern.osproductversion", "kern.osrelease", "kern.osversion",
               "kern.hv_vmm_present", "sysctl.proc_translated")
# What a capture keeps (everything else in ``sysctl -a`` names the machine or changes every second).
KEEP = re.compile(r"^(hw\.|machdep\.cpu\.|kern\.osproductversion|kern\.osrelease|kern\.osversion|"
                  r"kern\.hv_vmm_present|sysctl\.proc_translated)")
SYSCTL_TIMEOUT_S = 10.0
MAX_SYSCTL_BYTES = 1 << 20
# More CPUs than any Mac has by far (the largest has 32): the levels past it are ignored, with a note. A capture
# claiming 16 levels of 4,096 CPUs each once made a report of 65,536 CPUs and took minutes.
MAX_CPUS = 4096

# machdep.cpu.* feature names (Intel CPUID words as macOS spells them) -> Linux /proc/cpuinfo names.
_X86_NAMES = {"avx1.0": "avx", "avx2": "avx2", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "sse3": "pni",
              "em64t": "lm", "htt": "ht", "lahf": "lahf_lm", "lzcnt": "abm", "rdwrfsgs": "fsgsbase",
              "clfsh": "clflush", "x2apic": "x2apic", "avx512f": "avx512f", "avx512cd": "avx512cd",
              "avx512bw": "avx512bw", "avx512dq": "avx512dq", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
              "avx512vbmi": "avx512vbmi", "avx512vnni": "avx512_vnni", "clfsopt": "clflushopt", "xd": "nx",
              "syscall": "syscall", "rdtscp": "rdtscp", "f16c": "f16c", "fma": "fma", "bmi1": "bmi1",
              "bmi2": "bmi2", "popcnt": "popcnt", "movbe": "movbe", "aes": "aes", "pclmulqdq": "pclmulqdq",
              "rdrand": "rdrand", "rdseed": "rdseed", "adx": "adx", "xsave": "xsave", "osxsave": "xsave",
              "cx16": "cx16", "cx8": "cx8", "cmov": "cmov", "mmx": "mmx", "sse": "sse", "sse2": "sse2",
              "ssse3": "ssse3", "fpu": "fpu", "tsc": "tsc", "smep": "smep", "smap": "smap", "erms": "erms",
              "sha": "sha_ni", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq", "gfni": "gfni"}
# hw.optional.arm.* -> Linux arm64 hwcap names (what /proc/cpuinfo's Features line says on Linux).
_ARM_NAMES = {"AdvSIMD": "asimd", "FEAT_FP16": "fphp asimdhp", "FEAT_DotProd": "asimddp", "FEAT_FHM": "asimdfhm",
              "FEAT_RDM": "asimdrdm", "FEAT_BF16": "bf16", "FEAT_I8MM": "i8mm", "FEAT_SME": "sme", "FEAT_SME2": "sme2",
              "FEAT_AES": "aes", "FEAT_PMULL": "pmull", "FEAT_SHA1": "sha1", "FEAT_SHA256": "sha2",
              "FEAT_SHA512": "sha512", "FEAT_SHA3": "sha3", "FEAT_CRC32": "crc32", "FEAT_LSE": "atomics",
              "FEAT_FCMA": "fcma", "FEAT_JSCVT": "jscvt", "FEAT_LRCPC": "lrcpc", "FEAT_LRCPC2": "ilrcpc",
              "FEAT_DPB": "dcpop", "FEAT_DPB2": "dcpodp", "FEAT_SB": "sb", "FEAT_SSBS": "ssbs", "FEAT_BTI": "bti",
              "FEAT_FlagM": "flagm", "FEAT_FlagM2": "flagm2", "FEAT_FRINTTS": "frint", "FEAT_PAuth": "paca pacg",
              "FEAT_DIT": "dit", "FEAT_LSE2": "uscat", "FEAT_ECV": "ecv", "FEAT_AFP": "afp", "FEAT_RPRES": "rpres"}


def parse_sysctl(text: str | None) -> dict[str, str]:
    """``sysctl`` output (``name: value`` lines, or ``name = value`` from older releases) as a dict."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines()[:20000]:
        m = re.match(r"^([A-Za-z0-9_.]{1,120})(?::| =)\s?(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()[:4096]
    return out


def _int(values: dict[str, str], key: str, hi: int = 1 << 62) -> int | None:
    text = values.get(key, "")
    if not re.fullmatch(r"\d{1,19}", text):
        return None
    value = int(text)
    return value if value <= hi else None


def _ints(values: dict[str, str], key: str) -> list[int]:
    return [int(x) for x in values.get(key, "").split()[:16] if re.fullmatch(r"\d{1,19}", x)]


# -- the raw material -----------------------------------------------------------------------------


def sysctl_values(where: "Where", notes: list[str]) -> dict[str, str]:
    if where.live:
        text, why = run_sysctl()
        if why:
            notes.append(why)
        return parse_sysctl(text)
    from cpudoctor.kits.rooted import read_bytes, under

    data = read_bytes(under(where.root, SYSCTL_FILE), MAX_SYSCTL_BYTES)
    if data is None:
        notes.append(f"{SYSCTL_FILE} is missing from the capture")
        return {}
    return parse_sysctl(data.decode("utf-8", errors="replace"))


def run_sysctl() -> tuple[str | None, str | None]:
    """This Mac's ``sysctl`` lines for the keys the report reads (what a capture stores)."""
    if sys.platform != "darwin":
        return None, "sysctl of macOS is only available on a Mac"
    from cpudoctor.kits.child.captured import run_captured

    done = run_captured(["sysctl", *SYSCTL_KEYS], SYSCTL_TIMEOUT_S, what="sysctl")
    if done.status in ("cannot-run", "timeout", "flood"):
        return None, f"sysctl could not run ({done.error or done.status})"
    # A key this macOS lacks (sysctl.proc_translated before Big Sur) makes sysctl exit 1 after printing the rest.
    text = "\n".join(line for line in done.text.splitlines() if KEEP.match(line))
    return (text, None) if text else (None, f"sysctl printed nothing (exit status {done.returncode})")


# -- topology -------------------------------------------------------------------------------------


def topology(where: "Where") -> "Topology":
    notes: list[str] = []
    topo = topology_from_sysctl(sysctl_values(where, notes))
    topo.notes = notes + topo.notes
    return topo


def topology_from_sysctl(values: dict[str, str]) -> "Topology":
    from cpudoctor.model.topology import Affinity, NumaNode, Package, Topology

    topo = Topology(source="sysctl", vendor=values.get("machdep.cpu.vendor") or None,
                    memory_total_bytes=_int(values, "hw.memsize"))     # the machine line's figure
    levels = _int(values, "hw.nperflevels", 16) or 0
    if levels >= 1 and _int(values, "hw.perflevel0.logicalcpu", MAX_CPUS):
        _from_perflevels(topo, values, levels)
    else:
        _from_counts(topo, values)
    if not topo.online_cpus:
        topo.notes.append("sysctl gives no CPU counts: topology unknown")
        return topo
    topo.logical_cpus = len(topo.online_cpus)
    topo.cores = len(topo.core_list)
    topo.smt_threads_per_core = max(len(c.cpus) for c in topo.core_list)
    topo.packages = _int(values, "hw.packages", 64) or 1
    topo.package_list = [Package(0, list(topo.online_cpus))] if topo.packages == 1 else []
    if topo.packages > 1:
        topo.notes.append(f"{topo.packages} packages: macOS does not say which CPUs are on which")
    topo.numa_nodes = [NumaNode(0, list(topo.online_cpus), [10])]
    topo.affinity = Affinity(allowed_cpus=list(topo.online_cpus), usable_cpus=len(topo.online_cpus))
    l3_of = {c: i for i, d in enumerate(topo.l3_domains) for c in d.cpus}
    for core in topo.core_list:
        core.l3, core.numa = l3_of.get(core.cpus[0]), 0
    topo.notes.append("macOS has no NUMA and no CPU affinity: the kernel places every thread itself, so "
                      "only thread counts can be set")
    return topo


def _cores(first: int, cores: int, threads: int, package: int = 0):
    from cpudoctor.model.topology import Core

    return [Core(package=package, core_id=i, cpus=list(range(first + i * threads, first + (i + 1) * threads)))
            for i in range(cores)]


def _runs(cpus: list[int], width: int) -> list[list[int]]:
    """``cpus`` cut into runs of ``width`` neighbours (how macOS shares a cache among its CPU numbers)."""
    width = max(1, width)
    return [cpus[i:i + width] for i in range(0, len(cpus), width)]


def _from_perflevels(topo: "Topology", values: dict[str, str], levels: int) -> None:
    """Apple silicon (and any Mac with hw.perflevel*): slowest level first, as macOS numbers them."""
    from cpudoctor.model.topology import Cache, CpuKind, L3Domain

    first = 0
    for level in range(levels - 1, -1, -1):
        key = f"hw.perflevel{level}."
        logical = _int(values, key + "logicalcpu", MAX_CPUS) or 0
        physical = _int(values, key + "physicalcpu", MAX_CPUS) or logical
        if first + logical > MAX_CPUS:
            topo.notes.append(f"performance levels {level} to 0 would bring the CPUs past {MAX_CPUS:,}, more than "
                              "any Mac has: ignored (the capture is damaged or made up)")
            break
        if not logical or not physical or logical % physical:
            topo.notes.append(f"performance level {level}: {logical} logical CPUs on {physical} cores cannot be "
                              "split evenly: ignored")
            continue
        cores = _cores(first, physical, logical // physical)
        cpus = list(range(first, first + logical))
        topo.core_list += cores
        topo.online_cpus += cpus
        name = values.get(key + "name") or f"level {level}"
        topo.cpu_kinds.insert(0, CpuKind(cpus, levels - level, f"hw.perflevel ({name})"))
        for size_key, cache in (("l1dcachesize", "L1d"), ("l1icachesize", "L1i")):
            size = _int(values, key + size_key)
            topo.core_caches += [Cache(cache, c.cpus, size) for c in cores] if size else []
        l2 = _int(values, key + "l2cachesize")
        if l2:
            groups = _runs(cpus, _int(values, key + "cpusperl2", MAX_CPUS) or logical)
            topo.core_caches += [Cache("L2", g, l2) for g in groups]
            topo.l2_groups += [g for g in groups if len(g) > logical // physical]
        l3 = _int(values, key + "l3cachesize")
        if l3:
            topo.l3_domains += [L3Domain(g, l3) for g in _runs(cpus, _int(values, key + "cpusperl3", MAX_CPUS)
                                                                    or logical)]
        first += logical
    topo.cpu_kinds.sort(key=lambda k: k.perf or 0)
    if len(topo.cpu_kinds) < 2:
        topo.cpu_kinds = []
    topo.core_caches.sort(key=lambda c: (("L2", "L1d", "L1i").index(c.name), c.cpus[0]))
    topo.l3_known = True
    if not topo.l3_domains:
        topo.notes.append("the CPUs report no L3 cache (Apple silicon's system-level cache is not a CPU cache level)")


def _from_counts(topo: "Topology", values: dict[str, str]) -> None:
    """Intel Macs: counts, and cache sharing from hw.cacheconfig / hw.cachesize."""
    from cpudoctor.model.topology import Cache, L3Domain

    logical = _int(values, "hw.logicalcpu", MAX_CPUS) or _int(values, "hw.ncpu", MAX_CPUS) or 0
    physical = _int(values, "hw.physicalcpu", MAX_CPUS) or logical
    if not logical or not physical or logical % physical:
        return
    threads = logical // physical
    topo.core_list = _cores(0, physical, threads)
    topo.online_cpus = list(range(logical))
    if threads > 1:
        topo.notes.append("macOS does not say which logical CPUs are SMT siblings: the map shows them as neighbours")
    share, sizes = _ints(values, "hw.cacheconfig"), _ints(values, "hw.cachesize")
    if len(share) < 2 or len(sizes) < 2:
        topo.notes.append("no hw.cacheconfig / hw.cachesize: caches unknown")
        return
    topo.l3_known = True
    cpus = topo.online_cpus
    l1i = _int(values, "hw.l1icachesize")
    for level, name in ((1, "L1d"), (2, "L2"), (3, "L3")):
        if level >= len(share) or level >= len(sizes) or not share[level] or not sizes[level]:
            continue
        groups = _runs(cpus, share[level])
        if name == "L3":
            topo.l3_domains = [L3Domain(g, sizes[level]) for g in groups]
        else:
            topo.core_caches += [Cache(name, g, sizes[level]) for g in groups]
            if name == "L1d" and l1i:
                topo.core_caches += [Cache("L1i", g, l1i) for g in groups]
            if name == "L2":
                topo.l2_groups = [g for g in groups if len(g) > threads]
    topo.core_caches.sort(key=lambda c: (("L2", "L1d", "L1i").index(c.name), c.cpus[0]))
    if not topo.l3_domains:
        topo.notes.append("the CPUs report no L3 cache")


# -- identity -------------------------------------------------------------------------------------


def cpu(where: "Where") -> "CpuInfo":
    notes: list[str] = []
    result = cpu_from_sysctl(sysctl_values(where, notes))
    result.notes = notes + result.notes
    return result


def x86_flags(values: dict[str, str]) -> list[str]:
    words = " ".join(values.get(k, "") for k in ("machdep.cpu.features", "machdep.cpu.leaf7_features",
                                                "machdep.cpu.extfeatures")).split()
    flags = [_X86_NAMES.get(w.lower(), w.lower()) for w in words]
    flags += [name.removeprefix("hw.optional.").lower() for name, v in values.items()
              if name.startswith("hw.optional.avx512") and v == "1"]
    return [f for f in dict.fromkeys(flags) if re.fullmatch(r"[a-z0-9_.]{1,64}", f)]


def arm_flags(values: dict[str, str]) -> list[str]:
    flags = ["fp"] if values.get("hw.optional.floatingpoint") == "1" else []
    for name, value in values.items():
        if name.startswith("hw.optional.arm.") and value == "1":
            flags += _ARM_NAMES.get(name.removeprefix("hw.optional.arm."), "").split()
    if values.get("hw.optional.neon") == "1" or values.get("hw.optional.AdvSIMD") == "1":
        flags.append("asimd")
    return list(dict.fromkeys(flags))


def cpu_from_sysctl(values: dict[str, str]) -> "CpuInfo":
    from cpudoctor.probes.cpu._pycpuinfo import cpu_from_pycpuinfo
    from cpudoctor.model import CpuInfo

    brand = values.get("machdep.cpu.brand_string")
    arm = values.get("hw.optional.arm64") == "1" or (brand or "").startswith("Apple")
    if not brand and not values:
        return CpuInfo(notes=["CPU identity unknown: no sysctl values"])
    info: dict = {"brand_raw": brand, "arch_string_raw": "arm64" if arm else "x86_64"}
    if not arm:
        info["vendor_id_raw"] = values.get("machdep.cpu.vendor")
        for key in ("family", "model", "stepping"):
            value = _int(values, f"machdep.cpu.{key}", 0xFFFFFFFF)
            if value is not None:
                info[key] = value
        info["flags"] = x86_flags(values)
        hz = _int(values, "hw.cpufrequency")
        if hz:
            info["hz_advertised"] = [hz]
    else:
        info["flags"] = arm_flags(values)
    result = cpu_from_pycpuinfo(info)
    result.source = "sysctl"
    if arm and result.vendor is None:
        result.vendor = "Apple"
    if values.get("sysctl.proc_translated") == "1":
        result.notes.append("this x86 Python runs under Rosetta 2 on Apple silicon: x86 code is translated (no "
                            "AVX-512, slow AVX); install the native arm64 Python and PyTorch instead")
    return result


# -- OS facts -------------------------------------------------------------------------------------


def os_facts(where: "Where", environ: "Mapping[str, str] | None") -> "tuple[OsInfo, list[str]]":
    from cpudoctor.model import OsInfo

    notes: list[str] = []
    values = sysctl_values(where, notes)
    info = OsInfo(system="Darwin", distro="macOS", distro_version=values.get("kern.osproductversion") or None,
                  kernel=values.get("kern.osrelease") or None, mem_total_bytes=_int(values, "hw.memsize"),
                  vm=values.get("kern.hv_vmm_present") == "1" if "kern.hv_vmm_present" in values else None)
    if info.distro_version is None:
        notes.append("macOS version unknown: kern.osproductversion was not recorded")
    notes.append("macOS has no cpufreq governor or power plan a program can read: it clocks the cores itself")
    return info, notes


# -- capture --------------------------------------------------------------------------------------


def capture_files() -> tuple[dict[str, bytes], list[str]]:
    """This Mac's ``sysctl`` lines, as ``cpudoctor capture`` packs them (docs/capture.md); macOS only."""
    text, why = run_sysctl()
    if text is None:
        return {}, [why or "sysctl gave nothing"]
    return {SYSCTL_FILE: (text.rstrip("\n") + "\n").encode("utf-8")}, []
