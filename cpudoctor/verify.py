"""Every printed fix measured on the user's own job: ``cpudoctor run --verify``.

After ``run`` diagnosed a job (:mod:`cpudoctor.jobrun`), each finding whose fix
can be applied from outside the script (:mod:`cpudoctor.advisor.fix_plans`:
thread variables, cleared variables, a CPU binding) is measured against the
unchanged job, the way the lab measures its own settings
(:mod:`cpudoctor.lab.sweep`): each variant runs in windows, the order reversed
every round (A B C, C B A, ...) so a burst of load elsewhere hits each alike, and
every window records the share of the job's CPUs that other programs took
(:class:`cpudoctor.lab.jobs._cpumeter.CpuMeter`). Each window is a fresh run of
the job (:class:`cpudoctor.probes.process.observe.JobRun`: its own process
group, stopped with its children at the window's end, no verbose lines), its
progress rate read by its probe or from its output (:mod:`cpudoctor.lab.job_rate`).

A fix's verdict comes from the numbers only: *faster* (or *slower*) when every
round's ratio to the unchanged job is beyond :data:`TOLERANCE`, or when the two
figures' ranges do not overlap; *no measurable effect* when every round's ratio
is within it; otherwise *inconclusive*, with the load stated when other
programs took more than :data:`QUIET_LIMIT` of the CPUs. A fix whose target the
probe sees unchanged in its windows (the thread count stays 8, the CPUs stay
all of them) *does not take effect*, and the line of the script that wins is
named. Fixes that change the script are listed with the exact change, never run.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cpudoctor.advisor.fix_plans import CODE, NONE, FixPlan, plan_fixes
from cpudoctor.kits.format import percent
from cpudoctor.lab import job_rate
from cpudoctor.lab.stats import summarize
from cpudoctor.model import Finding, Topology
from cpudoctor.model.jobstate import JobState
from cpudoctor.model.verification import STATUSES, Figure, FixCheck, Verification, Window

DEFAULT_BUDGET_S = 180.0
MIN_BUDGET_S = 20.0
TOLERANCE = 0.03          # a ratio within 3 % of 1 in every round: no measurable effect
QUIET_LIMIT = 0.25        # other programs above this share of the CPUs: an unsettled verdict says so
MIN_ROUNDS = 2
BUSY_ROUNDS = 3           # rounds a verdict needs when other programs took more than the quiet limit
TARGET_ROUNDS = 4         # planned: a window also costs the job's stop and the next one's start, and a busy
#                           machine needs 3 rounds for a verdict (BUSY_ROUNDS)
MEASURE_S = 4.0           # seconds of counted work wanted in each window after the start and the warm-up
MAX_WINDOW_S = 30.0
MAX_ROUNDS = 12
UNCHANGED = "unchanged"
MAX_OUTPUT_LINES = 2000


@dataclass(frozen=True)
class Variant:
    """The job as one window runs it: unchanged, or with one fix applied."""

    name: str                                   # UNCHANGED or the finding's code
    env: dict[str, str]
    affinity: list[int] | None = None
    plan: FixPlan | None = None


@dataclass
class WindowRun:
    """What one window's run left: the probe's state, the job's output lines (seconds after its start, text)."""

    state: JobState | None
    lines: list[tuple[float, str]] = field(default_factory=list)
    seconds: float = 0.0
    ended: str = ""
    exit_code: int | None = None
    load: dict | None = None                    # CpuMeter's interference figures for the window
    error: str = ""


RunWindow = Callable[[Variant, float], WindowRun]


@dataclass
class VerifyOptions:
    budget_s: float = DEFAULT_BUDGET_S
    metric_regex: str | None = None
    window_s: float | None = None               # None: from the budget and the job's start-up
    quiet_limit: float = QUIET_LIMIT


# --------------------------------------------------------------------------------------------- the variants


def variant_of(plan: FixPlan, base_env: dict[str, str], topology: Topology | None,
               affinity: list[int] | None) -> tuple[Variant | None, str]:
    """The job with ``plan``'s fix applied to its environment and CPUs, or (None, why it cannot be measured)."""
    env = {k: v for k, v in base_env.items() if k not in plan.unset}
    env.update(plan.env)
    cpus: list[int] | None = list(plan.cpus) if plan.cpus is not None else None
    if plan.nodes is not None:
        known = {n.id: n.cpus for n in (topology.numa_nodes if topology is not None else [])}
        if not all(known.get(n) for n in plan.nodes):
            return None, "the CPUs of its NUMA node are not known here"
        cpus = sorted({c for n in plan.nodes for c in known[n]})
    if cpus is not None and affinity is not None and not set(cpus) <= set(affinity):
        return None, "it binds the job to CPUs CPU Doctor may not use here"
    same_cpus = cpus is None or affinity is not None and sorted(cpus) == sorted(affinity)
    if env == base_env and same_cpus:
        return None, "the job already runs so: the fix changes nothing here"
    return Variant(plan.code, env, cpus, plan), ""


def window_length(budget_s: float, variants: int, startup_s: float | None) -> tuple[float, int]:
    """(seconds per window, rounds) for ``variants`` within ``budget_s``: long enough for the job's start, its
    warm-up and :data:`MEASURE_S` of counted work; :data:`TARGET_ROUNDS` rounds when the budget allows."""
    least = (startup_s or 3.0) + job_rate.WARMUP_S + MEASURE_S
    window = max(least, min(MAX_WINDOW_S, budget_s / max(1, variants * TARGET_ROUNDS)))
    rounds = max(1, int(budget_s // (window * max(1, variants))))
    return round(window, 1), rounds


# --------------------------------------------------------------------------------------------- verdicts


def _figure(values: list[float]) -> Figure | None:
    fig = summarize(values, whole_range=True)
    return Figure(round(fig.median, 4), round(fig.lo, 4), round(fig.hi, 4), fig.n) if fig is not None else None


def _median(values: list[float]) -> float | None:
    xs = sorted(v for v in values if v is not None)
    return xs[len(xs) // 2] if xs else None


def _not_applied(plan: FixPlan, windows: list[Window], states: list[JobState],
                 cpus: list[int] | None) -> tuple[str, str] | None:
    """(the target as seen, why the fix did not take effect) when the probe saw its target unchanged in most of
    its windows (the thread count it sets, the CPUs ``cpus`` it binds to); None when it took effect or nothing
    was seen."""
    from cpudoctor.advisor.code_settings import binding_settings, thread_setting
    from cpudoctor.kits.cpulist import format_cpulist, parse_cpulist

    wanted = plan.threads
    counts = [w.threads_seen for w in windows if w.threads_seen is not None]
    if wanted is not None and counts and sum(c != wanted for c in counts) * 2 > len(counts):
        seen = sorted(counts)[len(counts) // 2]
        setting = next((s for s in (thread_setting(st) for st in states) if s is not None), None)
        why = (f"{setting.short_place()} sets it ({setting.statement()})" if setting is not None
               else "something in the job sets its own count after it starts")
        return f"threads {seen}, not {wanted}", why
    seen_sets = [sorted(parse_cpulist(w.cpus_seen) or []) for w in windows if w.cpus_seen]
    if cpus and seen_sets and sum(s != sorted(cpus) for s in seen_sets) * 2 > len(seen_sets):
        setting = next((s for st in states for s in binding_settings(st)), None)
        why = (f"{setting.short_place()} binds it ({setting.statement()})" if setting is not None
               else "the job binds itself after it starts")
        return f"CPUs {format_cpulist(seen_sets[-1])}, not {format_cpulist(cpus)}", why
    return None


def judge(plan: FixPlan, base: list[Window], fixed: list[Window], states: list[JobState],
          quiet_limit: float = QUIET_LIMIT, cpus: list[int] | None = None) -> FixCheck:
    """One fix's verdict from its windows and the unchanged job's (both lists of this verification's rounds)."""
    check = FixCheck(plan.code, plan.title, "inconclusive", change=plan.launch_words(), line=plan.line,
                     stands_for=plan.change)
    loads = [w.other_share + (w.steal_share or 0.0) for w in base + fixed if w.other_share is not None]
    check.other_share = round(_median(loads), 4) if loads else None
    seen = _not_applied(plan, fixed, states, cpus)
    if seen is not None:
        check.status, check.target = "not_applied", seen[0]
        check.reason = f"the fix does not take effect: {seen[1]}"
    b_rates = [w.rate for w in base if w.rate]
    f_rates = [w.rate for w in fixed if w.rate]
    check.before, check.after = _figure(b_rates), _figure(f_rates)
    by_round = {w.round: w.rate for w in base if w.rate}
    ratios = [w.rate / by_round[w.round] for w in fixed if w.rate and by_round.get(w.round)]
    check.ratio = _figure(ratios)
    if check.status == "not_applied":
        return check
    if check.before is None or check.after is None or check.ratio is None:
        check.status = "no_rate"
        why = next((w.why for w in fixed + base if w.why and not w.rate), "")
        check.reason = "no rate was measured" + (f": {why}" if why else "")
        return check
    r = check.ratio
    # beyond the tolerance in every round, or (the median beyond it) the two figures' ranges apart
    separated_up = r.lo > 1 + TOLERANCE or r.median > 1 + TOLERANCE and check.after.lo > check.before.hi
    separated_down = r.hi < 1 - TOLERANCE or r.median < 1 - TOLERANCE and check.after.hi < check.before.lo
    busy = check.other_share is not None and check.other_share > quiet_limit
    if busy and r.n < BUSY_ROUNDS:
        # on a busy machine two rounds can agree by chance (a burst elsewhere hits one variant's windows twice)
        separated_up = separated_down = False
    if r.n >= MIN_ROUNDS and r.lo >= 1 - TOLERANCE and r.hi <= 1 + TOLERANCE:
        check.status = "no_effect"
    elif separated_up and not separated_down:
        check.status = "faster"
    elif separated_down and not separated_up:
        check.status = "slower"
    else:
        check.status = "inconclusive"
    check.reason = _reason(check, busy)
    if plan.memory:
        check.reason += (f"; its memory policy (numactl: {plan.memory}) was not applied in the measurement, only "
                         "its CPUs")
    return check


def _reason(check: FixCheck, busy: bool) -> str:
    r = check.ratio
    assert r is not None
    rounds = f"{r.n} round{'s' if r.n != 1 else ''}"
    load = (f"; other programs took {percent(check.other_share, fraction=True)} of the CPUs"
            if check.other_share is not None else "")
    # a busy machine's result holds for it as it was (more threads take a larger share of CPUs others want)
    confirm = "; measured on a busy machine: confirm on a quieter one" if busy else ""
    if check.status == "faster":
        return f"x{r.median:.2f} faster (x{r.lo:.2f}-x{r.hi:.2f} over {rounds}{load}){confirm}"
    if check.status == "slower":
        return f"x{r.median:.2f}: slower (x{r.lo:.2f}-x{r.hi:.2f} over {rounds}{load}){confirm}"
    if check.status == "no_effect":
        return (f"no measurable effect: within {percent(TOLERANCE, fraction=True)} in every round "
                f"(x{r.lo:.2f}-x{r.hi:.2f}, {rounds})")
    if r.n < MIN_ROUNDS or busy and r.n < BUSY_ROUNDS:
        why = f"; other programs took {percent(check.other_share, fraction=True)} of the CPUs" if busy else ""
        return (f"inconclusive: only {rounds} fitted in the budget (x{r.median:.2f}{why}); give a longer "
                f"--budget")
    if busy:
        return (f"inconclusive: other programs took {percent(check.other_share, fraction=True)} of the CPUs and "
                f"the rounds spread x{r.lo:.2f}-x{r.hi:.2f}; verify on a quieter machine")
    return f"inconclusive: the rounds spread x{r.lo:.2f}-x{r.hi:.2f} around 1{load}"


def _settled(checks: list[FixCheck]) -> bool:
    return all(c.status not in ("inconclusive",) for c in checks)


# --------------------------------------------------------------------------------------------- measuring


def _window_record(variant: Variant, rnd: int, run: WindowRun, metric: str, pattern: re.Pattern[str] | None) -> Window:
    state = run.state
    if metric == "output" and pattern is not None:
        warm = None
        if state is not None and state.loaded and state.progress:
            first = state.progress[0]
            warm = first.t_s + job_rate.WARMUP_S
        rate = job_rate.output_rate(run.lines, pattern, warm if warm is not None else run.seconds / 2)
    else:
        rate = job_rate.probe_rate(state, metric)
    sample = state.latest() if state is not None and state.loaded else None
    load = run.load or {}
    why = run.error or rate.why
    return Window(variant=variant.name, round=rnd, rate=round(rate.rate, 4) if rate.rate else None, units=rate.units,
                  seconds=round(run.seconds, 2), other_share=load.get("other_share"),
                  steal_share=load.get("steal_share"), threads_seen=sample.threads if sample is not None else None,
                  cpus_seen=sample.affinity if sample is not None else None, ended=run.ended, exit_code=run.exit_code,
                  why=why if not rate.rate else "")


def verify_job(argv: list[str], findings: list[Finding], state: JobState | None, *,
               options: VerifyOptions | None = None,
               env: dict[str, str] | None = None, topology: Topology | None = None, run_window: RunWindow | None = None,
               cwd: str | None = None, command: str = "", on_progress: Callable[[str], None] | None = None,
               should_stop: Callable[[], bool] | None = None, writes: list[str] | None = None,
               confirm: Callable[[list[str]], str] | None = None) -> Verification:
    """Measure each outside-applicable fix of ``findings`` on the job ``argv`` (``state``: the diagnosis run's probe
    state: its start-up time and counts choose the window and the measure). ``run_window`` replaces the real runs
    (tests). ``writes``: files the job held open for writing in its folder; when there are any and something is to
    be measured, ``confirm(writes)`` is asked first and returns "" to go on, else why not (then nothing runs)."""
    options = options or VerifyOptions()
    base_env = dict(os.environ if env is None else env)
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    ver = Verification(command=command, metric_regex=options.metric_regex, budget_s=options.budget_s,
                       writes=list(writes or []), cpus=affinity or [])
    pattern = job_rate.compile_metric(options.metric_regex) if options.metric_regex else None
    plans = plan_fixes(findings)
    variants: list[Variant] = []
    for plan in plans:
        if plan.kind == CODE:
            ver.checks.append(FixCheck(plan.code, plan.title, "code_change", change=plan.change,
                                       reason="a change to the script: not verified automatically"))
        elif plan.kind == NONE:
            ver.checks.append(FixCheck(plan.code, plan.title, "not_verified", change=plan.change, line=plan.line,
                                       reason=plan.reason))
        else:
            variant, why = variant_of(plan, base_env, topology, affinity)
            if variant is None:
                ver.checks.append(FixCheck(plan.code, plan.title, "not_verified", change=plan.launch_words(),
                                           line=plan.line, reason=why))
            else:
                variants.append(variant)
    metric = job_rate.choose_metric(state, options.metric_regex)
    ver.metric = metric or ""
    if not variants:
        ver.skipped = ("no fix helps: the diagnosis found nothing to fix, so the job was not run again"
                       if not ver.checks else "none of the printed fixes can be applied from outside the script")
        return _finish(ver)
    if metric is None:
        ver.skipped = ("no progress rate: the job's probe counted no optimizer steps, forward calls or DataLoader "
                       "batches; give --metric REGEX for a rate the job prints (e.g. --metric '([0-9.]+)it/s')")
        for v in variants:
            ver.checks.append(FixCheck(v.name, v.plan.title if v.plan else v.name, "not_verified",
                                       change=v.plan.launch_words() if v.plan else "",
                                       line=v.plan.line if v.plan else "",
                                       reason="no progress rate to measure it by"))
        return _finish(ver)
    if writes and confirm is not None:
        refused = confirm(list(writes))
        if refused:
            ver.skipped = refused
            for v in variants:
                assert v.plan is not None
                ver.checks.append(FixCheck(v.name, v.plan.title, "not_verified", change=v.plan.launch_words(),
                                           line=v.plan.line, reason="the job writes files: not run again"))
            return _finish(ver)
    startup = _startup_s(state)
    all_variants = [Variant(UNCHANGED, base_env, None)] + variants
    window, rounds = window_length(options.budget_s, len(all_variants), startup)
    if options.window_s:
        window = options.window_s
        rounds = max(1, int(options.budget_s // (window * len(all_variants))))
    while rounds < MIN_ROUNDS and len(all_variants) > 2:          # fewer fixes, each measured at least twice
        dropped = all_variants.pop()
        assert dropped.plan is not None
        ver.checks.append(FixCheck(dropped.name, dropped.plan.title, "not_verified",
                                   change=dropped.plan.launch_words(), line=dropped.plan.line,
                                   reason=f"the budget ({options.budget_s:g} s) ran out before it: give a longer "
                                          "--budget"))
        rounds = max(1, int(options.budget_s // (window * len(all_variants))))
    ver.window_s, ver.rounds = window, 0
    run_window = run_window or real_window(argv, cwd)
    states: dict[str, list[JobState]] = {}
    started = time.monotonic()
    spent = 0.0                                     # the windows' own time (a job that ends early frees the rest)
    for rnd in range(MAX_ROUNDS):
        # another round while the budget holds one more round as long as the average so far
        if rnd and spent + max(spent / rnd, 0.0) > options.budget_s:
            break
        order = all_variants if rnd % 2 == 0 else list(reversed(all_variants))
        for variant in order:
            if should_stop is not None and should_stop():
                ver.cancelled = True
                break
            if on_progress is not None:
                what = "the unchanged job" if variant.name == UNCHANGED else f"{variant.name}'s fix"
                on_progress(f"round {rnd + 1} (of {rounds} planned): {what}, {window:g} s")
            run = run_window(variant, window)
            spent += max(run.seconds, 0.1)
            ver.windows.append(_window_record(variant, rnd, run, metric, pattern))
            if run.state is not None:
                states.setdefault(variant.name, []).append(run.state)
        if ver.cancelled:
            break
        ver.rounds = rnd + 1
        if ver.rounds >= MIN_ROUNDS and _settled(_judge_all(ver, all_variants, states, options)):
            break
    ver.elapsed_s = round(time.monotonic() - started, 1)
    ver.checks = _judge_all(ver, all_variants, states, options) + ver.checks
    return _finish(ver)


def _judge_all(ver: Verification, variants: list[Variant], states: dict[str, list[JobState]],
               options: VerifyOptions) -> list[FixCheck]:
    base = [w for w in ver.windows if w.variant == UNCHANGED]
    return [judge(v.plan, base, [w for w in ver.windows if w.variant == v.name], states.get(v.name, []),
                  options.quiet_limit, v.affinity) for v in variants if v.plan is not None]


def _finish(ver: Verification) -> Verification:
    order = {s: i for i, s in enumerate(STATUSES)}
    ver.checks.sort(key=lambda c: order.get(c.status, len(order)))
    return ver


def _startup_s(state: JobState | None) -> float | None:
    """Seconds from the job's start to its first unit of work, from the diagnosis run's probe."""
    if state is None or not state.loaded:
        return None
    if state.first_step_s is not None:
        return state.first_step_s
    first = next((p.t_s for p in state.progress), None)
    return first if first is not None and math.isfinite(first) else state.torch_at_s


# --------------------------------------------------------------------------------------------- real windows


class _Lines:
    """A sink for a window's output: its lines with the seconds after the window started (bounded)."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.lines: list[tuple[float, str]] = []
        self._part = b""
        self._lock = threading.Lock()

    def write(self, data: bytes) -> int:
        with self._lock:
            self._part += data.replace(b"\r", b"\n")       # a progress bar's updates are lines of their own
            *done, self._part = self._part.split(b"\n")
            now = time.monotonic() - self.t0
            for raw in done:
                if len(self.lines) >= MAX_OUTPUT_LINES:
                    del self.lines[: MAX_OUTPUT_LINES // 2]
                self.lines.append((now, raw[-2000:].decode("utf-8", "replace")))
            if len(self._part) > 64_000:
                self._part = self._part[-2000:]
        return len(data)

    def flush(self) -> None:
        pass


def real_window(argv: list[str], cwd: str | None = None, stopper: "Stopper | None" = None,
                probe: bool = True) -> RunWindow:
    """Each window a fresh run of ``argv`` (:class:`JobRun`: its own process group, stopped with its children at
    the window's end, the probe loaded, no verbose lines), its output kept out of the terminal."""
    def run(variant: Variant, seconds: float) -> WindowRun:
        from cpudoctor.lab.jobs._cpumeter import CpuMeter
        from cpudoctor.probes.process.observe import JobRun

        t0 = time.monotonic()
        sink = _Lines(t0)
        cpus = variant.affinity if variant.affinity is not None else (
            sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [])
        meter = CpuMeter(cpus)
        before = meter.start()
        job = JobRun(argv, seconds=seconds, cwd=cwd, env=variant.env, stdout=sink, stderr=sink, sample=False,
                     probe=probe, diagnostics=False, affinity=variant.affinity)
        if stopper is not None:
            stopper.job = job
        if not job.start():
            return WindowRun(None, seconds=time.monotonic() - t0, ended="failed", error=job.obs.error or "")
        if stopper is not None and stopper():
            job.stop()
        obs = job.wait()
        if stopper is not None:
            stopper.job = None
        load = meter.since(before)
        sink.write(b"\n")
        error = ""
        if obs.ended_by == "exit" and obs.exit_code not in (0, None):
            tail = next((t for _s, t in reversed(sink.lines) if t.strip()), "")
            error = f"the job exited with code {obs.exit_code}" + (f": {tail.strip()[:200]}" if tail else "")
        return WindowRun(obs.state, sink.lines, seconds=obs.duration_s, ended=obs.ended_by, exit_code=obs.exit_code,
                         load=load, error=error)

    return run


class Stopper:
    """Stops a verification from another thread or a signal handler: no new window starts, the running one is
    stopped with its children (:meth:`JobRun.stop`)."""

    def __init__(self):
        self.event = threading.Event()
        self.job = None

    def __call__(self) -> bool:
        return self.event.is_set()

    def stop(self) -> None:
        self.event.set()
        job = self.job
        if job is not None:
            job.stop()


def rank_findings(findings: list[Finding], ver: Verification | None) -> list[Finding]:
    """The findings ranked by the measured effect of their fixes: measured speed-ups first (largest first), then
    those not measured (in their order), then fixes measured to do nothing, to slow the job, or not to take effect."""
    if ver is None:
        return list(findings)
    checks = {c.code: c for c in ver.checks}

    def key(item: tuple[int, Finding]) -> tuple:
        n, f = item
        c = checks.get(f.code)
        if c is not None and c.status == "faster" and c.ratio is not None:
            return (0, -c.ratio.median, n)
        if c is not None and c.status in ("no_effect", "slower", "not_applied"):
            return (2, n)
        return (1, n)

    return [f for _n, f in sorted(enumerate(findings), key=key)]


def bench_run(ver: Verification):
    """The verification as a saved report's lab run (kind ``verify``): the whole table under ``verification``, and
    each measured fix's ratio as a headline figure (``EVID001 speed-up``) that ``compare`` sets side by side."""
    from cpudoctor.model import BenchRun
    from cpudoctor.model.report import utc_now_iso
    from cpudoctor.model.serde import to_data
    from cpudoctor.model.verification import VERIFY_KIND

    metrics: dict = {"verification": to_data(ver)}
    for c in ver.checks:
        if c.ratio is not None and c.status in ("faster", "slower", "no_effect", "inconclusive"):
            metrics[f"{c.code} speed-up"] = c.ratio.median
    settings = {"command": ver.command, "budget_s": ver.budget_s, "metric": ver.metric}
    return BenchRun(kind=VERIFY_KIND, settings=settings, metrics=metrics,
                    status="cancelled" if ver.cancelled else "ok", started_at=utc_now_iso(),
                    note=f"run --verify: {len(ver.windows)} windows")
