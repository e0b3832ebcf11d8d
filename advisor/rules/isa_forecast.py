"""Forecasts from the ISA-floor table: package releases this CPU will not run, before anyone installs them."""

from __future__ import annotations

from cpudoctor.advisor import floors, machine
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.advisor.torch_install import platform_of
from cpudoctor.knowledge import FLOORS
from cpudoctor.knowledge.versions import parse_version
from cpudoctor.model import Finding, Report


@rule("ISA008", "isa-floor-forecast", category="isa", severity="warning",
      title="Package releases this CPU will not run")
def isa_floor_forecast(report: Report) -> list[Finding]:
    """What it checks:
        The CPU's flags against every package in the ISA-floor table (resources/isa_floors.json),
        by version range: which current releases this CPU cannot run (NumPy 2.4 and later need
        x86-64-v2, TensorFlow 1.6 and later AVX, jaxlib AVX ...) and the last releases that do.
        It needs only the CPU's flags, so it also works on a captured tree or a saved report
        where nothing is installed.

    Why it matters:
        An upgrade (``pip install -U``, a new requirements file, a fresh Docker image) silently
        moves a package past its floor and the next run dies with "Illegal instruction". An
        installed package that still runs here but whose next releases will not is the trap: it
        is a warning. Packages not installed are listed for information.

    Fix:
        Pin the releases that run here (``numpy<2.4``), use builds compiled for this CPU, or —
        when the CPU is a VM's — give the VM the host's CPU model (see ISA009).
    """
    f = Facts(report)
    found = floors.forecasts(f)
    if not found:
        if machine.flags(f) and machine.is_x86(f):
            return [f.finding("ok", "Current releases of every package in the ISA table run on this CPU")]
        return []
    out = []
    trapped = [x for x in found if x.installed and _runs(x)]
    for x in trapped:
        sentence, command = floors.fix_for(x.package, x.safe, platform_of(report))
        out.append(f.finding(
            "warning", f"{x.label} {x.installed} runs here, but {x.range_text} will not",
            why=(f"{x.range_text[0].upper()}{x.range_text[1:]} needs {', '.join(x.needs)}; this CPU lacks "
                 f"{', '.join(x.missing)}{_tag(x)}. The installed {x.installed} is below that floor, so an upgrade "
                 f"(pip install -U, a new requirements file or image) breaks every script that imports it."
                 + (f" Source: {x.sources[0]}" if x.sources else "")),
            fix=f"Pin it to the releases this CPU runs ({x.safe}) in your requirements. {sentence}" if x.safe else sentence,
            snippet=command))
    rest = [x for x in found if x not in trapped and not x.installed]
    if rest:
        sure = [x for x in rest if x.certain]
        maybe = [x for x in rest if not x.certain]
        title = "This CPU cannot run " + _some(sure) if sure else "This CPU may not run " + _some(maybe)
        lines = "; ".join(f"{x.range_text} needs {', '.join(x.missing)}{_tag(x)}"
                          + (f", {_distribution(x)}{x.safe} runs" if x.safe else "")
                          for x in rest)
        pins = "\n".join(floors.fix_for(x.package, x.safe, platform_of(report))[1] for x in rest if x.safe)
        out.append(f.finding(
            "info", title,
            why=f"From the ISA-floor table and this CPU's flags: {lines}.",
            fix="If you need them, install the releases that run here, or builds compiled for this CPU.",
            snippet=pins))
    return out


def _some(items: list[floors.Forecast]) -> str:
    """Two names and a count: a title stays one line; the why lists them all."""
    names = [x.short for x in items]
    return " and ".join(names) if len(names) <= 2 else f"{names[0]}, {names[1]} and {len(names) - 2} more"


def _runs(x: floors.Forecast) -> bool:
    """The installed version of a forecast package is below its first bad release (it still runs)."""
    v, first = parse_version(x.installed), parse_version(x.first_bad)
    return v is not None and first is not None and v < first


def _distribution(x: floors.Forecast) -> str:
    entry = FLOORS.packages.get(x.package)
    return entry.distributions[0] if entry and entry.distributions else x.package


def _tag(x: floors.Forecast) -> str:
    return "" if x.confidence == "documented" else f" ({x.confidence})"
