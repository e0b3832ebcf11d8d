"""May a job's time breakdown be judged? ok, thin, idle or busy, and the facts that decided it.

The probe records what the job and the other programs did with the CPUs
(:class:`~cpudoctor.model.breakdown.TimeBreakdown`); this decides what that
lets the rules say. Shares from a few samples or from a job that hardly ran say
nothing about the job: the breakdown rules stay silent and EVID009 says why.

A machine busy with other programs splits the rules in two (:func:`own_shares`,
:func:`judged`). The shares of the job's own samples (its driving thread in
Python, in data loading, in a dtype's kernels, compiling) do not depend on what
other programs do: contention slows the job's code and its kernels alike, so
those rules judge them as usual and say the load. Comparisons with an unloaded
machine (OpenMP waiting, thread counts, wall-clock rates) do depend on it: a
thread team waits at each barrier for the member another program displaced.
Those rules still speak, but as "likely — confirm on a quiet machine" with the
load measured (:func:`load_words`), never as a warning. The decision is data (a
verdict and its cause); :func:`reason` is its one sentence, EVID009's why, which
render's breakdown caption repeats (:func:`cpudoctor.render.breakdown.verdict_text`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cpudoctor.model.breakdown import TimeBreakdown

MIN_DRIVER_SAMPLES = 30          # below this the driving thread was seen too briefly to judge (10 s at 3 Hz, 6 s at 5 Hz)
IDLE_JOB_CPUS = 0.05             # the job used less than this many CPUs on average: it was idle
BUSY_OTHERS_FLOOR = 1.0          # other programs used at least this many CPUs ...
BUSY_OTHERS_SHARE = 0.5          # ... and half the machine's CPUs: the waits may be theirs
CROWDED_OTHERS = 0.25            # fewer CPUs than that, but the job and the others together filled ...
CROWDED_FILL = 0.9               # ... this share of the machine: a thread team that spans it waits for them

VERDICTS = ("ok", "thin", "idle", "busy")
CAUSES = ("", "few_samples", "idle", "others_busy", "crowded")


@dataclass(frozen=True)
class BreakdownVerdict:
    """``verdict``: ok | thin | idle | busy; ``cause``: the fact that decided it (one of :data:`CAUSES`)."""

    verdict: str = "ok"
    cause: str = ""

    @property
    def conclusive(self) -> bool:
        return self.verdict == "ok"


def judge_breakdown(bd: TimeBreakdown) -> BreakdownVerdict:
    """Whether ``bd`` may be judged, and why not."""
    # the breakdown is judged on the driving thread: too few samples of it (when stacks were sampled) say nothing
    seen = bd.driver_samples if bd.stacks_sampled else bd.samples
    if seen < MIN_DRIVER_SAMPLES:
        return BreakdownVerdict("thin", "few_samples")
    if bd.window_s > 0 and bd.job_cpus is not None and bd.job_cpus < IDLE_JOB_CPUS:
        return BreakdownVerdict("idle", "idle")
    others, online, job = bd.others_cpus, bd.online_cpus or 0, bd.job_cpus
    if others is not None and online and others >= max(BUSY_OTHERS_FLOOR, BUSY_OTHERS_SHARE * online):
        return BreakdownVerdict("busy", "others_busy")
    if others is not None and online and job is not None and others >= CROWDED_OTHERS and job + others >= CROWDED_FILL * online:
        # a healthy MLP on 2 CPUs beside another program using half a CPU showed 60 % OpenMP waiting: a team
        # member descheduled for the other program holds every barrier, so the waits are not the job's own
        return BreakdownVerdict("busy", "crowded")
    return BreakdownVerdict()


def judged(bd: TimeBreakdown | None) -> TimeBreakdown | None:
    """``bd`` when comparisons with an unloaded machine may be judged on it (waiting, thread counts), else None."""
    return bd if bd is not None and bd.seconds > 0 and judge_breakdown(bd).conclusive else None


def own_shares(bd: TimeBreakdown | None) -> TimeBreakdown | None:
    """``bd`` when the shares of the job's own samples may be judged: enough samples of a job that ran, on a quiet
    machine or a busy one (the load then stated, :func:`load_words`), else None."""
    if bd is None or bd.seconds <= 0:
        return None
    if bd.stacks_sampled and bd.driver_samples < MIN_DRIVER_SAMPLES:
        return None             # the driving thread's own shares from a handful of samples say nothing
    return bd if judge_breakdown(bd).verdict in ("ok", "busy") else None


def busy(bd: TimeBreakdown | None) -> bool:
    """Other programs took enough of the CPUs that the job's waits may be theirs."""
    return bd is not None and judge_breakdown(bd).verdict == "busy"


def load_words(bd: TimeBreakdown | None) -> str:
    """``other programs used 1.6 of the 2 CPUs meanwhile`` on a busy machine, else ""."""
    if not busy(bd) or bd.others_cpus is None:
        return ""
    return f"other programs used {bd.others_cpus:.1f} of the {bd.online_cpus} CPUs meanwhile"


def reason(bd: TimeBreakdown, verdict: BreakdownVerdict) -> str:
    """Why ``bd`` may not be judged, with its numbers ("" when it may)."""
    if verdict.conclusive:
        return ""
    if verdict.cause == "few_samples":
        if bd.stacks_sampled and bd.driver_samples < bd.samples:
            return (f"only {bd.driver_samples} samples of the thread that drives the step in {bd.window_s:g} s: too "
                    "few to say where its time goes")
        return f"only {bd.samples} samples in {bd.window_s:g} s: too few to say where the time goes"
    if verdict.cause == "idle":
        return (f"the job used {bd.job_cpus:.2f} CPUs on average over {bd.window_s:g} s: it was idle "
                "(waiting for input, between epochs, or finished its work)")
    if verdict.cause == "crowded":
        return (f"other programs used {bd.others_cpus:.1f} of the {bd.online_cpus} CPUs while the job used "
                f"{bd.job_cpus:.1f}: together they filled the machine, so its threads' waits may be theirs")
    return (f"other programs used {bd.others_cpus:.1f} of the {bd.online_cpus} CPUs on average while the job ran: "
            "its waits may be theirs")
