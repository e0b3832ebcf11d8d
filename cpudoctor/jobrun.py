"""The job pipeline: a job's facts -> the job rules -> findings, whichever way the job was watched.

Every way of watching a training job comes here, as every report comes to
:func:`cpudoctor.pipeline.build_report`:

- ``cpudoctor run -- COMMAND`` and the Inspector's "Run a script…" start the job
  and watch it to its end (:class:`WatchedRun`, :func:`run_job`): its stacks,
  thread states, oneDNN's kernels and PyTorch's recompilations, and its process
  (threads, CPUs, libraries, memory) sampled over its whole life;
- ``cpudoctor inspect PID`` and the Inspector sample a running process for a
  window (:func:`inspect_job`).

Either way the facts become one :class:`~cpudoctor.model.evidence.JobEvidence`,
and :func:`diagnose` runs both rule families over it: the process rules
(PROC0xx, how the process is set up) and the evidence rules (EVID0xx, what it
did), so ``run`` and ``inspect`` give the same job the same findings. The CPU's
facts come from the caller's report or its source (:class:`Machine`): no rule
reads this machine, so a captured tree (``inspect --root``) is judged against
its own CPU. Nothing here writes words: render does (:mod:`cpudoctor.render.run_report`,
:mod:`cpudoctor.render.inspect`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.kits.rooted import is_live_root
from cpudoctor.model import CpuInfo, Finding, Report, SEVERITY_RANK, Topology
from cpudoctor.model.evidence import JobEvidence, RunObservation, training_of
from cpudoctor.model.inspection import Inspection

RUN_INSPECT_INTERVAL_S = 0.5     # the process sampler's step while `run` watches a job (its stacks: RUN_RATE)
RUN_REFRESH_S = 5.0              # how often the libraries, affinity and memory of a starting job are read again
FOREVER_S = 7 * 24 * 3600.0      # `run` without --seconds: until the job exits
STOPPED_BY_USER = ("interrupt", "stopped", "terminated")   # ended_by values that skip the quick roof measurement


@dataclass(frozen=True)
class Machine:
    """The CPU and topology a job is judged against, from the surface's report or its source."""

    cpu: CpuInfo | None = None
    topology: Topology | None = None

    @classmethod
    def of_report(cls, report: Report) -> "Machine":
        return cls(report.cpu, report.topology)

    @classmethod
    def of_source(cls, source=None) -> "Machine":
        """The CPU and topology stages of :func:`cpudoctor.pipeline.build_report` for ``source`` (this machine by
        default; a captured tree for ``inspect --root``)."""
        from cpudoctor.pipeline import Source, build_report

        report = build_report(source or Source.this_machine(), children=False, software=False, findings=False)
        return cls.of_report(report)

    @property
    def flags(self) -> set[str]:
        return set(self.cpu.flags) if self.cpu is not None else set()


def diagnose(job: JobEvidence, machine: Machine) -> list[Finding]:
    """The process rules and the evidence rules over one job, worst first (the one diagnosis of a job)."""
    from cpudoctor.advisor.evidence_rules import Evidence, run_evidence_rules
    from cpudoctor.advisor.process_rules import run_process_rules

    found: list[Finding] = []
    if job.process is not None:
        found += run_process_rules(job.process, machine.topology, state=job.state)
    found += run_evidence_rules(Evidence.of(job, machine.flags))
    return sorted(found, key=lambda f: -SEVERITY_RANK.get(f.severity, 0))


def diagnose_run(obs: RunObservation, machine: Machine) -> list[Finding]:
    """A watched run's findings (none for a command that never started)."""
    return diagnose(JobEvidence.of_run(obs), machine) if obs.ended_by != "failed" else []


def diagnose_inspection(insp: Inspection, machine: Machine) -> list[Finding]:
    return diagnose(JobEvidence.of_inspection(insp), machine)


def inspect_job(pid: int, *, seconds: float, machine: Machine, root: Path = Path("/"), stacks: bool = True,
                should_stop: Callable[[], bool] | None = None,
                inspect: Callable[..., Inspection] | None = None) -> tuple[Inspection, list[Finding]]:
    """Sample a running process for ``seconds`` (its stacks too, on this machine) and diagnose it.

    Raises :class:`cpudoctor.probes.process.inspect.InspectError` when it cannot be inspected at all.
    ``inspect(pid, seconds=, topology=, should_stop=)`` replaces the sampler (the window's, tests' fakes).
    """
    if inspect is None:
        from functools import partial

        from cpudoctor.probes.process.inspect import inspect_process

        inspect = partial(inspect_process, root=root, stacks=stacks and is_live_root(root))
    insp = inspect(pid, seconds=seconds, topology=machine.topology, should_stop=should_stop)
    return insp, diagnose_inspection(insp, machine)


@dataclass(frozen=True)
class RoofChoice:
    """Which measured roof a run's kernels are held against (:mod:`cpudoctor.lab.job_roofs`): a saved report's
    roofline run, else the window's kept runs, else (``measure``) a quick measurement in a child after the job;
    ``hold=False``: none (the kernels' rates are still counted)."""

    report: Path | None = None
    measure: bool = True
    hold: bool = True
    python: str | None = None          # the interpreter the quick measurement runs in (the job's, when Python)
    notify: Callable[[str], None] | None = None   # told before a quick measurement starts (the CLI says it)


def job_dtypes(obs: RunObservation) -> list[str]:
    """The dtypes the job's counted kernels computed in (oneDNN's and oneMKL's, in the lab's words)."""
    from cpudoctor.model.achieved import DTYPES

    seen = [DTYPES.get(p.data_type, p.data_type) for p in obs.onednn.primitives if p.flop]
    seen += [DTYPES.get(c.dtype, c.dtype) for c in obs.mkl.calls if c.flop]
    return list(dict.fromkeys(seen))


def achieved(obs: RunObservation, machine: Machine, choice: RoofChoice | None = None, steps: int | None = None):
    """The run's kernels against the measured roof (None when no kernel was timed): the roof found as
    ``choice`` says, the wall time the verbose lines cover (the run less its start-up)."""
    from cpudoctor.model.achieved import Roofs, utilisation

    choice = choice or RoofChoice()
    if not obs.onednn.total_ms and not obs.mkl.total_ms:
        return None
    dtypes = job_dtypes(obs)
    threads = obs.onednn.threads or next((c.threads for c in obs.mkl.calls if c.threads), None)
    roofs = Roofs()
    if choice.hold and dtypes:
        from cpudoctor.lab import job_roofs

        flags = sorted(machine.flags) or None
        try:
            # a job the user stopped (Ctrl-C, the window's Stop, SIGTERM) is not kept waiting for a measurement, nor
            # one that crashed (its crash is the news; a SIGILL job's environment may crash the measurement too)
            measure = choice.measure and obs.ended_by not in STOPPED_BY_USER and obs.crash is None
            roofs = job_roofs.find(dtypes, threads, flags=flags, report=choice.report, measure=measure,
                                   python=choice.python, notify=choice.notify)
        except Exception as exc:  # noqa: BLE001 - a saved report that cannot be read: a note, not a failed run
            roofs = Roofs(source="none", where=f"{choice.report}: {exc}"[:300])
    # steps: the job's optimizer steps over the observed wall time, when its probe counted them (per-step figures)
    return utilisation(obs.onednn, obs.mkl, roofs, wall_s=observed_wall(obs), steps=steps)


def probe_steps(obs: RunObservation) -> int | None:
    """The job's optimizer steps over the wall time its kernels were observed, counted by its probe (None when it
    counted none): all of them, or its step rate times the windows when the verbose lines were on for windows."""
    state = obs.state
    if state is None or not state.loaded or not state.steps:
        return None
    rate, wall = state.step_rate(), observed_wall(obs)
    if obs.onednn.observed_s and rate and wall:
        return max(1, round(rate * wall))
    return state.steps


def observed_wall(obs: RunObservation) -> float | None:
    """The wall time the verbose lines cover: the job's windows when it switched them on for windows only
    (probes/child/scripts/verbose_window.py), else the run's wall time less its start-up (importing modules,
    sampled on the driving thread)."""
    windows = obs.onednn.observed_s
    if windows:
        return windows
    if not obs.duration_s:
        return None
    bd = obs.breakdown
    startup = bd.startup_samples / bd.stack_rate_hz if bd is not None and bd.stack_rate_hz else 0.0
    return max(obs.duration_s - startup, obs.duration_s * 0.1)


@dataclass
class _ProcessWatch:
    """The job's process sampled on a thread of its own from its start to its end."""

    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: Inspection | None = None
    error: str | None = None


class WatchedRun:
    """A job started and watched to its end: :meth:`start`, then :meth:`wait` (:meth:`stop` from another thread).

    The job runs as :class:`cpudoctor.probes.process.observe.JobRun` runs it (output passed through, its
    diagnostics' lines kept out, stopped in stages); beside it the job's process is sampled as ``inspect``
    samples one, so the process rules judge it too.
    """

    def __init__(self, argv: list[str], *, machine: Machine | None = None, roof: RoofChoice | None = None,
                 **job_options):
        from cpudoctor.probes.process.observe import JobRun

        self.job = JobRun(argv, **job_options)
        self.machine = machine
        self.roof = roof or RoofChoice()
        self.findings: list[Finding] = []          # after :meth:`wait`
        self._watch = _ProcessWatch()

    @property
    def obs(self) -> RunObservation:
        return self.job.obs

    def start(self) -> bool:
        """Launch the job and its samplers; False (with ``obs.error``) when the command cannot start."""
        if not self.job.start():
            return False
        if self.job.obs.pid is not None:
            self._watch.thread = threading.Thread(target=self._watch_process, args=(self.job.obs.pid,),
                                                  name="cpudoctor-run-process", daemon=True)
            self._watch.thread.start()
        return True

    def _watch_process(self, pid: int) -> None:
        from cpudoctor.probes.process.inspect import InspectError, inspect_process

        try:
            if self.machine is None:        # read while the job starts, not before it (wait() joins this thread)
                self.machine = Machine.of_source()
            self._watch.result = inspect_process(pid, seconds=self.job.seconds or FOREVER_S,
                                                 interval=RUN_INSPECT_INTERVAL_S, topology=self.machine.topology,
                                                 should_stop=self._watch.done.is_set, refresh_s=RUN_REFRESH_S)
        except InspectError:
            self._watch.result = None           # gone before its first sample: the run's own facts remain
        except Exception as exc:  # noqa: BLE001 - a failing process sampler must not cost the run its report
            self._watch.error = f"{type(exc).__name__}: {exc}"[:300]

    def stop(self) -> None:
        self.job.stop()

    def interrupt(self, signal_name: str = "SIGINT") -> None:
        """Ctrl-C (or SIGTERM/SIGHUP) to CPU Doctor: the job is stopped as :meth:`JobRun.interrupt` says."""
        self.job.interrupt(signal_name)

    def wait(self) -> RunObservation:
        """Until the job ends; then its observation, and its diagnosis in :attr:`findings`."""
        obs = self.job.wait()
        self._watch.done.set()
        if self._watch.thread is not None:
            self._watch.thread.join(RUN_INSPECT_INTERVAL_S * 4 + 5)
        obs.process, obs.process_error = self._watch.result, self._watch.error
        if obs.process is not None and obs.process.memory is not None and obs.process.memory.training is None:
            obs.process.memory.with_training(training_of(obs.state))   # every surface shows what the probe counted
        if obs.ended_by != "failed":
            machine = self.machine or Machine.of_source()
            obs.achieved = achieved(obs, machine, self.roof, steps=probe_steps(obs))
            self.findings = diagnose_run(obs, machine)
        return obs


def run_job(argv: list[str], *, machine: Machine | None = None, roof: RoofChoice | None = None,
            **job_options) -> tuple[RunObservation, list[Finding]]:
    """Start ``argv``, watch it to its end and diagnose it (``cpudoctor run``): Ctrl-C stops the job and still
    reports, as do SIGTERM and SIGHUP (:func:`~cpudoctor.probes.process.observe.run_interruptible`)."""
    from cpudoctor.probes.process.observe import run_interruptible

    run = WatchedRun(argv, machine=machine, roof=roof, **job_options)
    obs = run_interruptible(run)
    return obs, run.findings


def diagnose_lab_run(run, machine: Machine) -> list[Finding]:
    """A lab job's findings (``cpudoctor bench``): the kernel census the run recorded, judged by the job rules as
    any job's kernels are (EVID007, EVID008); a report's saved runs go through the same rules
    (:func:`cpudoctor.advisor.kernel_rules.report_lab_findings`)."""
    from cpudoctor.model.kernels import KernelCensus

    census = KernelCensus.of_lab_run(run)
    return diagnose(JobEvidence(kernels=census), machine) if census is not None else []
