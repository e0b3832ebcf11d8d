"""Which installed (or installable) package builds this CPU cannot run.

A TensorFlow wheel on a CPU without AVX, NumPy 2.4 on a CPU without SSE4.2,
an old Intel Extension for PyTorch without AVX-512: each dies at import, often
with a bare "Illegal instruction". The floors live in
``resources/isa_floors.json`` with their sources; this module only compares
them with the CPU's /proc/cpuinfo flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cpudoctor import resources
from cpudoctor.probes.cpu.identity import CpuInfo
from cpudoctor.probes.software.model import IsaRisk, PackageInfo

_LEVEL = re.compile(r"^x86-64-v([1-4])$")


@dataclass(frozen=True)
class Floor:
    needs: tuple[str, ...]
    since: str | None
    until: str | None
    failure: str
    confidence: str
    reason: str


def version_key(version: str | None) -> tuple[int, ...]:
    """Release numbers of a version: ``2.4.0rc1+cpu`` -> (2, 4, 0). Enough to compare floors."""
    if not version:
        return ()
    release = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in release.group(1).split(".")) if release else ()


def _in_range(version: str | None, since: str | None, until: str | None) -> bool:
    key = version_key(version)
    if not key:
        # Unknown version: a floor with no lower bound or the newest floor applies.
        return until is None
    if since and key < version_key(since):
        return False
    if until and key >= version_key(until):
        return False
    return True


def floors_for(package: str) -> list[Floor]:
    for entry in resources.load_json("isa_floors.json")["packages"]:
        if entry["name"] == package:
            return [
                Floor(tuple(f.get("needs", [])), f.get("since"), f.get("until"), f.get("failure", "sigill"),
                      f.get("confidence", "unverified"), f.get("reason", ""))
                for f in entry.get("floors", [])
            ]
    return []


def applicable_floor(package: str, version: str | None) -> Floor | None:
    for floor in floors_for(package):
        if _in_range(version, floor.since, floor.until):
            return floor
    return None


def level_flags(level: int) -> list[str]:
    """All cpuinfo flags x86-64-v``level`` implies (cumulative), from resources/x86_64_levels.json."""
    flags: list[str] = []
    for entry in resources.load_json("x86_64_levels.json")["levels"]:
        if entry["level"] <= level:
            flags.extend(f for f in entry["flags"] if f not in flags)
    return flags


def x86_64_level(flags: set[str]) -> int | None:
    """Highest psABI level all of whose flags are present; None when no x86 flags are known."""
    if not flags or "sse2" not in flags:
        return None
    level = 1
    for n in (2, 3, 4):
        if all(f in flags for f in level_flags(n)):
            level = n
        else:
            break
    return level


def expand_needs(needs: tuple[str, ...] | list[str]) -> list[str]:
    """Flags behind each need; ``x86-64-v2`` becomes its flags above v1."""
    out: list[str] = []
    for need in needs:
        m = _LEVEL.match(need)
        flags = level_flags(int(m.group(1))) if m else [need]
        if m and int(m.group(1)) > 1:
            flags = [f for f in flags if f not in level_flags(1)]
        for f in flags:
            if f not in out:
                out.append(f)
    return out


def missing_for(needs: tuple[str, ...] | list[str], flags: set[str]) -> list[str]:
    """What of ``needs`` this CPU lacks; a psABI level is named with the flags it misses."""
    missing: list[str] = []
    for need in needs:
        m = _LEVEL.match(need)
        if m:
            lacking = [f for f in expand_needs([need]) if f not in flags]
            if lacking:
                missing.append(f"{need} ({', '.join(lacking)})")
        elif need not in flags:
            missing.append(need)
    return missing


def is_x86(cpu: CpuInfo) -> bool | None:
    if cpu.arch:
        return cpu.arch in ("x86_64", "amd64", "AMD64", "i686", "i386", "x86")
    if cpu.flags:
        return "sse2" in cpu.flags or "lm" in cpu.flags
    return None


def assess(cpu: CpuInfo, packages: list[PackageInfo]) -> list[IsaRisk]:
    """One IsaRisk per known package: installed ones first (with their version), then the rest.

    A package "at risk" has a floor this CPU does not meet: installed, it will
    crash or refuse to import; not installed, installing it would.
    """
    installed: dict[str, PackageInfo] = {}
    from cpudoctor.probes.software.packages import package_of  # noqa: PLC0415 - avoids a cycle at import

    for pkg in packages:
        known = package_of(pkg.name)
        if known and known.name not in installed:
            installed[known.name] = pkg
    flags = set(cpu.flags)
    x86 = is_x86(cpu)
    risks: list[IsaRisk] = []
    for entry in resources.load_json("isa_floors.json")["packages"]:
        name = entry["name"]
        pkg = installed.get(name)
        version = pkg.version if pkg else None
        floor = applicable_floor(name, version)
        risk = IsaRisk(package=name, installed=pkg is not None, version=version)
        if floor is None:
            risk.note = entry.get("note", "no known floor above the x86-64 baseline; kernels are chosen at run time")
        elif x86 is False:
            risk.note = "the floors in the table are for x86-64; this CPU is not x86"
        elif not flags:
            risk.needs = list(floor.needs)
            risk.note = "CPU flags unknown, so the floor could not be checked"
        else:
            risk.needs = list(floor.needs)
            risk.missing = missing_for(floor.needs, flags)
            risk.at_risk = bool(risk.missing)
            risk.note = _note(entry, floor, risk, version)
        risks.append(risk)
    risks.sort(key=lambda r: (not r.installed, not r.at_risk))
    return risks


def _note(entry: dict, floor: Floor, risk: IsaRisk, version: str | None) -> str:
    label = entry.get("label", entry["name"])
    what = f"{label} {version}" if version else f"current {label} builds"
    confidence = "" if floor.confidence == "documented" else f" [{floor.confidence}]"
    if not risk.at_risk:
        return f"{what}: needs {', '.join(floor.needs) or 'the x86-64 baseline'}, this CPU has it{confidence}"
    effect = "dies with 'Illegal instruction' at import" if floor.failure == "sigill" else "refuses to import"
    hint = entry.get("install_hint")
    return f"{what} {effect}: needs {', '.join(floor.needs)}, this CPU lacks {', '.join(risk.missing)}{confidence}" + (
        f"; fix: {hint}" if hint else "")


def isa_hint(cpu: CpuInfo, package: str, version: str | None) -> str:
    """Words for an Illegal-instruction message: what the build needs vs what this CPU lacks."""
    flags = set(cpu.flags)
    floor = applicable_floor(package, version)
    level = cpu.isa.x86_64_level or x86_64_level(flags)
    have = f"this CPU is x86-64-v{level}" if level else "this CPU's ISA level is unknown"
    if floor and floor.needs and flags:
        missing = missing_for(floor.needs, flags)
        if missing:
            fix = _install_hint(package)
            text = f"{package} {version or ''} needs {', '.join(floor.needs)}; this CPU lacks {', '.join(missing)}".replace("  ", " ")
            return text + (f"; fix: {fix}" if fix else "")
    lacking = [f for f in ("avx", "avx2", "fma", "avx512f") if flags and f not in flags]
    lacks = f", without {', '.join(lacking)}" if lacking else ""
    fix = _install_hint(package)
    return f"the {package} build uses an instruction this CPU does not have; {have}{lacks}" + (f"; try: {fix}" if fix else "")


def _install_hint(package: str) -> str:
    for entry in resources.load_json("isa_floors.json")["packages"]:
        if entry["name"] == package:
            return entry.get("install_hint", "")
    return ""
