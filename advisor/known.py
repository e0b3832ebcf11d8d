"""Evaluate resources/known_problems.json against a report: which version-specific problems apply.

Each condition answers True, False or None (the report cannot tell: a captured
tree has no package versions, a quick probe no loaded libraries). An entry
applies when every condition it has is True; one False rules it out; otherwise
it stays silent, so missing facts never produce a finding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts
from cpudoctor.knowledge import FLOORS, KNOWN_PROBLEMS
from cpudoctor.knowledge.versions import in_range, normalize


def problems() -> list[dict[str, Any]]:
    return KNOWN_PROBLEMS.data["problems"]


@dataclass
class Match:
    problem: dict[str, Any]
    values: dict[str, str] = field(default_factory=dict)   # {version}, {cpus} for the title


def _package(cond: dict, f: Facts, m: Match) -> bool | None:
    if not machine.env_known(f):
        return None
    name = cond["name"]
    versions = []
    for pkg in f.get("software.packages", record=False) or []:
        known = FLOORS.package_of(pkg.name)
        if normalize(pkg.name) == name or (known is not None and known.name == name):
            versions.append(pkg.version)
    if name == "torch" and f.get("software.torch.version", record=False):
        versions.append(f.get("software.torch.version"))
    if not versions:
        return False
    f.record(f"software.packages[{name}]", versions[0])
    answer = in_range(versions[0], cond.get("versions"))
    if answer:
        m.values["version"] = str(versions[0])
    return answer


def _libraries(f: Facts, name: str) -> list[tuple[str | None, str | None, str | None]] | None:
    """(version, architecture, file name) of each loaded library called ``name``; None when not known."""
    if name in ("onednn", "mkl"):
        version = f.get("software.torch.mkldnn_version" if name == "onednn" else "software.torch.mkl_version")
        if version:
            return [(str(version), None, None)]
    libs = list(f.get("software.loaded_libs", record=False) or []) + list(f.get("software.numpy.blas", record=False) or [])
    if not libs and not f.get("software.children_ran", record=False):
        return None  # the quick probe did not look
    out = []
    for lib in libs:
        api = (lib.user_api if name == "openmp" else lib.internal_api) or ""
        if api.lower() == name:
            out.append((lib.version, lib.architecture, lib.library))
    f.record(f"software.loaded_libs[{name}]", [f"{v} {a or ''} {n or ''}".strip() for v, a, n in out] or "none")
    return out


def _library(cond: dict, f: Facts, m: Match) -> bool | None:
    if not machine.env_known(f):
        return None
    found = _libraries(f, cond["name"])
    if found is None:
        return None
    if not found:
        return False
    answers = []
    for version, arch, filename in found:
        checks = [in_range(version, cond.get("versions"))]
        if "architecture" in cond:
            checks.append(None if not arch else arch.lower() in {a.lower() for a in cond["architecture"]})
        if "file_pattern" in cond:
            checks.append(None if not filename else bool(re.search(cond["file_pattern"], filename)))
        answer = _all(checks)
        if answer and version:
            m.values.setdefault("version", version)
        answers.append(answer)
    return True if True in answers else (None if None in answers else False)


def _cpu(cond: dict, f: Facts, m: Match) -> bool | None:
    flags = machine.flags(f)
    checks: list[bool | None] = []
    if "arch" in cond:
        arch = f.get("cpu.arch")
        checks.append(None if not arch else arch in cond["arch"])
    if "vendor" in cond:
        vendor = f.get("cpu.vendor")
        checks.append(None if not vendor else vendor in cond["vendor"])
    if "uarch" in cond:
        uarch = f.get("cpu.microarchitecture")
        checks.append(None if not uarch else uarch in cond["uarch"])
    for key, test in (("flags_all", all), ("flags_any", any)):
        if key in cond:
            checks.append(None if not flags else test(x in flags for x in cond[key]))
    if "flags_none" in cond:
        checks.append(None if not flags else not any(x in flags for x in cond["flags_none"]))
    if "min_usable_cpus" in cond:
        cpus = machine.usable_cpus(f)
        checks.append(None if not cpus else cpus >= cond["min_usable_cpus"])
        if cpus:
            m.values["cpus"] = str(cpus)
    return _all(checks)


def _os(cond: dict, f: Facts, m: Match) -> bool | None:
    system = f.get("software.os.system")
    return None if not system else system in cond.get("system", [system])


def _env_not_capped(cond: dict, f: Facts, m: Match) -> bool | None:
    if not machine.env_known(f):
        return None
    for name in cond["vars"]:
        value = machine.env_int(f, name)
        if value is not None and value <= cond["limit"]:
            return False
    return True


CONDITIONS: dict[str, Callable[[dict, Facts, Match], bool | None]] = {
    "package": _package, "library": _library, "cpu": _cpu, "os": _os, "env_not_capped": _env_not_capped,
}


def _all(answers: list[bool | None]) -> bool | None:
    if False in answers:
        return False
    return None if None in answers else True


def evaluate(problem: dict[str, Any], f: Facts) -> tuple[bool | None, Match]:
    """(applies, match) for one entry: True, False, or None when the report cannot tell."""
    m = Match(problem)
    answers = []
    for key, cond in problem["when"].items():
        answer = CONDITIONS[key](cond, f, m)
        answers.append(answer)
        if answer is False:
            break
    return _all(answers), m
