"""Each printed fix measured on the user's own job: ``cpudoctor run --verify``'s plain data.

The job runs again, unchanged and with each fix that can be applied from outside
the script, in interleaved windows (A B C, C B A, ...): each window is a fresh run
of the job, stopped with its children at the window's end, its rate read as
:mod:`cpudoctor.lab.job_rate` says and the share of its CPUs other programs took
recorded beside it. A fix's figure is the median of its windows with their range;
its ratio is the median of the ratios to the unchanged windows of the same rounds.
:mod:`cpudoctor.verify` measures, render words it; a saved report keeps it as a
lab run of kind ``verify`` (``run --verify --into REPORT``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# FixCheck.status, best first (the order a report ranks findings in after their measured ratio)
STATUSES = ("faster", "no_effect", "inconclusive", "slower", "not_applied", "no_rate", "code_change", "not_verified")
VERIFY_KIND = "verify"          # the lab-run kind a saved report keeps a verification as


@dataclass
class Window:
    """One run of the job in the verification: one variant for one window."""

    variant: str                        # "unchanged", or the finding's code whose fix it applies
    round: int
    rate: float | None = None           # the progress rate (units of Verification.metric per second)
    units: int = 0                      # what the rate counted after the warm-up
    seconds: float = 0.0                # the window's wall time, start-up included
    other_share: float | None = None    # the share of the job's CPUs other programs took during it
    steal_share: float | None = None
    threads_seen: int | None = None     # the thread count the job's probe read in it
    cpus_seen: str | None = None        # the job's CPUs then, as its probe read them (a cpulist)
    ended: str = ""                     # seconds (stopped at the window's end) | exit | failed | stopped
    exit_code: int | None = None
    why: str = ""                       # why there is no rate


@dataclass
class Figure:
    """A median with its range over ``n`` windows (the lab's :class:`cpudoctor.lab.stats.Figure`, as data)."""

    median: float
    lo: float
    hi: float
    n: int


@dataclass
class FixCheck:
    """One finding's fix, measured against the unchanged job (or why it was not)."""

    code: str
    title: str
    status: str                         # one of STATUSES
    change: str = ""                    # outside: what was applied ("OMP_NUM_THREADS=1 MKL_NUM_THREADS=1");
    #                                     code: the exact change to the script
    line: str = ""                      # the launch line as the finding prints it
    before: Figure | None = None        # the unchanged job's rate in the same rounds
    after: Figure | None = None         # with the fix
    ratio: Figure | None = None         # after / before, round by round
    other_share: float | None = None    # median share of the CPUs other programs took in its windows (both variants)
    reason: str = ""                    # not_applied: the line that wins; others: what the numbers say
    target: str = ""                    # what the fix changes, as the probe saw it in its windows ("threads 1")
    stands_for: str = ""                # the change to the script whose thread count the variables set (measured
    #                                     from outside in its place)


@dataclass
class Verification:
    """The whole verification of one job."""

    command: str = ""
    metric: str = ""                    # steps | forwards | samples | output ("" when none could be read)
    metric_regex: str | None = None     # --metric
    budget_s: float = 0.0
    window_s: float = 0.0
    rounds: int = 0
    elapsed_s: float = 0.0
    checks: list[FixCheck] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    skipped: str = ""                   # why nothing was measured (the whole verification), "" when it ran
    writes: list[str] = field(default_factory=list)     # files the job held open for writing in its folder
    cpus: list[int] = field(default_factory=list)       # the CPUs the load figures are over
    cancelled: bool = False

    def check_for(self, code: str) -> FixCheck | None:
        return next((c for c in self.checks if c.code == code), None)

    def ranked(self) -> list[FixCheck]:
        """The checks, the measured speed-ups first (largest ratio first), then by status."""
        order = {s: i for i, s in enumerate(STATUSES)}
        return sorted(self.checks, key=lambda c: (order.get(c.status, len(order)),
                                                  -(c.ratio.median if c.ratio is not None and c.status == "faster"
                                                    else 0.0)))
