"""The facts of a job, whichever way it was watched: what the job rules read.

A job is watched two ways. ``cpudoctor run`` starts it and keeps a
:class:`RunObservation` (its exit, the kernels oneDNN ran, PyTorch's
recompilations, the time breakdown over its whole life, and an
:class:`~cpudoctor.model.inspection.Inspection` of its process);
``cpudoctor inspect PID`` and the Inspector sample a running process into an
Inspection. Both become one :class:`JobEvidence`, which the job pipeline
(:mod:`cpudoctor.jobrun`) hands to the process and evidence rules, so the same
job gets the same findings however it was watched. The job's own state read
from inside it (its probe, :mod:`cpudoctor.model.jobstate`) is a field of its own: only ``run``
loads the probe, so ``inspect`` leaves it ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.model.achieved import Utilisation
from cpudoctor.model.breakdown import TimeBreakdown
from cpudoctor.model.inspection import Inspection
from cpudoctor.model.jobstate import JobState
from cpudoctor.model.joblogs import MklLog, OneDnnLog, RecompileLog
from cpudoctor.model.kernels import KernelCensus
from cpudoctor.model.memory import JobMemory, TrainingMemory


# Diagnostics ``run`` switches on whose lines go on to the job's output (and are kept too): Python's fault report
# is the job's own; oneDNN's and PyTorch's log lines are held back.
PASSED_ON_DIAGNOSTICS = ("PYTHONFAULTHANDLER",)


@dataclass
class JobCrash:
    """A job that died of a signal of its own (not one CPU Doctor sent to stop it), and where, when Python said."""

    signal: str                           # "SIGILL"
    description: str = ""                 # the system's name for it: "Illegal instruction"
    via_shell: bool = False               # reported as exit code 128+n by a program in between (a shell)
    after_s: float = 0.0                  # how long the job ran
    frames: list[str] = field(default_factory=list)   # the crashing thread's Python frames, innermost first
    module: str | None = None             # the top-level module whose code ran at the crash ("numpy")
    distribution: str | None = None       # the installed distribution that holds it, and its version
    version: str | None = None


@dataclass
class RunObservation:
    """One job ``cpudoctor run`` (or the Inspector's "Run a script…") started and watched to its end."""

    command: str                          # as given, home folders as ~
    pid: int | None = None
    exit_code: int | None = None          # the job's, shell style (128 + signal when killed)
    ended_by: str = "exit"                # exit | interrupt | seconds | stopped | terminated | failed
    duration_s: float = 0.0
    breakdown: TimeBreakdown | None = None
    onednn: OneDnnLog = field(default_factory=OneDnnLog)
    mkl: MklLog = field(default_factory=MklLog)
    recompiles: RecompileLog = field(default_factory=RecompileLog)
    diagnostics: dict[str, str] = field(default_factory=dict)   # variables CPU Doctor set for the job
    launch_affinity: list[int] | None = None                     # the CPUs the job was started with
    env: dict[str, str] = field(default_factory=dict)            # the job's thread variables (allow-listed)
    process: Inspection | None = None     # its process over its life (threads, CPUs, libraries, children, memory)
    process_error: str | None = None      # why its process could not be sampled (the sampler's failure)
    error: str | None = None              # the command could not be started (the system's words)
    dropped_kernel_lines: bool = False    # the job printed more oneDNN lines than are kept: the oldest were dropped
    dropped_recompile_lines: bool = False   # the same for PyTorch's recompilation log
    stop_signal: str | None = None        # what CPU Doctor was sent when ended_by is "terminated": SIGTERM, SIGHUP
    crash: JobCrash | None = None         # it died of a signal of its own: which, and where
    achieved: Utilisation | None = None   # its kernels' FLOP/s against the measured roof (jobrun, after the job)
    state: JobState | None = None         # the job's own state, from its probe (loaded False: why not)


@dataclass
class JobEvidence:
    """Everything the job rules read about one job (``None``: not seen by this way of watching)."""

    command: str = ""
    pid: int | None = None
    breakdown: TimeBreakdown | None = None
    onednn: OneDnnLog | None = None       # run only: inspect cannot switch oneDNN's verbose output on
    mkl: MklLog | None = None             # run only: oneMKL's calls (fp32 linear layers), as oneDNN's
    recompiles: RecompileLog | None = None
    launch_affinity: list[int] | None = None   # the CPUs the job was started with (inspect: its affinity now)
    env: dict[str, str] = field(default_factory=dict)   # the job's thread variables as it started
    memory: JobMemory | None = None
    process: Inspection | None = None     # the process facts the process rules judge
    kernels: KernelCensus | None = None   # a lab job's kernel census (a run's: read from ``onednn``)
    crash: JobCrash | None = None         # run only: the job died of a signal of its own
    ended_by: str | None = None           # run only: how the watching ended (RunObservation.ended_by); None: a window
    achieved: Utilisation | None = None   # run only: its kernels' achieved FLOP/s against the measured roof
    state: JobState | None = None         # run only: what the job is set to, read from inside it (its probe)

    @classmethod
    def of_inspection(cls, insp: Inspection) -> "JobEvidence":
        """A running process sampled by ``cpudoctor inspect`` or the Inspector."""
        return cls(command=insp.cmdline or "", pid=insp.pid, breakdown=insp.time, launch_affinity=insp.affinity,
                   env=dict(insp.env), memory=_memory(insp), process=insp)

    @classmethod
    def of_run(cls, obs: RunObservation) -> "JobEvidence":
        """A job ``cpudoctor run`` started and watched to its end."""
        return cls(command=obs.command, pid=obs.pid, breakdown=obs.breakdown, onednn=obs.onednn, mkl=obs.mkl,
                   recompiles=obs.recompiles, launch_affinity=obs.launch_affinity, env=dict(obs.env),
                   achieved=obs.achieved, state=obs.state,
                   memory=_memory(obs.process, obs.exit_code, obs.state) if obs.process is not None else None,
                   process=obs.process, crash=obs.crash, ended_by=obs.ended_by)


def _memory(insp: Inspection, exit_code: int | None = None, state: JobState | None = None) -> JobMemory:
    """The job's memory as its process sampler recorded it (a bare one from the process's own figures when the
    sampler kept none: an inspection saved before the memory facts existed).

    What the job's own probe knows of its training joins here (:func:`training_of`): its parameter, gradient and
    optimizer-state bytes and its activations per sample make the memory rules' fix a batch size (EVID030)."""
    memory = insp.memory if insp.memory is not None else JobMemory(insp.rss_bytes, insp.swap_bytes,
                                                                   insp.major_faults_per_s)
    if exit_code is not None:
        memory.exit_code = exit_code
    if memory.training is None:
        memory.with_training(training_of(state))
    return memory


def training_of(state: JobState | None) -> TrainingMemory | None:
    """What the job's probe counted of its training, as ``fit`` plans with it (None: it counted nothing).

    Parameters and buffers are the counted model's (else its optimizers' parameters); gradients and optimizer
    state are each optimizer's at its first step, summed; activations per sample are the saved tensors of the
    counted forward pass over its batch, which is the batch a step holds (with gradient accumulation, the micro
    batch). Workers are the most any of its DataLoaders started."""
    if state is None or not state.loaded or (state.forward_memory is None and not state.step_memory):
        return None
    f, steps = state.forward_memory, state.step_memory
    loader_batch = next((ld.batch_size for ld in state.loaders if ld.batch_size), None)
    workers = [ld.num_workers for ld in state.loaders if ld.num_workers is not None]
    optimizer = steps[0].optimizer if steps else (state.optimizers[0] if state.optimizers else None)
    return TrainingMemory(
        source="probe",
        parameters=f.parameters if f is not None else sum(s.parameters for s in steps),
        param_bytes=f.param_bytes if f is not None else sum(s.param_bytes for s in steps),
        buffer_bytes=f.buffer_bytes if f is not None else None,
        grad_bytes=sum(s.grad_bytes for s in steps) if steps else None,
        optimizer=optimizer.lower() if optimizer else None,
        optimizer_state_bytes=sum(s.state_bytes for s in steps) if steps else None,
        activation_bytes_per_sample=f.bytes_per_sample if f is not None else None,
        activations_unknown=None if f is None or f.bytes_per_sample is not None else
        "hooks" if f.hooked else "incomplete" if not f.complete else None,
        batch_size=(f.batch if f is not None and f.batch else None) or loader_batch,
        workers=max(workers) if workers else None)
