"""Which package really lacks the instructions, when an import dies of SIGILL (ISA003's facts).

``import cv2`` on a CPU without x86-64-v2 dies inside ``import numpy`` (OpenCV
imports NumPy first, and NumPy 2.4 needs x86-64-v2): the import check of
OpenCV crashed, but the build that lacks the instructions is NumPy's. The
probe records the top-level module whose code ran at the crash
(``ImportCheck.crashed_in``, from faulthandler's report); here each crash is
grouped under that package, so the finding names it and its fix is NumPy's,
and OpenCV is named as a package it takes down with it.

What the build needs is checked against the flags of the CPU that runs Python
(:func:`cpudoctor.advisor.machine.running_flags`): under emulation
/proc/cpuinfo describes the host, which may well have the instructions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts
from cpudoctor.advisor.floors import floor_entry
from cpudoctor.knowledge import FLOORS


@dataclass
class Sigill:
    """One package whose build lacks instructions, and every import that died in it."""

    package: str                  # the distribution or table name that lacks the instructions ("numpy")
    module: str
    message: str = ""             # its own check's message (or the first import that died in it)
    version: str | None = None
    floor_name: str | None = None # its name in the ISA-floor table, when it has an entry
    missing: list[str] = field(default_factory=list)   # what its floor needs that the running CPU lacks
    needs: list[str] = field(default_factory=list)
    also: list[str] = field(default_factory=list)      # other packages whose import died inside it


def _floor_entry(package: str, module: str):
    return floor_entry(package, module)


def _installed_version(f: Facts, entry, package: str) -> str | None:
    names = set(entry.distributions) | {entry.name} if entry else {package}
    for pkg in f.get("software.packages", record=False) or []:
        if pkg.name in names or (entry is not None and FLOORS.package_of(pkg.name) is entry):
            return pkg.version
    return None


def sigill_crashes(f: Facts) -> list[Sigill]:
    """The SIGILL crashes of the report's import checks (and the torch child), one per culprit package."""
    checks: list[tuple[str, str, str, str | None]] = []     # (package, module, message, crashed_in)
    import_checks = f.get("software.import_checks", record=False) or []
    if f.get("software.torch.status") == "crashed" and f.get("software.torch.signal_name") == "SIGILL":
        inside = next((c.crashed_in for c in import_checks if c.package == "torch"), None)
        checks.append(("torch", "torch", f.get("software.torch.error") or "Illegal instruction", inside))
    for chk in import_checks:
        if chk.status == "crashed" and chk.signal_name == "SIGILL" and chk.package not in {c[0] for c in checks}:
            f.record(f"software.import_checks[{chk.package}]",
                     f"crashed {chk.signal_name}" + (f" in {chk.crashed_in}" if chk.crashed_in else ""))
            checks.append((chk.package, chk.module, chk.message or "Illegal instruction", chk.crashed_in))
    by_module = {module: package for package, module, _, _ in checks}
    out: dict[str, Sigill] = {}
    for package, module, message, inside in checks:
        culprit_module = inside or module
        if culprit_module != module:
            entry = _floor_entry("", culprit_module)
            culprit = by_module.get(culprit_module) or (entry.name if entry else culprit_module)
        else:
            culprit = package
        crash = out.get(culprit)
        if crash is None:
            crash = out[culprit] = Sigill(culprit, culprit_module, message if culprit == package else "")
        if culprit == package:
            crash.message = message
        else:
            crash.also.append(package)
    flags = machine.running_flags(f)
    for crash in out.values():
        entry = _floor_entry(crash.package, crash.module)
        crash.floor_name = entry.name if entry else None
        crash.version = _installed_version(f, entry, crash.package)
        if entry is not None and flags:
            floor = FLOORS.applicable_floor(entry.name, crash.version)
            crash.needs = list(floor.needs) if floor else []
            crash.missing = FLOORS.missing_at(entry.name, crash.version, flags)
    return list(out.values())


def crashed_packages(f: Facts) -> set[str]:
    """Every package an ISA003 finding speaks for (culprits and what died with them)."""
    return {name for c in sigill_crashes(f) for name in (c.package, c.floor_name, *c.also) if name}


def floor_culprit(f: Facts, check, platform=None):
    """The package whose ISA floor explains a failed import check or workload (a :class:`floors.Culprit`), or None.

    The candidates, in order: the module whose code ran at a crash (``crashed_in``: importing torch that died in
    NumPy's code), a package of the floor table the message names ("This version of jaxlib was built using AVX
    instructions", "NumPy was built with baseline optimizations"), then the checked package itself. Only a floor
    the CPU that runs Python misses counts: then the cause is known, and the fix is the release that runs.
    """
    from cpudoctor.advisor.floors import culprit

    flags = machine.running_flags(f)
    if not flags:
        return None
    names = [getattr(check, "crashed_in", None)]
    said = " ".join(filter(None, (getattr(check, "message", ""), getattr(check, "workload_message", "")))).lower()
    names += [e.name for e in FLOORS.packages.values() if said and _names(said, e)]
    names += [getattr(check, "package", None), getattr(check, "module", None)]
    seen: set[str] = set()
    for name in filter(None, names):
        entry = floor_entry(name)
        if entry is None or entry.name in seen:
            continue
        seen.add(entry.name)
        found = culprit(entry.name, _installed_version(f, entry, entry.name), flags, platform)
        if found is not None:
            return found
    return None


def _names(said: str, entry) -> bool:
    """The message names the table's package (its module or a distribution, as a word)."""
    import re

    words = {entry.module, entry.name, *entry.distributions}
    return any(re.search(rf"(?<![\w.-]){re.escape(w.lower())}(?![\w-])", said) for w in words if w)


def explained_by_floor(f: Facts) -> set[str]:
    """The packages whose failed import or workload a floor explains (ISA004, KERNEL001 name it): ISA005 leaves
    them to those findings, as it leaves SIGILL crashes to ISA003."""
    out: set[str] = set()
    for chk in f.get("software.import_checks", record=False) or []:
        failed = chk.status in ("crashed", "error", "timeout") or chk.workload_status in ("crashed", "error", "timeout")
        if not failed:
            continue
        found = floor_culprit(f, chk)
        if found is not None:
            entry = floor_entry(found.package)
            out.update(filter(None, (found.package, chk.package, *(entry.distributions if entry else ()))))
    return out
