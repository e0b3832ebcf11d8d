"""Which installed (or installable) package builds this CPU cannot run.

A TensorFlow wheel on a CPU without AVX, NumPy 2.4 on a CPU without SSE4.2,
an old Intel Extension for PyTorch without AVX-512: each dies at import, often
with a bare "Illegal instruction". The floors live in
``resources/isa_floors.json`` with their version ranges and sources; this
module compares them with the CPU's /proc/cpuinfo flags. Version ranges are PEP
440 specifier sets read with :mod:`packaging`, never parsed by hand.

The same comparison answers three questions: does the installed build run
here (:func:`assess`), which releases of a package do (:func:`safe_versions`,
"numpy<2.4"), and which installed packages with compiled code the table does
not know (:func:`compiled_without_floor`: an honest "unknown", never "fine").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from cpudoctor import resources
from cpudoctor.model import CpuInfo
from cpudoctor.model import IsaRisk, PackageInfo

_LEVEL = re.compile(r"^x86-64-v([1-4])$")
_EFFECT = {"sigill": "dies with 'Illegal instruction' at import", "import_error": "refuses to import"}


@dataclass(frozen=True)
class Floor:
    """One row of a package's ``floors``: versions in ``versions`` need ``needs``."""

    versions: SpecifierSet
    needs: tuple[str, ...]
    failure: str
    confidence: str
    reason: str
    sources: tuple[str, ...] = ()

    @property
    def open_ended(self) -> bool:
        """True when the floor also covers every future release (no upper bound)."""
        return upper_bound(self.versions) is None


@dataclass(frozen=True)
class PackageFloors:
    """A table entry: the package, its floors, and why it has none when it has none."""

    name: str
    label: str
    floors: tuple[Floor, ...]
    without_floor: dict[str, Any] = field(default_factory=dict)
    install_hint: str = ""
    distributions: tuple[str, ...] = ()
    kind: str = ""


def parse_version(text: str | None) -> Version | None:
    """A comparable version (pre-release and local labels dropped: 2.4.0rc1+cpu -> 2.4.0), or None."""
    if not text:
        return None
    try:
        return Version(Version(text.strip()).base_version)
    except InvalidVersion:
        return None


def lower_bound(spec: SpecifierSet) -> Version | None:
    """The smallest version ``spec`` admits, from its >=, > and == clauses (None: unbounded)."""
    bounds = [Version(s.version) for s in spec if s.operator in (">=", ">", "==", "===") and "*" not in s.version]
    return max(bounds) if bounds else None


def upper_bound(spec: SpecifierSet) -> Version | None:
    """The version ``spec`` stays below or at, from its <, <= and == clauses (None: open-ended)."""
    bounds = [Version(s.version) for s in spec if s.operator in ("<", "<=", "==", "===") and "*" not in s.version]
    return min(bounds) if bounds else None


@lru_cache(maxsize=1)
def table() -> dict[str, PackageFloors]:
    out: dict[str, PackageFloors] = {}
    for entry in resources.load_json("isa_floors.json")["packages"]:
        floors = tuple(
            Floor(SpecifierSet(f.get("versions", "")), tuple(f.get("needs", [])), f.get("failure", "sigill"),
                  f.get("confidence", "unverified"), f.get("reason", ""), tuple(f.get("sources", [])))
            for f in entry.get("floors", [])
        )
        out[entry["name"]] = PackageFloors(entry["name"], entry.get("label", entry["name"]), floors,
                                           dict(entry.get("without_floor") or {}), entry.get("install_hint", ""),
                                           tuple(entry.get("distributions", [])), entry.get("kind", ""))
    return out


def floors_for(package: str) -> list[Floor]:
    entry = table().get(package)
    return list(entry.floors) if entry else []


def applicable_floor(package: str, version: str | None) -> Floor | None:
    """The floor of ``package`` at ``version``; for an unknown version, the floor of current releases."""
    v = parse_version(version)
    for floor in floors_for(package):
        if v is None:
            if floor.open_ended:
                return floor
        elif floor.versions.contains(v, prereleases=True):
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


def safe_versions(package: str, flags: set[str]) -> str | None:
    """The releases of ``package`` this CPU runs, as a specifier ("<2.4", "<1.6,!=1.5.1").

    None: current releases run here (no open-ended floor is missed). "": no
    release in the table's knowledge runs here. Floors below the boundary that
    are a single version are excluded with ``!=``; a range that reaches the
    boundary moves it down to the range's start.
    """
    unmet = [f for f in floors_for(package) if f.needs and missing_for(f.needs, flags)]
    newest = [f for f in unmet if f.open_ended]
    if not newest:
        return None
    starts = [lower_bound(f.versions) for f in newest]
    if any(s is None for s in starts):
        return ""
    boundary: Version = min(s for s in starts if s is not None)
    excluded: list[Version] = []
    changed = True
    while changed:
        changed = False
        for f in unmet:
            if f in newest:
                continue
            lo, hi = lower_bound(f.versions), upper_bound(f.versions)
            if lo is not None and lo == hi:             # one release ("==1.5.1")
                if lo < boundary and lo not in excluded:
                    excluded.append(lo)
                continue
            if lo is None:                              # "<1.10": every old release is bad too
                return ""
            if lo < boundary:                           # a range at or below the boundary
                boundary, changed = lo, True
    clauses = [f"<{boundary}"] + [f"!={v}" for v in sorted(excluded) if v < boundary]
    return ",".join(clauses)


def pip_spec(package: str, safe: str | None) -> str:
    """``python -m pip install 'numpy<2.4'`` for a safe range; "" when there is none to give."""
    if not safe:
        return ""
    distribution = (table().get(package).distributions or (package,))[0] if package in table() else package
    return f"python -m pip install '{distribution}{safe}'"


def is_x86(cpu: CpuInfo) -> bool | None:
    if cpu.arch:
        return cpu.arch in ("x86_64", "amd64", "AMD64", "i686", "i386", "x86")
    if cpu.flags:
        return "sse2" in cpu.flags or "lm" in cpu.flags
    return None


def assess(cpu: CpuInfo, packages: list[PackageInfo]) -> list[IsaRisk]:
    """One IsaRisk per known package: installed ones first (with their version), then the rest.

    A package "at risk" has a floor this CPU does not meet: installed, it will
    crash or refuse to import; not installed, installing its current release
    would. ``safe_versions`` names the releases that do run here.
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
    for name, entry in table().items():
        pkg = installed.get(name)
        version = pkg.version if pkg else None
        floor = applicable_floor(name, version)
        risk = IsaRisk(package=name, installed=pkg is not None, version=version)
        if floor is None:
            status = entry.without_floor.get("status", "unknown")
            risk.status = "unknown" if status in ("unknown", "built_on_install") else "no_floor"
            risk.note = entry.without_floor.get("reason") or "no known floor above the x86-64 baseline"
            risk.sources = list(entry.without_floor.get("sources", []))
        elif x86 is False:
            risk.status = "not_x86"
            risk.note = "the floors in the table are for x86-64; this CPU is not x86"
        elif not flags:
            risk.status = "flags_unknown"
            risk.needs = list(floor.needs)
            risk.note = "CPU flags unknown, so the floor could not be checked"
        else:
            risk.needs = list(floor.needs)
            risk.missing = missing_for(floor.needs, flags)
            risk.at_risk = bool(risk.missing)
            risk.status = "at_risk" if risk.at_risk else "met"
            risk.confidence, risk.failure, risk.sources = floor.confidence, floor.failure, list(floor.sources)
            if risk.at_risk:
                risk.safe_versions = safe_versions(name, flags)
            risk.note = _note(entry, floor, risk, version)
        risks.append(risk)
    risks.sort(key=lambda r: (not r.installed, not r.at_risk))
    return risks


def _note(entry: PackageFloors, floor: Floor, risk: IsaRisk, version: str | None) -> str:
    what = f"{entry.label} {version}" if version else f"current {entry.label} releases"
    confidence = "" if floor.confidence == "documented" else f" [{floor.confidence}]"
    if not risk.at_risk:
        return f"{what}: needs {', '.join(floor.needs) or 'the x86-64 baseline'}, this CPU has it{confidence}"
    effect = _EFFECT.get(floor.failure, _EFFECT["sigill"])
    if not version:  # plural subject: "current NumPy releases die ..."
        effect = effect.replace("dies", "die").replace("refuses", "refuse")
    return f"{what} {effect}: needs {', '.join(floor.needs)}, this CPU lacks {', '.join(risk.missing)}{confidence}"


def fix_command(package: str, flags: set[str]) -> str:
    """The one thing to do about an at-risk package: pin the releases that run, else the table's hint."""
    command = pip_spec(package, safe_versions(package, flags))
    if command:
        return command
    entry = table().get(package)
    return entry.install_hint if entry else ""


def isa_hint(cpu: CpuInfo, package: str, version: str | None) -> str:
    """Words for an Illegal-instruction message: what the build needs vs what this CPU lacks."""
    flags = set(cpu.flags)
    floor = applicable_floor(package, version)
    level = cpu.isa.x86_64_level or x86_64_level(flags)
    have = f"this CPU is x86-64-v{level}" if level else "this CPU's ISA level is unknown"
    fix = fix_command(package, flags) if flags else ""
    if floor and floor.needs and flags:
        missing = missing_for(floor.needs, flags)
        if missing:
            text = " ".join(f"{package} {version or ''} needs {', '.join(floor.needs)}; this CPU lacks".split())
            return f"{text} {', '.join(missing)}" + (f"; fix: {fix}" if fix else "")
    lacking = [f for f in ("avx", "avx2", "fma", "avx512f") if flags and f not in flags]
    lacks = f", without {', '.join(lacking)}" if lacking else ""
    hint = table().get(package).install_hint if package in table() else ""
    return f"the {package} build uses an instruction this CPU does not have; {have}{lacks}" + (f"; try: {hint}" if hint else "")


def known_distributions() -> set[str]:
    """Every distribution name the table knows, PEP 503-normalised."""
    return {re.sub(r"[-_.]+", "-", d).lower() for e in table().values() for d in e.distributions}


def compiled_without_floor(compiled: Iterable[str]) -> list[str]:
    """Of the installed distributions with compiled code, those the table has no entry for (sorted)."""
    known = known_distributions()
    return sorted({n for n in compiled if re.sub(r"[-_.]+", "-", n).lower() not in known}, key=str.lower)
