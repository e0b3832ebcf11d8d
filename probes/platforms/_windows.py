"""Windows, live or captured: topology from GetLogicalProcessorInformationEx, identity from CPUID, OS facts.

Everything is read from the same raw material whether it comes from this
machine or from a capture (docs/capture.md), so ``cpudoctor report --root
CAPTURE`` on Linux gives the report the Windows machine gave:

==============================================  ===================================================
``windows/logical-processor-information-ex.bin``  the raw ``GetLogicalProcessorInformationEx(RelationAll)``
                                                   buffer (:mod:`._windows_lpi` parses it)
``windows/system.json``                           version, edition, processor identifier, memory,
                                                   this process's group affinity, the computer model
``windows/cpu.json``                              py-cpuinfo's identity and our CPUID + XGETBV child
``windows/powercfg.txt``                          ``powercfg /getactivescheme``: the active power plan
==============================================  ===================================================

Live, the buffer comes from :mod:`._windows_api` (ctypes), the rest from the
interpreter, psutil, the registry and ``powercfg``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cpudoctor.probes.platforms import _windows_lpi as lpi

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cpudoctor.model import CpuInfo
    from cpudoctor.model.topology import Topology
    from cpudoctor.probes.platforms import Where
    from cpudoctor.model import OsInfo

LPI_FILE = "windows/logical-processor-information-ex.bin"
SYSTEM_FILE = "windows/system.json"
CPU_FILE = "windows/cpu.json"
POWERCFG_FILE = "windows/powercfg.txt"
FILES = (LPI_FILE, SYSTEM_FILE, CPU_FILE, POWERCFG_FILE)
MAX_JSON_BYTES = 1 << 20

# Windows' own power plans (powercfg /list): the GUIDs are the same in every language.
POWER_PLANS: dict[str, str] = {
    "381b4222-f694-41f0-9685-ff5bb260df2e": "Balanced",
    "8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c": "High performance",
    "a1841308-3541-4fab-bc81-f71556f20b4a": "Power saver",
    "e9a42b02-d5df-448d-aa00-03f14749eb61": "Ultimate Performance",
}


# -- the raw material ------------------------------------------------------------------------


def _read_json(where: "Where", rel: str, notes: list[str]) -> dict[str, Any] | None:
    from cpudoctor.kits.rooted import read_bytes, under

    data = read_bytes(under(where.root, rel), MAX_JSON_BYTES)
    if data is None:
        notes.append(f"{rel} is missing from the capture")
        return None
    try:
        value = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        notes.append(f"{rel} is not JSON ({exc.__class__.__name__}): ignored")
        return None
    except RecursionError:          # 100,000 nested lists: no capture CPU Doctor wrote
        notes.append(f"{rel} is nested too deeply to be a capture's file: ignored")
        return None
    if not isinstance(value, dict):
        notes.append(f"{rel} is not a JSON object: ignored")
        return None
    return value


def lpi_buffer(where: "Where", notes: list[str]) -> bytes | None:
    """This machine's buffer (ctypes) or the capture's ``.bin``."""
    if where.live:
        from cpudoctor.probes.platforms import _windows_api

        data, why = _windows_api.logical_processor_information_ex()
        if why:
            notes.append(why)
        return data
    import errno

    from cpudoctor.kits.rooted import read_bytes_checked, under

    try:
        return read_bytes_checked(under(where.root, LPI_FILE), lpi.MAX_BUFFER)
    except FileNotFoundError:
        notes.append(f"{LPI_FILE} is missing from the capture: topology unknown")
    except (OSError, ValueError) as exc:
        why = (f"larger than {lpi.MAX_BUFFER >> 20} MiB, far more than any machine's"
               if getattr(exc, "errno", None) == errno.EFBIG else getattr(exc, "strerror", None) or str(exc))
        notes.append(f"{LPI_FILE} was not read ({why}): topology unknown")
    return None


def system_facts(where: "Where", notes: list[str]) -> dict[str, Any]:
    if where.live:
        from cpudoctor.probes.platforms import _windows_api

        return _windows_api.system_facts()
    return _read_json(where, SYSTEM_FILE, notes) or {}


def cpu_facts(where: "Where", notes: list[str]) -> dict[str, Any]:
    if where.live:
        return collect_cpu_facts()
    return _read_json(where, CPU_FILE, notes) or {}


def powercfg_text(where: "Where", notes: list[str]) -> str | None:
    if where.live:
        from cpudoctor.probes.platforms import _windows_api

        text, why = _windows_api.powercfg_active_scheme()
        if why:
            notes.append(f"power plan unknown: {why}")
        return text
    from cpudoctor.kits.rooted import read_text, under

    text = read_text(under(where.root, POWERCFG_FILE))
    if text is None:
        notes.append(f"power plan unknown: {POWERCFG_FILE} is missing from the capture")
    return text


# py-cpuinfo's keys a Windows report uses (the rest name the machine or change every second).
PYCPUINFO_KEYS = ("vendor_id_raw", "brand_raw", "family", "model", "stepping", "flags", "hz_advertised",
                  "arch_string_raw")


def collect_cpu_facts() -> dict[str, Any]:
    """py-cpuinfo's identity plus our CPUID + XGETBV child (~1.5 s): what ``windows/cpu.json`` holds."""
    facts: dict[str, Any] = {"kind": "cpudoctor-windows-cpu", "format": 1}
    try:
        import cpuinfo

        info = cpuinfo.get_cpu_info()
        facts["pycpuinfo"] = {k: info.get(k) for k in PYCPUINFO_KEYS if k in info}
    except Exception as exc:  # noqa: BLE001 - py-cpuinfo shells out; any failure is "unknown"
        facts["pycpuinfo_error"] = f"{type(exc).__name__}: {exc}"
    from cpudoctor.probes.cpu.cpuid_check import run_child

    facts["cpuid"] = asdict(run_child())
    return facts


# -- topology --------------------------------------------------------------------------------


def topology(where: "Where") -> "Topology":
    from cpudoctor.kits.rooted import cap_notes

    notes: list[str] = []
    buffer = lpi_buffer(where, notes)
    system = system_facts(where, notes)
    vendor, family = processor_identity(system.get("processor_identifier"))
    topo = topology_from_buffer(buffer, vendor=vendor, family=family) if buffer is not None else None
    if topo is None:
        from cpudoctor.model.topology import Topology

        topo = Topology(notes=["Windows gave no processor information: topology unknown"])
    topo.notes = notes + topo.notes
    memory = system.get("memory")
    if isinstance(memory, dict):                # the machine line's figure, as MemTotal on Linux
        topo.memory_total_bytes = _count(memory.get("total"))
    _fill_affinity(topo, system.get("affinity"))
    topo.notes = cap_notes(topo.notes)
    return topo


_IDENTIFIER = re.compile(r"Family\s+(\d{1,5})\b.*?,\s*(\w{1,20})\s*$")


def processor_identity(identifier: Any) -> tuple[str | None, int | None]:
    """``AMD64 Family 25 Model 33 Stepping 0, AuthenticAMD`` (PROCESSOR_IDENTIFIER) -> (vendor id, family)."""
    if not isinstance(identifier, str) or len(identifier) > 200:
        return None, None
    m = _IDENTIFIER.search(identifier)
    return (m.group(2), int(m.group(1))) if m else (None, None)


def topology_from_buffer(buffer: bytes, *, vendor: str | None = None, family: int | None = None) -> "Topology":
    """The report's Topology from a raw buffer: the same fields the Linux probe fills."""
    from cpudoctor.model.topology import Topology

    info = lpi.parse(buffer)
    topo = Topology(source="windows", vendor=vendor, cpu_family=family, notes=list(info.notes))
    online = info.active_cpus()
    if not online:
        topo.notes.append("the processor information lists no active processor: topology unknown")
        return topo
    topo.online_cpus, topo.logical_cpus = online, len(online)
    on = set(online)
    offsets = info.group_offsets()
    from cpudoctor.model.topology import ProcessorGroup

    topo.processor_groups = [
        ProcessorGroup(i, sorted(set(info.cpus([lpi.GroupMask(i, g.mask)])) & on), offsets[i], g.maximum)
        for i, g in enumerate(info.groups)]
    _packages_and_cores(topo, info, on)
    _caches(topo, info, on)
    _numa(topo, info, on)
    l3_of = {c: i for i, d in enumerate(topo.l3_domains) for c in d.cpus}
    numa_of = {c: n.id for n in topo.numa_nodes for c in n.cpus}
    for core in topo.core_list:
        core.l3, core.numa = l3_of.get(core.cpus[0]), numa_of.get(core.cpus[0])
    _kinds(topo)
    return topo


def _packages_and_cores(topo: "Topology", info: lpi.LogicalProcessorInfo, on: set[int]) -> None:
    from cpudoctor.model.topology import Core, Package

    def cpus_of(rec) -> list[int]:
        return sorted(set(info.cpus(rec.masks)) & on)

    packages = sorted((c for c in (cpus_of(p) for p in info.packages) if c), key=lambda c: c[0])
    dies = sorted((c for c in (cpus_of(d) for d in info.dies) if c), key=lambda c: c[0])
    package_of = {c: i for i, cpus in enumerate(packages) for c in cpus}
    die_of = {c: i for i, cpus in enumerate(dies) for c in cpus}
    topo.package_list = [Package(i, cpus, sorted({die_of[c] for c in cpus if c in die_of}))
                         for i, cpus in enumerate(packages)]
    topo.packages = len(packages) or None
    cores = sorted(((cpus_of(r), r.efficiency_class) for r in info.cores if cpus_of(r)), key=lambda t: t[0][0])
    per_package: dict[int, int] = {}
    for cpus, efficiency in cores:
        pkg = package_of.get(cpus[0], 0)
        index = per_package.get(pkg, 0)
        per_package[pkg] = index + 1
        topo.core_list.append(Core(package=pkg, core_id=index, cpus=cpus, die=die_of.get(cpus[0]),
                                   efficiency_class=efficiency))
    topo.cores = len(topo.core_list) or None
    topo.smt_threads_per_core = max((len(c.cpus) for c in topo.core_list), default=None)
    if not packages:
        topo.notes.append("the processor information lists no package")


def _caches(topo: "Topology", info: lpi.LogicalProcessorInfo, on: set[int]) -> None:
    from cpudoctor.model.topology import Cache, L3Domain

    levels: dict[str, dict[tuple[int, ...], int | None]] = {}
    for cache in info.caches:
        if cache.level == 1:
            key = "L1i" if cache.type == "instruction" else "L1d"
        elif cache.level in (2, 3) and cache.type in ("unified", "data"):
            key = f"L{cache.level}"
        else:
            continue
        cpus = tuple(sorted(set(info.cpus(cache.masks)) & on))
        if cpus:
            levels.setdefault(key, {}).setdefault(cpus, cache.size_bytes or None)
    topo.l3_known = bool(info.caches)
    if not info.caches:
        topo.notes.append("Windows lists no caches: L3 (CCX) domains unknown")
        return
    ordered = {k: sorted(v.items(), key=lambda kv: kv[0][0]) for k, v in levels.items()}
    topo.l3_domains = [L3Domain(list(c), size) for c, size in ordered.get("L3", [])]
    if not topo.l3_domains:
        topo.notes.append("the CPUs report no L3 cache")
    core_of = {c: i for i, core in enumerate(topo.core_list) for c in core.cpus}
    topo.l2_groups = [list(c) for c, _ in ordered.get("L2", []) if len({core_of.get(x) for x in c}) > 1]
    topo.core_caches = [Cache(key, list(c), size) for key in ("L2", "L1d", "L1i") for c, size in ordered.get(key, [])]


def _numa(topo: "Topology", info: lpi.LogicalProcessorInfo, on: set[int]) -> None:
    from cpudoctor.model.topology import NumaNode

    for node in sorted(info.numa_nodes, key=lambda n: n.node):
        cpus = sorted(set(info.cpus(node.masks)) & on)
        topo.numa_nodes.append(NumaNode(node.node, cpus, []))
        if not cpus:
            topo.cpuless_numa_nodes.append(node.node)
    if not topo.numa_nodes:
        topo.notes.append("Windows lists no NUMA node: assuming one node")
        topo.numa_nodes = [NumaNode(0, list(topo.online_cpus), [])]
    elif len(topo.numa_nodes) > 1:
        topo.notes.append("Windows gives programs no NUMA distances: how far each node is from the others is unknown")
    homeless = sorted(on - {c for n in topo.numa_nodes for c in n.cpus})
    if homeless:
        from cpudoctor.kits.cpulist import format_cpulist

        topo.notes.append(f"CPUs {format_cpulist(homeless)} belong to no NUMA node Windows lists")


def _kinds(topo: "Topology") -> None:
    """Hybrid chips: EfficiencyClass tells the core types apart (0 = the slowest), as Windows schedules them."""
    from cpudoctor.model.topology import CpuKind

    classes = sorted({c.efficiency_class for c in topo.core_list if c.efficiency_class is not None})
    if len(classes) < 2:
        return
    topo.cpu_kinds = [CpuKind(sorted(c for core in topo.core_list if core.efficiency_class == k for c in core.cpus),
                              k, "EfficiencyClass") for k in classes]


def _fill_affinity(topo: "Topology", affinity: Any) -> None:
    """Where the process that made the report may run: its group(s) and its mask there.

    Before Windows 11 / Server 2022 a process lives in one processor group, so on a
    machine with several groups this is one group's CPUs: what PyTorch gets too.
    """
    from cpudoctor.kits.cpulist import format_cpulist

    aff = topo.affinity
    groups = topo.processor_groups
    allowed: list[int] | None = None
    if isinstance(affinity, dict) and groups:
        listed = [g for g in affinity.get("groups") or [] if isinstance(g, int) and 0 <= g < len(groups)]
        group, mask = affinity.get("group"), affinity.get("mask")
        process_mask = affinity.get("process_mask")
        if len(listed) > 1 or process_mask == 0:
            allowed = sorted({c for g in (listed or range(len(groups))) for c in groups[g].cpus})
        elif isinstance(group, int) and isinstance(mask, int) and 0 <= group < len(groups) and 0 < mask < 1 << 64:
            first = groups[group].first_cpu
            allowed = sorted({first + b for b in range(64) if mask >> b & 1} & set(groups[group].cpus))
    if allowed is None and topo.online_cpus:
        allowed = list(topo.online_cpus)
    aff.allowed_cpus = allowed
    aff.usable_cpus = len(allowed) if allowed else None
    if allowed is not None and topo.logical_cpus and len(allowed) < topo.logical_cpus:
        one_group = len(groups) > 1 and any(set(allowed) == set(g.cpus) for g in groups)
        topo.notes.append(f"this process may run on {len(allowed)} of {topo.logical_cpus} CPUs"
                          f"{' (one processor group)' if one_group else ''} ({format_cpulist(allowed)}): "
                          "size thread pools to that")


# -- CPU identity ----------------------------------------------------------------------------


def cpu(where: "Where") -> "CpuInfo":
    notes: list[str] = []
    facts = cpu_facts(where, notes)
    result = cpu_from_facts(facts)
    result.notes = notes + result.notes
    return result


def cpu_from_facts(facts: dict[str, Any]) -> "CpuInfo":
    """A CpuInfo from ``windows/cpu.json`` (py-cpuinfo's keys, checked, plus the CPUID child's answer)."""
    from cpudoctor.probes.cpu._pycpuinfo import cpu_from_pycpuinfo
    from cpudoctor.probes.cpu.cpuid_check import CpuidResult
    from cpudoctor.model import CpuInfo

    info = facts.get("pycpuinfo")
    if not isinstance(info, dict):
        why = facts.get("pycpuinfo_error") or "no identity recorded"
        return CpuInfo(notes=[f"CPU identity unknown: {str(why)[:200]}"])
    clean: dict[str, Any] = {}
    for key in ("vendor_id_raw", "brand_raw", "arch_string_raw"):
        if isinstance(info.get(key), str):
            clean[key] = info[key][:256]
    for key in ("family", "model", "stepping"):
        if isinstance(info.get(key), int) and not isinstance(info.get(key), bool) and 0 <= info[key] < 1 << 32:
            clean[key] = info[key]
    flags = info.get("flags")
    clean["flags"] = [f for f in flags if isinstance(f, str) and len(f) <= 64][:1024] if isinstance(flags, list) else []
    hz = info.get("hz_advertised")
    if isinstance(hz, list) and hz and isinstance(hz[0], (int, float)) and not isinstance(hz[0], bool):
        clean["hz_advertised"] = [hz[0]]
    cpuid = None
    raw = facts.get("cpuid")
    if isinstance(raw, dict):
        cpuid = CpuidResult(
            flags=[f for f in raw.get("flags") or [] if isinstance(f, str) and len(f) <= 64][:1024],
            os_disabled=[f for f in raw.get("os_disabled") or [] if isinstance(f, str) and len(f) <= 64][:1024],
            error=raw.get("error") if isinstance(raw.get("error"), str) else None)
    return cpu_from_pycpuinfo(clean, cpuid)


# -- OS facts --------------------------------------------------------------------------------


def windows_name(release: Any, version: Any, edition: Any) -> str:
    """``Windows 11``, ``Windows 10``, ``Windows Server 2022``: from the build number, which does not lie.

    Windows 11 still says release "10" to older Pythons; its builds start at 22000.
    """
    build = build_number(version)
    server = isinstance(edition, str) and "server" in edition.lower()
    if server and build is not None:
        for first, name in ((26100, "2025"), (20348, "2022"), (17763, "2019"), (14393, "2016")):
            if build >= first:
                return f"Windows Server {name}"
        return "Windows Server"
    if build is not None and build >= 22000:
        return "Windows 11"
    return f"Windows {release}" if isinstance(release, str) and release and len(release) < 20 else "Windows"


def build_number(version: Any) -> int | None:
    """22631 from ``10.0.22631``."""
    if not isinstance(version, str):
        return None
    m = re.fullmatch(r"\d{1,3}\.\d{1,3}\.(\d{1,6})(?:\.\d{1,6})?", version.strip())
    return int(m.group(1)) if m else None


_SCHEME = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\s*(?:\((.{1,120})\))?")


def parse_active_scheme(text: str | None) -> tuple[str | None, str | None]:
    """``Power Scheme GUID: 381b4222-...  (Balanced)`` -> (guid, name), in any display language.

    The name Windows prints is translated ("Ausbalanciert"); the GUIDs of its own
    plans are not, so a known GUID gives the English name.
    """
    if not text:
        return None, None
    m = _SCHEME.search(text)
    if not m:
        return None, None
    guid = m.group(1).lower()
    name = POWER_PLANS.get(guid) or (m.group(2) or "").strip() or None
    return guid, name


def os_facts(where: "Where", environ: "Mapping[str, str] | None") -> "tuple[OsInfo, list[str]]":
    from cpudoctor.model import OsInfo

    notes: list[str] = []
    system = system_facts(where, notes)
    info = OsInfo(system="Windows")
    version = system.get("version")
    info.distro = windows_name(system.get("release"), version, system.get("edition"))
    display = system.get("display_version")
    edition = system.get("edition")
    info.distro_version = " ".join(str(x)[:40] for x in (edition, display) if isinstance(x, str) and x) or None
    info.kernel = version[:40] if isinstance(version, str) else None
    memory = system.get("memory")
    if isinstance(memory, dict):
        info.mem_total_bytes = _count(memory.get("total"))
        info.mem_available_bytes = _count(memory.get("available"))
        info.swap_total_bytes = _count(memory.get("swap_total"))
        info.swap_used_bytes = _count(memory.get("swap_used"))
    else:
        notes.append("memory unknown: not recorded")
    _virtualization(info, system, notes)
    info.power_plan_guid, info.power_plan = parse_active_scheme(powercfg_text(where, notes))
    notes.append("Windows has no Linux cpufreq governor: the active power plan decides how the cores clock")
    return info, notes


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62 else None


def _virtualization(info: "OsInfo", system: dict[str, Any], notes: list[str]) -> None:
    """A VM from the firmware's maker and model (the registry's copy of DMI), never from the CPUID
    hypervisor bit: Windows with Hyper-V, WSL2 or memory integrity runs *itself* under a hypervisor."""
    from cpudoctor.knowledge import SOFTWARE_FACTS

    model = " ".join(str(system.get(k))[:120] for k in ("system_manufacturer", "system_product")
                     if isinstance(system.get(k), str))
    if not model:
        notes.append("virtualization unknown: the firmware's maker and model were not recorded")
        return
    for entry in SOFTWARE_FACTS.data["dmi_virtualization"]:
        if entry["match"].lower() in model.lower() and (entry["virtualization"] != "hyperv"
                                                        or "virtual machine" in model.lower()):
            info.vm, info.virtualization = True, entry["virtualization"]
            return
    info.vm = False


# -- capture ---------------------------------------------------------------------------------


def capture_files() -> tuple[dict[str, bytes], list[str]]:
    """This Windows machine's raw material, as ``cpudoctor capture`` packs it (docs/capture.md).

    Returns ({relative path: bytes}, notes on what could not be recorded). Runs the ctypes
    calls, powercfg and the CPUID child (~1.5 s); Windows only.
    """
    from cpudoctor.probes.platforms import Where, _windows_api

    notes: list[str] = []
    files: dict[str, bytes] = {}
    buffer, why = _windows_api.logical_processor_information_ex()
    if buffer is not None:
        files[LPI_FILE] = buffer
    else:
        notes.append(why or "GetLogicalProcessorInformationEx gave nothing")
    files[SYSTEM_FILE] = (json.dumps(_windows_api.system_facts(), indent=2) + "\n").encode()
    files[CPU_FILE] = (json.dumps(collect_cpu_facts(), indent=2) + "\n").encode()
    text = powercfg_text(Where("windows", Path("/"), True), notes)
    if text is not None:
        files[POWERCFG_FILE] = text.encode("utf-8")
    return files, notes
