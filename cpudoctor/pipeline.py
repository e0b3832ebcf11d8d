"""One recipe for a diagnosed report, whatever asks for it and whatever it describes.

``cpudoctor report``, ``cpudoctor doctor`` (this machine, ``--root``,
``--from-report``), the window's collector and both of its "Open report"
paths call :func:`build_report`, so the same source gives the same findings
on every surface. A :class:`Source` says what the report describes: this
machine, a captured /proc+/sys tree, or a report saved earlier (perhaps on
another machine). The work runs in named stages:

=====================  ===================================================================
``load``               a saved report is read (saved sources only)
``cpu``                identity, flags, ISA verdicts, clocks
``topology``           packages, NUMA nodes, L3 domains, cores, what this process may use
``software-quick``     OS, Python, packages, environment: files only, milliseconds
``software-children``  PyTorch/BLAS facts and import checks in child processes (seconds)
``cpuid-cross-check``  CPUID in a child against /proc/cpuinfo (this machine, x86 only)
``advisor``            the rules over everything above
=====================  ===================================================================

After the report is built, :func:`with_lab_result` adds a lab result (a benchmark run, the
thread sweep's recommendation) and judges again, for ``cpudoctor bench --into`` and the
window alike; :meth:`Source.for_environment` and :func:`chosen_source` make the source
for a chosen Python environment, for the CLI, the window and its no-display fallback.

``children=False`` skips the two child-process stages (``--fast``). After
each stage ``on_stage`` receives a :class:`StageResult` holding a snapshot of
the report so far: later stages build new objects instead of changing it, so
the window can show a snapshot on its own thread while the next stage runs.

Nothing here writes words; the surfaces render the Report with :mod:`cpudoctor.render`.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cpudoctor.report_file import load_report
from cpudoctor import __version__
from cpudoctor.model import BenchRun, Meta, Report, ThreadRecommendation, utc_now_iso
from cpudoctor.kits.rooted import is_live_root

if TYPE_CHECKING:
    from cpudoctor.model import PythonEnv

STAGES: tuple[str, ...] = ("load", "cpu", "topology", "software-quick", "software-children",
                           "cpuid-cross-check", "advisor")
SourceKind = Literal["machine", "tree", "saved"]


@dataclass(frozen=True)
class Source:
    """What a report describes.

    ``machine``: this machine (``path`` is ``/``); ``tree``: a captured /proc+/sys
    tree (``path`` is the folder holding proc/ and sys/); ``saved``: a report file.
    On this machine, ``python`` is the interpreter of the Python environment the
    software stages describe (None: CPU Doctor's own) and ``python_chosen_by``
    says how it was chosen; only the ``software-*`` stages read them.
    """

    kind: SourceKind
    path: Path
    python: str | None = None
    python_chosen_by: str | None = None

    @classmethod
    def this_machine(cls, python: str | None = None, chosen_by: str | None = None) -> "Source":
        return cls("machine", Path("/"), python, chosen_by)

    @classmethod
    def for_environment(cls, env: "PythonEnv | None", chosen_by: str | None = None) -> "Source":
        """This machine, its software described in ``env`` (None or CPU Doctor's own: this interpreter's)."""
        return cls.this_machine(environment_python(env), chosen_by)

    @classmethod
    def tree(cls, root: Path | str) -> "Source":
        """A captured tree; ``/`` (or a path resolving to it) is this machine."""
        root = Path(root)
        return cls.this_machine() if is_live_root(root) else cls("tree", root)

    @classmethod
    def saved(cls, path: Path | str) -> "Source":
        return cls("saved", Path(path))

    @property
    def live(self) -> bool:
        """True for this machine: child processes and the CPUID check describe it."""
        return self.kind == "machine"

    @property
    def label(self) -> str:
        """``this machine``, ``captured tree DIR``, ``saved report NAME``: how the surfaces name it."""
        if self.kind == "machine":
            return "this machine"
        if self.kind == "tree":
            return f"captured tree {self.path}"
        return f"saved report {self.path.name}"


def environment_python(env: "PythonEnv | None") -> str | None:
    """The interpreter that describes ``env`` and runs the lab's jobs in it; None for CPU Doctor's own."""
    return None if env is None or env.own else env.python


def chosen_source(choice: str | None = None, *, fast: bool = False) -> Source:
    """This machine, its software described in the environment ``choice`` names (``--python PATH|ENV``),
    else ``$CPUDOCTOR_PYTHON``, else the one the user most likely trains in: what ``cpudoctor doctor``
    and ``report`` describe (``fast``: decided without running any interpreter). Raises
    :class:`cpudoctor.probes.software.envs.EnvError` for a choice that cannot be used."""
    from cpudoctor.probes.software.envs import training_environment

    env, chosen_by = training_environment(choice, fast=fast)
    return Source.for_environment(env, chosen_by)


@dataclass(frozen=True)
class StageResult:
    """One finished stage: its name, the report so far (a snapshot), and how long the stage took."""

    name: str
    report: Report
    seconds: float


StageCallback = Callable[[StageResult], None]
# Which Python environment this machine's software stages describe, decided while the CPU and topology
# stages run: (interpreter or None for CPU Doctor's own, how it was chosen). See build_report.
EnvironmentCallback = Callable[[], "tuple[str | None, str | None]"]


class Cancelled(Exception):
    """``cancelled()`` turned true between two stages: the caller no longer wants the report."""


def planned_stages(source: Source, *, children: bool = True, findings: bool = True,
                   software: bool = True) -> list[str]:
    """The stages :func:`build_report` will run for these arguments, in order (for progress displays).

    The CPUID cross-check is planned for this machine; on a CPU that is not x86
    it is skipped when the CPU stage has told so.
    """
    if source.kind == "saved":
        stages = ["load"]
    else:
        stages = ["cpu", "topology"]
        if software:
            stages.append("software-quick")
            if children and source.live:
                stages.append("software-children")
        if children and source.live:
            stages.append("cpuid-cross-check")
    if findings:
        stages.append("advisor")
    return stages


def build_report(
    source: Source,
    *,
    children: bool = True,
    findings: bool = True,
    software: bool = True,
    only: set[str] | None = None,
    on_stage: StageCallback | None = None,
    cancelled: Callable[[], bool] | None = None,
    environment: EnvironmentCallback | None = None,
) -> Report:
    """Build the report of ``source`` and diagnose it.

    ``children``: run the child-process stages (PyTorch/BLAS facts, import
    checks, CPUID cross-check) on this machine. ``findings``: run the advisor
    (``only`` these rule codes, symbols or categories). ``software=False``
    leaves the software stack out (tests and fixtures that judge the hardware
    alone). A saved report is re-diagnosed with this CPU Doctor's rules; its
    own findings stay when the advisor cannot run.

    ``environment``: for this machine, called once when the software stages start, instead of
    ``source.python``: which environment to describe. The window passes one that waits for its
    picker's decision (made meanwhile on another thread), so the machine's facts need not wait for it;
    it may raise :class:`Cancelled`.

    Raises :class:`cpudoctor.model.report.ReportError` for an unreadable saved report
    and :class:`Cancelled` when ``cancelled()`` turns true between stages.
    """
    run = _Run(on_stage, cancelled)
    if source.kind == "saved":
        report = run.stage("load", lambda _r: load_report(source.path), None)
    else:
        report = _probe(source, run, children=children, software=software, environment=environment)
    if findings:
        report = run.stage("advisor", lambda r: diagnose(r, only), report)
    return report


def _probe(source: Source, run: "_Run", *, children: bool, software: bool,
           environment: EnvironmentCallback | None = None) -> Report:
    from cpudoctor.probes import probe_cpu, probe_topology

    root = source.path
    meta = Meta(generated_at=utc_now_iso(), tool_version=__version__, root=str(root), platform=sys.platform)
    report = run.stage("cpu", lambda _r: _probed(Report(meta=meta, cpu=probe_cpu(root)), "cpu", root), None)
    # The CPUID child needs nothing the later stages find: it runs beside them (its stage collects it).
    cpuid = _CpuidChild() if children and source.live and report.cpu.is_x86 else None
    report = run.stage("topology", lambda r: _probed(dataclasses.replace(r, topology=probe_topology(root)),
                                                     "topology", root), report)
    if software:
        from cpudoctor.probes import SoftwareProbe

        probes: list[SoftwareProbe] = []      # the quick stage's probe, reused by the children stage

        def quick(r: Report) -> Report:
            python, chosen_by = source.python, source.python_chosen_by
            if environment is not None and source.live:
                python, chosen_by = environment()
            probes.append(SoftwareProbe(root, cpu=r.cpu, python=python, chosen_by=chosen_by, ask=children))
            return _probed(dataclasses.replace(r, software=probes[0].quick()), "software", root)

        report = run.stage("software-quick", quick, report)
        if probes and probes[0].captured_cpuid is not None and report.cpu.cpuid_check is None:
            report = _with_cpuid_check(report, probes[0].captured_cpuid)     # a capture's, made on its machine
        if children and source.live and not probes[0].captured:
            report = run.stage("software-children", lambda r: _probed(
                dataclasses.replace(r, software=probes[0].complete()), "software", root), report)
    if cpuid is not None:
        report = run.stage("cpuid-cross-check", cpuid.checked, report)
    return report


# What a report may hold, as cpudoctor.report_file enforces when one is read back: a probe
# that copied something odd from a tree must not write a report that CPU Doctor then refuses.
_MAX_TEXT = 4096
_MAX_INT = 2 ** 63 - 1


def _probed(report: Report, part: str, root: Path) -> Report:
    """``report`` with its freshly probed ``part`` (cpu, topology, software) made safe to write and read back:
    over-long strings clipped, control characters and out-of-range integers dropped, and the files of a tree
    that were not read (a FIFO, a device, a file of gigabytes) noted. The part is new in this stage, so
    bounding it in place changes nothing a window already shows."""
    from cpudoctor.kits.rooted import refusal_notes

    notes = list(report.notes)
    _bound(getattr(report, part), notes, f"report.{part}")
    notes.extend(refusal_notes(root))
    return dataclasses.replace(report, notes=notes) if notes != report.notes else report


def _bound(obj, notes: list[str], path: str = "report") -> None:
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _bound(value, notes, where)
        elif isinstance(value, list):
            setattr(obj, f.name, [_bound_value(v, notes, where) for v in value])
        elif isinstance(value, dict):
            setattr(obj, f.name, {k: _bound_value(v, notes, where) for k, v in value.items()})
        else:
            setattr(obj, f.name, _bound_value(value, notes, where))


def _bound_value(value, notes: list[str], where: str):
    from cpudoctor.kits.escape import strip_controls

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _bound(value, notes, where)
        return value
    if isinstance(value, str):
        value = strip_controls(value)
        return value if len(value) <= _MAX_TEXT else value[: _MAX_TEXT - 1] + "…"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_INT:
        notes.append(f"{where}: a value beyond 64 bits was dropped")
        return None
    return value


class _CpuidChild:
    """The CPUID cross-check's child, started at once on a thread of its own; :meth:`checked` waits for it and
    gives the report with the check on its CPU, as data and notes (a new CpuInfo: snapshots keep theirs)."""

    def __init__(self):
        import threading

        from cpudoctor.probes.cpu.cpuid_check import run_child

        self._result = None
        self._thread = threading.Thread(target=self._run, args=(run_child,), name="cpudoctor-cpuid", daemon=True)
        self._thread.start()

    def _run(self, run_child) -> None:
        self._result = run_child()

    def checked(self, report: Report) -> Report:
        from cpudoctor.probes.cpu.cpuid_check import CpuidResult, notes, summarise

        self._thread.join()
        result = self._result if self._result is not None else CpuidResult(error="the CPUID check did not run")
        check = summarise(report.cpu, result)
        return _with_cpuid_check(report, check, notes(report.cpu, check, result.xcr0))


def _with_cpuid_check(report: Report, check, notes: list[str] | None = None) -> Report:
    """The report with a CPUID check on its CPU, as data and notes (a new CpuInfo: snapshots keep theirs), and the
    hypervisor its leaf names where DMI named none. ``notes`` None: worded here (a check recorded elsewhere,
    a capture's, made on its machine)."""
    from cpudoctor.probes.cpu.cpuid_check import notes as check_notes

    said = check_notes(report.cpu, check) if notes is None else notes
    cpu = dataclasses.replace(report.cpu, cpuid_check=check, notes=[*report.cpu.notes, *said])
    software = report.software
    if software is not None and check.hypervisor_vendor:
        from cpudoctor.probes.software.osinfo import name_hypervisor

        os_info, sw_notes = name_hypervisor(software.os, software.notes, check.hypervisor_vendor)
        software = dataclasses.replace(software, os=os_info, notes=sw_notes)
    return dataclasses.replace(report, cpu=cpu, software=software)


def diagnose(report: Report, only: set[str] | None = None) -> Report:
    """The advisor stage on its own: a new report with the advisor's findings (``report`` is not changed).

    For the window's model, which diagnoses again when a lab result arrives. A
    failing advisor leaves a note (and a saved report's own findings).
    """
    from cpudoctor import advisor

    try:
        found = advisor.diagnose(report, only=only)
    except Exception as exc:  # noqa: BLE001 - a broken advisor must not cost the user the whole report
        note = f"the advisor failed ({type(exc).__name__}: {exc}); " + (
            "the findings are those saved with the report" if report.findings else "findings are missing")
        return dataclasses.replace(report, notes=[*report.notes, note])
    return dataclasses.replace(report, findings=found)


class _Keep:
    """The report's recommendation stays (the default of :func:`with_lab_result`)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


def with_lab_result(report: Report, run: BenchRun | None = None, *,
                    recommendation: ThreadRecommendation | None | _Keep = KEEP, judge: bool = True,
                    only: set[str] | None = None) -> Report:
    """A new report: ``report`` with a lab ``run`` added (and ``recommendation`` in place of its own), judged again.

    The one "add a lab result and judge again": ``cpudoctor bench --into`` and the window's
    model both come here, so a measurement changes the findings the same way on every surface
    (a measured thread count rewrites the thread advice, a bf16 run the precision advice).
    ``judge=False`` adds without judging, for a caller that runs :func:`diagnose` itself (the
    window, on a worker thread). ``report`` is never changed.
    """
    changed = dataclasses.replace(
        report, benchmarks=[*report.benchmarks, *([run] if run is not None else [])],
        recommendation=report.recommendation if isinstance(recommendation, _Keep) else recommendation,
        findings=list(report.findings), notes=list(report.notes))
    return diagnose(changed, only) if judge else changed


class _Run:
    """Times each stage, hands its snapshot to the callback, and stops between stages when cancelled."""

    def __init__(self, on_stage: StageCallback | None, cancelled: Callable[[], bool] | None):
        self.on_stage = on_stage
        self.cancelled = cancelled

    def stage(self, name: str, make: Callable[[Report | None], Report], report: Report | None) -> Report:
        if self.cancelled is not None and self.cancelled():
            raise Cancelled(name)
        start = time.perf_counter()
        result = make(report)
        if self.on_stage is not None:
            self.on_stage(StageResult(name, result, time.perf_counter() - start))
        return result

