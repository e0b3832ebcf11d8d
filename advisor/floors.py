"""The ISA-floor table seen from a report: what to do about a build, and what this CPU cannot run.

The rules ISA003 (a crash), ISA005 (an installed build below its floor) and
ISA008 (a forecast) word the same facts the same way through here: the fix
commands and the forecasts live here, the table and its version maths in
:mod:`cpudoctor.knowledge.floors`, the recorded risks in the software probe. Everything
is computed from the report's CPU flags and package versions with the current
table, so a captured tree or a report saved by an older CPU Doctor gets the
same answers as the live machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts
from cpudoctor.advisor.torch_install import Platform, is_torch, pip_install
from cpudoctor.knowledge import FLOORS, LEVELS
from cpudoctor.knowledge.versions import lower_bound, parse_version


@dataclass(frozen=True)
class Forecast:
    """Releases of one package this CPU cannot run, and the ones it can."""

    package: str
    label: str
    first_bad: str | None          # "2.4": releases from here on need more than this CPU has; None = every release
    needs: tuple[str, ...]
    missing: tuple[str, ...]
    confidence: str
    safe: str                      # "<2.4", or "" when no release in the table runs here
    installed: str | None          # the installed version, when the report knows one
    sources: tuple[str, ...]

    @property
    def range_text(self) -> str:
        return f"{self.label} {self.first_bad} and later" if self.first_bad else f"every {self.label} release"

    @property
    def short(self) -> str:
        return f"{self.label} ≥ {self.first_bad}" if self.first_bad else self.label

    @property
    def certain(self) -> bool:
        return self.confidence in ("documented", "reported")


def pip_spec(package: str, safe: str | None, platform: Platform | None = None) -> str:
    """``python -m pip install 'numpy<2.4'`` for a safe range; "" when there is none to give.

    PyTorch's family comes from its CPU wheel index (:mod:`cpudoctor.advisor.torch_install`)."""
    if not safe:
        return ""
    return pip_install([FLOORS.requirement(package, safe)], platform)


def fix_for(package: str, safe: str | None, platform: Platform | None = None) -> tuple[str, str]:
    """(sentence, command) that get a build of ``package`` this CPU runs.

    ``safe`` is :attr:`IsaRisk.safe_versions`: a range to pin, "" when no
    release in the table runs here (the table's install hint then), None when
    current releases run (upgrade).
    """
    entry = FLOORS.packages.get(package)
    label = entry.label if entry else package
    distribution = entry.distributions[0] if entry and entry.distributions else package
    if safe:
        command = pip_spec(package, safe, platform)
        return f"Install a {label} release this CPU runs ({distribution}{safe}).", command
    if safe is None:
        command = pip_install([distribution], platform, upgrade=True)
        return f"Upgrade {label}: its current releases run on this CPU.", command
    hint = entry.install_hint if entry else ""
    if is_torch(distribution) and hint.startswith("python -m pip"):
        hint = pip_install([distribution], platform)
    if hint.startswith("python -m pip") or hint.startswith("conda "):
        return f"No stock {label} release runs on this CPU; install a build made for it.", hint
    sentence = f"No stock {label} release runs on this CPU. {hint}" if hint else \
        f"No stock {label} release runs on this CPU; build it from source for this CPU or run on a newer one."
    return sentence, ""


def safe_range(f: Facts, risk) -> str | None:
    """The releases of an at-risk package this CPU runs, from the current table and the report's flags.

    A report saved by an older CPU Doctor carries no ``safe_versions``; the
    flags are enough to compute it again, so old and new reports get the same fix.
    Under emulation the flags are those of the CPU that runs Python (ISA007).
    """
    flags = machine.running_flags(f)
    return FLOORS.safe_versions(risk.package, flags) if flags else risk.safe_versions


def forecasts(f: Facts) -> list[Forecast]:
    """Every package in the table whose current releases need more than this CPU's flags (x86 only)."""
    flags = machine.flags(f)
    if not flags or machine.is_x86(f) is False:
        return []
    installed = {}
    if machine.env_known(f):
        for pkg in f.get("software.packages", record=False) or []:
            known = FLOORS.package_of(pkg.name)
            if known and known.name not in installed:
                installed[known.name] = pkg.version
    out = []
    for name, entry in FLOORS.packages.items():
        safe = FLOORS.safe_versions(name, flags)
        if safe is None:
            continue
        open_unmet = [fl for fl in entry.floors if fl.open_ended and LEVELS.missing_for(fl.needs, flags)]
        first = min(open_unmet, key=lambda fl: lower_bound(fl.versions) or parse_version("0"))
        start = lower_bound(first.versions) if safe else None   # "": no release runs at all
        out.append(Forecast(name, entry.label, str(start) if start else None, first.needs,
                            tuple(LEVELS.missing_for(first.needs, flags)), first.confidence, safe,
                            installed.get(name), first.sources))
    # NumPy first: every stack has it, so it is the forecast most readers need.
    kinds = ["scientific", "dl-framework", "inference-runtime", "vector-search", "image-audio", "tokenizer"]
    order = {name: kinds.index(entry.kind) if entry.kind in kinds else 99 for name, entry in FLOORS.packages.items()}
    return sorted(out, key=lambda x: order.get(x.package, 99))


@dataclass(frozen=True)
class Culprit:
    """A package whose build needs instructions a CPU lacks, with the release that runs there (ISA003's words for
    a crash whose package is known: a job that died of SIGILL, an import that died in another package)."""

    package: str                   # its name in the ISA-floor table
    label: str
    version: str | None            # the installed version, when known
    needs: tuple[str, ...]
    missing: tuple[str, ...]
    safe: str | None               # the releases that run there ("<2.4"), "" none, None current ones
    fix: str
    snippet: str


def culprit(name: str, version: str | None, flags: set[str], platform: Platform | None = None) -> Culprit | None:
    """``name`` (a distribution, table name or top-level module) as a :class:`Culprit` when the table knows its
    floor and ``flags`` miss it; None when the table does not know it or the CPU meets its floor."""
    entry = floor_entry(name)
    if entry is None or not flags:
        return None
    missing = FLOORS.missing_at(entry.name, version, flags)
    floor = FLOORS.applicable_floor(entry.name, version)
    if not missing or floor is None:
        return None
    safe = FLOORS.safe_versions(entry.name, flags)
    fix, snippet = fix_for(entry.name, safe, platform)
    return Culprit(entry.name, entry.label, version, tuple(floor.needs), tuple(missing), safe, fix, snippet)


def floor_entry(name: str, module: str | None = None):
    """The ISA-floor table's entry for a distribution or table name, else for a top-level module; None."""
    entry = FLOORS.package_of(name) or FLOORS.packages.get(name)
    if entry is None:
        module = module or name
        entry = next((e for e in FLOORS.packages.values() if e.module == module), None)
    return entry
