"""Which installed (or installable) package builds this CPU cannot run, recorded as facts.

A TensorFlow wheel on a CPU without AVX, NumPy 2.4 on a CPU without SSE4.2,
an old Intel Extension for PyTorch without AVX-512: each dies at import, often
with a bare "Illegal instruction". The floors and the version maths are
knowledge (:mod:`cpudoctor.knowledge.floors`, ``resources/isa_floors.json``);
this module compares them with the CPU's /proc/cpuinfo flags and records one
:class:`~cpudoctor.model.IsaRisk` per package (:func:`assess`), and says what a
build that died of SIGILL needs against what the CPU has (:func:`shortfall`).
What to do about it (a pin, an upgrade, another build) is the advisor's
(:mod:`cpudoctor.advisor.floors`).
"""

from __future__ import annotations

from cpudoctor.knowledge import FLOORS, LEVELS, Floor, KnownPackage
from cpudoctor.model import CpuInfo, IsaRisk, PackageInfo

_EFFECT = {"sigill": "dies with 'Illegal instruction' at import", "import_error": "refuses to import"}


def assess(cpu: CpuInfo, packages: list[PackageInfo]) -> list[IsaRisk]:
    """One IsaRisk per known package: installed ones first (with their version), then the rest.

    A package "at risk" has a floor this CPU does not meet: installed, it will
    crash or refuse to import; not installed, installing its current release
    would. ``safe_versions`` names the releases that do run here.
    """
    installed: dict[str, PackageInfo] = {}
    for pkg in packages:
        known = FLOORS.package_of(pkg.name)
        if known and known.name not in installed:
            installed[known.name] = pkg
    flags = set(cpu.flags)
    risks: list[IsaRisk] = []
    for name, entry in FLOORS.packages.items():
        pkg = installed.get(name)
        version = pkg.version if pkg else None
        floor = FLOORS.applicable_floor(name, version)
        risk = IsaRisk(package=name, installed=pkg is not None, version=version)
        if floor is None:
            status = entry.without_floor.get("status", "unknown")
            risk.status = "unknown" if status in ("unknown", "built_on_install") else "no_floor"
            risk.note = entry.without_floor.get("reason") or "no known floor above the x86-64 baseline"
            risk.sources = list(entry.without_floor.get("sources", []))
        elif cpu.is_x86 is False:
            risk.status = "not_x86"
            risk.note = "the floors in the table are for x86-64; this CPU is not x86"
        elif not flags:
            risk.status = "flags_unknown"
            risk.needs = list(floor.needs)
            risk.note = "CPU flags unknown, so the floor could not be checked"
        else:
            risk.needs = list(floor.needs)
            risk.missing = LEVELS.missing_for(floor.needs, flags)
            risk.at_risk = bool(risk.missing)
            risk.status = "at_risk" if risk.at_risk else "met"
            risk.confidence, risk.failure, risk.sources = floor.confidence, floor.failure, list(floor.sources)
            if risk.at_risk:
                risk.safe_versions = FLOORS.safe_versions(name, flags)
            risk.note = _note(entry, floor, risk, version)
        risks.append(risk)
    risks.sort(key=lambda r: (not r.installed, not r.at_risk))
    return risks


def _note(entry: KnownPackage, floor: Floor, risk: IsaRisk, version: str | None) -> str:
    what = f"{entry.label} {version}" if version else f"current {entry.label} releases"
    confidence = "" if floor.confidence == "documented" else f" [{floor.confidence}]"
    if not risk.at_risk:
        return f"{what}: needs {', '.join(floor.needs) or 'the x86-64 baseline'}, this CPU has it{confidence}"
    effect = _EFFECT.get(floor.failure, _EFFECT["sigill"])
    if not version:  # plural subject: "current NumPy releases die ..."
        effect = effect.replace("dies", "die").replace("refuses", "refuse")
    return f"{what} {effect}: needs {', '.join(floor.needs)}, this CPU lacks {', '.join(risk.missing)}{confidence}"


def shortfall(cpu: CpuInfo, package: str, version: str | None) -> str:
    """What a build of ``package`` that died of SIGILL needs against what this CPU has (no fix: that is advice).

    ``numpy 2.4.6 needs x86-64-v2; this CPU lacks x86-64-v2 (popcnt, ...)`` when
    the table's floor explains it, else the CPU's level and the vector sets it
    lacks. What to do about it is advice: ISA003's finding gives it
    (:func:`cpudoctor.advisor.floors.fix_for`).
    """
    flags = set(cpu.flags)
    floor = FLOORS.applicable_floor(package, version)
    missing = FLOORS.missing_at(package, version, flags)
    if floor is not None and missing:
        text = " ".join(f"{package} {version or ''} needs {', '.join(floor.needs)}; this CPU lacks".split())
        return f"{text} {', '.join(missing)}"
    level = cpu.isa.x86_64_level or LEVELS.level_counting_sse2_as_v1(flags)
    have = f"this CPU is x86-64-v{level}" if level else "this CPU's ISA level is unknown"
    lacking = [f for f in ("avx", "avx2", "fma", "avx512f") if flags and f not in flags]
    lacks = f", without {', '.join(lacking)}" if lacking else ""
    return f"the {package} build uses an instruction this CPU does not have; {have}{lacks}"
