"""Rules that judge what a job did, not how it was set up: findings from measured evidence.

Input is an :class:`Evidence`: the job's facts (:class:`~cpudoctor.model.evidence.JobEvidence`:
the time breakdown from sampled stacks and thread states, and for a job started
by ``cpudoctor run`` also the kernels oneDNN ran, PyTorch's recompilations, and
the CPUs the job was started with) and the CPU's flags, which the job pipeline
(:mod:`cpudoctor.jobrun`) takes from the report's own source: no rule reads the
machine. Output is :class:`~cpudoctor.report.Finding` objects with stable
codes ``EVID001``..., registered in :data:`EVIDENCE_RULES` (a
:class:`~cpudoctor.advisor.engine.RuleSet` like the process rules: same
decorator, docstring sections, ``cpudoctor explain``, generated docs in
docs/evidence_rules.md). Every ``why`` quotes this run's numbers.

The kernels a job ran (EVID007 below the CPU, EVID008 a dtype without its
instructions) are judged in :mod:`cpudoctor.advisor.kernel_rules`, for a lab
job's census too; :attr:`EVIDENCE_RULES` loads them on first use.

Rules that read the breakdown say nothing when it may not be judged (too few
samples, an idle job: :mod:`cpudoctor.advisor.job_verdict`): EVID009 says
"inconclusive" instead, with the reason. On a machine busy with other programs
the shares of the job's own samples are judged as usual, with the load stated,
while OpenMP waiting (a comparison with an unloaded machine) is reported as
"likely", for the user to confirm on a quiet machine. The breakdown is judged on
the thread that drives the step: the pool's OpenMP waiting while that thread is
busy elsewhere is its consequence, not the cause (EVID019 names what the driving
thread did). The job's own state read by its probe (``run``) is judged in
:mod:`cpudoctor.advisor.state_rules` (EVID010-EVID018), loaded like the kernel rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from cpudoctor.advisor import floors
from cpudoctor.advisor.engine import RuleSet
from cpudoctor.advisor.code_settings import (binding_removal, binding_settings, seen_threads, thread_change,
                                             thread_setting, setting_of)
from cpudoctor.advisor.job_split import cpus_text
from cpudoctor.advisor.job_verdict import busy, judge_breakdown, judged, load_words, own_shares, reason
from cpudoctor.advisor.pinning import env_unset
from cpudoctor.advisor.serving import batch_one_threads, compiles_per_request
from cpudoctor.advisor.snippets import WORKER_POOL_WORDS, worker_init_snippet, worker_pools
from cpudoctor.advisor.thread_vars import thread_count_env, with_thread_count
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.plural import plural
from cpudoctor.model import Finding
from cpudoctor.kits.format import percent
from cpudoctor.model.breakdown import COMPILE, COMPUTE, DATA, OPENMP, PYTHON, ProcessTime, TimeBreakdown
from cpudoctor.model.evidence import JobEvidence
from cpudoctor.model.kernels import KernelCensus

# Thresholds (docs/time_breakdown.md explains each; tests/test_evidence_rules.py holds them to their meaning).
OPENMP_DOMINATES = 0.30       # OpenMP waiting is at least this share of the job's time ...
PYTHON_DOMINATES = 0.40       # Python code is at least this share, and more than the kernels
DATA_WAIT = 0.30              # the driving thread spent this share inside DataLoader's next batch
RECOMPILES = 3                # recompilations of one function that make "keeps compiling"
COMPILE_SHARE = 0.30          # ... or this share of the time compiling with at least 2 recompiles
OVERSUBSCRIBED_SHARE = 0.3    # samples with more runnable threads than CPUs (a child running 2+) while children ran
DRIVER_IN_TEAM = 0.5          # the driving thread spent at least this share in kernels and OpenMP: it drives the team

EVIDENCE_RULES: RuleSet[Evidence] = RuleSet(
    "evidence rule", prefix="EVID", docs_page="docs/evidence_rules.md", group_by_category=False,
    scope=("Judges what a job did: `cpudoctor run -- COMMAND`, `cpudoctor inspect PID` and the Inspector page "
           "(EVID007, EVID008: the lab's jobs too, in `bench` and a report's runs)."),
    crash_hint="the output of `cpudoctor run --format json -o run.json -- COMMAND`",
    # EVID007, EVID008: the kernels a job ran (also a lab job's); EVID010-EVID019: the job's own state;
    # EVID020-022: its kernels against the roof; EVID025-027: a serving loop's requests; EVID030-035: its memory
    load=("cpudoctor.advisor.kernel_rules", "cpudoctor.advisor.state_rules", "cpudoctor.advisor.roof_rules",
          "cpudoctor.advisor.memory_rules", "cpudoctor.advisor.serving_rules"),
)
evidence_rule = EVIDENCE_RULES.rule

BINDING_VARS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


@dataclass
class Evidence(JobEvidence):
    """What the evidence rules read: the job's facts and the CPU's flags (the report's, never read here)."""

    cpu_flags: set[str] = field(default_factory=set)


    @classmethod
    def of(cls, job: JobEvidence, cpu_flags: set[str]) -> "Evidence":
        return cls(**{f.name: getattr(job, f.name) for f in fields(job)}, cpu_flags=set(cpu_flags))

    def kernel_census(self) -> KernelCensus | None:
        """The kernels the job ran and what could have capped them (:mod:`cpudoctor.advisor.kernel_rules`): a lab
        job's census, or a run's oneDNN lines read as one."""
        if self.kernels is not None:
            return self.kernels
        if self.onednn is None or not self.onednn.primitives:
            return None
        from cpudoctor.probes.kernels import run_census

        return run_census(self.onednn, self.env)

    @property
    def bd(self) -> TimeBreakdown | None:
        return self.breakdown

    def judged(self) -> TimeBreakdown | None:
        """The breakdown when comparisons with an unloaded machine may be judged on it, else None."""
        return judged(self.breakdown)

    def own_shares(self) -> TimeBreakdown | None:
        """The breakdown when the shares of the job's own samples may be judged (a busy machine too), else None."""
        return own_shares(self.breakdown)

    def usable_cpus(self) -> int | None:
        """The CPUs the job may use: its process's (affinity and quota), else the CPUs it was started with."""
        if self.process is not None and self.process.usable_cpus:
            return self.process.usable_cpus
        if self.launch_affinity:
            return len(self.launch_affinity)
        if self.state is not None and self.state.affinity_start:
            return len(self.state.affinity_start)
        return None

    def load_note(self) -> str:
        """`` (other programs used 1.6 of the 2 CPUs meanwhile)`` or "" on a quiet machine."""
        words = load_words(self.breakdown)
        return f" ({words})" if words else ""

    def load_sentence(self) -> str:
        """`` Other programs used 1.6 of the 2 CPUs meanwhile; ...`` or "" on a quiet machine."""
        words = load_words(self.breakdown)
        return (f" {words[:1].upper()}{words[1:]}; the share is of the driving thread's own time outside OpenMP "
                "waiting (which their load makes longer)." if words else "")

    def cmd(self) -> str:
        cmd = (self.command or "").strip()
        return cmd if cmd and len(cmd) <= 200 and "\n" not in cmd else "python train.py"


def _finding(severity: str, title: str, why: str, fix: str, snippet: str = "", evidence: dict[str, Any] | None = None,
             lang: str = "bash") -> Finding:
    ev = {k: v for k, v in (evidence or {}).items() if v is not None}
    return Finding(code="", symbol="", category="", severity=severity, title=title, why=why, fix=fix,
                   snippet=snippet, snippet_lang=lang, evidence=ev, fields_used=sorted(ev))


def _counted(bd: TimeBreakdown) -> str:
    return f"{bd.samples} samples over {bd.window_s:g} s"


def own_share(bd: TimeBreakdown, category: str) -> float:
    """``category``'s share of the driving thread's time; on a busy machine, of its time outside OpenMP waiting,
    which grows with the other programs' load (a team member they displace holds each barrier) while the thread's
    own work does not."""
    share = bd.driver_share(category)
    if not busy(bd) or category == OPENMP:
        return share
    working = 1.0 - bd.driver_share(OPENMP)
    return min(1.0, share / working) if working > 0.05 else share


def consequence(bd: TimeBreakdown) -> str:
    """`` The pool threads' OpenMP waiting (48 % of the job's thread time) follows from it: ...`` when there is any."""
    omp = bd.share(OPENMP)
    if omp < OPENMP_DOMINATES or drives_team(bd):
        return ""
    return (f" The other threads' OpenMP waiting ({percent(omp, fraction=True)} of the job's thread time) follows from it: the pool "
            "waits while the thread that drives the step is busy elsewhere, so fewer threads would not help.")


def _place(at) -> str:
    user = at.user_place()
    file, line = user if user else (at.file, at.line)
    return f"line {line} of {file}"


# --- the rules --------------------------------------------------------------------------------


@evidence_rule("EVID001", "openmp-wait-dominates", category="threads", severity="warning",
               title="The job's threads mostly wait for each other in OpenMP")
def openmp_wait_dominates(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The share of the job's sampled thread time spent inside the OpenMP runtime (forking and
        joining thread teams, barriers, spinning, yielding) against the share in compute kernels.

    Why it matters:
        Every parallel region costs a fork and a join. With a small model each kernel is so short
        that the threads spend more time handing work around and waiting at barriers than computing,
        and more threads make it slower, not faster.

    Fix:
        Use fewer threads (OMP_NUM_THREADS, or torch.set_num_threads at the top of the script), down
        to 1 for very small models; measure steps per second before and after.
    """
    bd = ev.own_shares()
    if bd is None:
        return []
    omp, comp = bd.share(OPENMP), bd.share(COMPUTE)
    if omp < OPENMP_DOMINATES or omp < comp or not drives_team(bd):
        return []
    setting, usable = thread_setting(ev.state), ev.usable_cpus()
    if setting is not None and usable is not None and (seen_threads(ev.state) or 0) > usable:
        return []           # the script sets more threads than CPUs: EVID013 names that line first
    if batch_one_threads(ev.state, usable) is not None:
        return []           # an inference loop at batch 1 on every CPU: EVID025 says it with the job's latency
    threads = _compute_threads(bd, ev)
    target = 1 if omp >= 2 * comp or threads <= 2 else max(1, threads // 2)
    why = (f"{percent(omp, fraction=True)} of the job's thread time was OpenMP waiting (barriers, spinning, team fork/join) and "
           f"only {percent(comp, fraction=True)} compute kernels ({_counted(bd)}, {plural(threads, 'compute thread')}), while the "
           f"thread that drives the step spent {percent(bd.driver_share(OPENMP) + bd.driver_share(COMPUTE), fraction=True)} of its "
           "time in the team's kernels and barriers. The kernels are too short for this many threads to pay off.")
    if setting is not None:
        # the script's own call wins over any variable set outside: the fix is its line
        fix, snippet = thread_change(setting, target)
        fix += " Then compare steps per second."
        lang = "python"
    else:
        main = bd.process(bd.pid)
        job_env = {**ev.env, **(main.thread_vars if main else {})}
        assign, unset = thread_count_env(target, job_env)
        fix = (f"Run it with {plural(target, 'thread')}: {' '.join(f'{k}={v}' for k, v in assign.items())}"
               + (f" with {', '.join(unset)} unset" if unset else "")
               + f" (every pool's count, whatever the shell exports; or torch.set_num_threads({target}) first thing in "
               "the script), and compare steps per second.")
        snippet, lang = with_thread_count(target, job_env, ev.cmd()), "bash"
    title = f"OpenMP waiting takes {percent(omp, fraction=True)} of the time, kernels {percent(comp, fraction=True)}"
    severity = "warning"
    if busy(bd):
        # waiting depends on what other programs did: a team member they displaced holds every barrier
        severity, title = "info", f"Likely: {title} (confirm on a quiet machine)"
        why += (f" But {load_words(bd)}: a thread they displaced holds every barrier too, so part of the waiting may "
                "be theirs.")
        fix += " Confirm on a quiet machine first."
    return [_finding(severity, title, why, fix, snippet,
                     {"openmp_wait_share": round(omp, 3), "compute_share": round(comp, 3), "threads": threads,
                      "samples": bd.samples, "suggested_threads": target, "others_cpus": bd.others_cpus if busy(bd)
                      else None, "set_at": setting.short_place() if setting else None}, lang=lang)]


def drives_team(bd: TimeBreakdown) -> bool:
    """The thread that drives the step spent most of its time in the thread team's kernels and barriers (so the
    team's waiting is about the team); unknown (no driving thread sampled) counts as yes."""
    driver = bd.driver_thread()
    if driver is None:
        return True
    return bd.driver_share(OPENMP) + bd.driver_share(COMPUTE) >= DRIVER_IN_TEAM


def _compute_threads(bd: TimeBreakdown, ev: Evidence) -> int:
    main = bd.process(bd.pid) or (bd.processes[0] if bd.processes else None)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = (main.thread_vars.get(name) if main else None) or ev.env.get(name)
        if value and value.strip().isdigit():
            return int(value)
    if main is None:
        return 1
    busy = [t for t in main.threads if t.role in ("driver", "native") and t.seconds >= 0.1 * bd.window_s]
    return max(1, len(busy))


@evidence_rule("EVID002", "waits-on-data", category="threads", severity="warning",
               title="The training loop waits for its data")
def waits_on_data(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The share of the driving thread's time (the main thread of the training process) spent
        inside DataLoader's next batch, waiting for workers or loading the batch itself, and how
        busy the DataLoader's worker processes were.

    Why it matters:
        While the loop waits for a batch, the model does not train: the compute threads sit idle.
        A loader with no workers loads every batch on the training thread; too few workers, or
        workers restarted every epoch, leave gaps between steps.

    Fix:
        Give the DataLoader workers (num_workers), keep them between epochs (persistent_workers=True)
        and let them work ahead (prefetch_factor); move slow per-sample work (decoding, augmentation)
        into the dataset so the workers do it.
    """
    bd = ev.own_shares()
    if bd is None:
        return []
    driver = bd.driver_thread()
    if driver is None:
        return []
    share = own_share(bd, DATA)
    if share < DATA_WAIT:
        return []
    workers = [p for p in bd.processes if p.role == "dataloader_worker"]
    if workers and busy(bd):
        return []       # waiting for workers that other programs may have slowed: a comparison, not a share
    if workers:
        used = sum((p.cpu_percent or 0.0) for p in workers) / 100
        state = (f"its {plural(len(workers), 'worker process', 'worker processes')} used {used:.1f} CPUs together")
        n = len(workers)
        usable = ev.usable_cpus()
        if usable is not None and n >= usable:
            # no CPU is free for another worker: more of them would only take turns (EVID015)
            fix = (f"The workers do not keep up and every CPU already has one ({n} workers on "
                   f"{plural(usable, 'usable CPU')}): make each sample cheaper (pre-process once and cache, lighter "
                   "transforms, a faster data format), or give the job more CPUs.")
            snippet = ""
        else:
            fix = (f"The workers do not keep up: give more workers than {n} where CPUs are free, make "
                   "each sample cheaper, and keep them alive (persistent_workers=True) with prefetch_factor=4.")
            snippet = (f"loader = DataLoader(dataset, batch_size=..., num_workers={n * 2}, persistent_workers=True,\n"
                       "                    prefetch_factor=4)")
    else:
        state = "it has no worker processes: the training thread loads every batch itself"
        cpus = len(ev.launch_affinity or []) or (bd.online_cpus or 2)
        n = max(2, min(8, cpus))
        fix = (f"Load in worker processes: num_workers={n}, persistent_workers=True, prefetch_factor=4 "
               "(samples that wait on disk or network overlap with training even on few CPUs).")
        snippet = (f"loader = DataLoader(dataset, batch_size=..., num_workers={n}, persistent_workers=True,\n"
                   "                    prefetch_factor=4)")
    loader = next((x for x in (ev.state.loaders if ev.state else []) if x.at is not None), None)
    where = f" (the DataLoader built at {_place(loader.at)})" if loader is not None else ""
    why = (f"The training loop spent {percent(share, fraction=True)} of its time ({driver.samples} samples of the main thread over "
           f"{bd.window_s:g} s) inside DataLoader's next batch{where}; {state}.{consequence(bd)}"
           f"{ev.load_sentence()}")
    return [_finding("warning", f"The loop waits for data {percent(share, fraction=True)} of the time", why, fix, snippet,
                     {"data_wait_share": round(share, 3), "driver_samples": driver.samples,
                      "workers": len(workers)}, lang="python")]


@evidence_rule("EVID003", "keeps-compiling", category="torch", severity="warning",
               title="torch.compile keeps recompiling")
def keeps_compiling(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        PyTorch's recompilation log (TORCH_LOGS=recompiles, switched on by `cpudoctor run`): how
        often each compiled function was compiled again and which guard failed, and the share of
        the time spent compiling.

    Why it matters:
        A compiled function is specialised to the shapes it first saw. Each new size (a last
        smaller batch, variable sequence lengths) fails a guard and compiles again, which takes
        seconds; after the recompile limit Dynamo gives up and runs the function uncompiled.

    Fix:
        Tell the compiler which sizes change: torch.compile(model, dynamic=True), or
        torch._dynamo.mark_dynamic(x, dim) on the input before the call; or pad inputs to a few
        bucket sizes (and drop_last=True for the last batch).
    """
    rec = ev.recompiles
    bd = ev.breakdown
    if rec is None or not rec.recompiles or compiles_per_request(ev.state, rec):
        return []           # compiled again per request (not a size that changed): EVID027 names the line
    worst_fn, worst = max(rec.by_function().items(), key=lambda kv: len(kv[1]))
    compile_share = bd.share(COMPILE) if bd is not None and bd.seconds > 0 else 0.0
    if len(worst) < RECOMPILES and not (len(rec.recompiles) >= 2 and compile_share >= COMPILE_SHARE):
        return []
    changes = rec.size_changes()
    if changes:
        (tensor, dim), sizes = max(changes.items(), key=lambda kv: len(kv[1]))
        cause = f"the size of dim {dim} of {tensor} changed ({', '.join(map(str, sizes[:8]))}{'…' if len(sizes) > 8 else ''})"
        snippet = (f"torch._dynamo.mark_dynamic(x, {dim})   # x: the input whose dim {dim} varies, before the call\n"
                   "# or: model = torch.compile(model, dynamic=True)")
    else:
        cause = f"the newest guard failure: {worst[-1].guard_failure or 'not given'}"
        snippet = "model = torch.compile(model, dynamic=True)"
    why = (f"{worst_fn.split(' (')[0]} was compiled again {len(worst)} times in {bd.window_s if bd else 0:g} s "
           f"({len(rec.recompiles)} recompilations in all): {cause}."
           + (f" Compiling took {percent(compile_share, fraction=True)} of the job's time." if compile_share else "")
           + (" Dynamo hit its recompile limit and fell back to running uncompiled." if rec.limit_hit else ""))
    fix = ("Mark the changing dimension dynamic (torch._dynamo.mark_dynamic(x, dim)) or compile with "
           "dynamic=True; or pad inputs to a few fixed sizes (and drop_last=True in the DataLoader).")
    return [_finding("warning", f"Recompiled {len(worst)} times: {cause.split(' (')[0]}", why, fix, snippet,
                     {"recompiles": len(rec.recompiles), "worst_function_recompiles": len(worst),
                      "compile_share": round(compile_share, 3), "limit_hit": rec.limit_hit}, lang="python")]


def _children(bd: TimeBreakdown) -> list[ProcessTime]:
    return [p for p in bd.processes if p.pid != bd.pid and p.python and p.role != "compiler"]


@evidence_rule("EVID004", "children-confined", category="topology", severity="warning",
               title="The job's child processes may use fewer CPUs than the job")
def children_confined(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The CPU affinity of every process the job started (DataLoader workers, multiprocessing
        pools) against the CPUs the job itself was started with, and whether the job's main
        process kept them all.

    Why it matters:
        A child inherits its parent's affinity at fork. When OpenMP binding variables
        (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY) pin the main thread to one CPU
        at `import torch`, or the script pins itself before starting workers, every worker is
        squeezed onto that CPU and they take turns instead of running side by side. When the main
        process kept every CPU, the narrower set was applied inside the child (a library or the
        worker's own code calling sched_setaffinity there).

    Fix:
        Choose the CPU set with taskset or numactl outside the job and unset the binding variables
        that are set; or give each worker all CPUs back in worker_init_fn (os.sched_setaffinity).
    """
    bd = ev.breakdown
    if bd is None:
        return []
    main = bd.process(bd.pid)
    job_cpus = sorted(ev.launch_affinity or (main.affinity if main and main.affinity else []) or [])
    if len(job_cpus) < 2:
        return []
    confined = [p for p in _children(bd) if p.affinity is not None and len(p.affinity) < len(job_cpus)]
    if not confined:
        return []
    masks = sorted({tuple(sorted(p.affinity or [])) for p in confined})
    where = " / ".join(cpus_text(list(m)) for m in masks)
    binding = {k: v for k, v in {**ev.env, **(main.thread_vars if main else {})}.items() if k in BINDING_VARS}
    in_code = binding_settings(ev.state)       # the script binds itself (its probe saw the lines)
    parent_keeps = main is not None and main.affinity is not None and set(job_cpus) <= set(main.affinity)
    setter = mask_setter(ev, confined)
    if in_code:             # the probe saw the lines: direct evidence, whatever the main process's mask shows now
        cause = (f"the script binds itself ({'; '.join(b.where_words() for b in in_code)}): the main thread was "
                 "pinned and the children inherited it")
    elif parent_keeps:
        cause = (f"the main process (PID {bd.pid}) kept all {len(job_cpus)}, so the narrower set was applied in the "
                 "child itself (a library or the worker's own code calling sched_setaffinity there); "
                 + (f"it was set by {setter}" if setter else "what set it could not be seen"))
    elif binding:
        cause = (f"the binding variable{'s' if len(binding) > 1 else ''} "
                 f"{', '.join(f'{k}={v}' for k, v in binding.items())} pinned the main thread at start-up and the "
                 "children inherited it")
    else:
        parent = cpus_text(sorted(main.affinity)) if main is not None and main.affinity else "a narrower set"
        cause = (f"they inherited {parent} from the main process (PID {bd.pid}), which was narrowed after it "
                 "started, not by a binding variable; "
                 + (f"it was set by {setter}" if setter else "what narrowed it could not be seen"))
    children = plural(len(confined), "child process", "child processes")
    why = (f"{children} (PIDs {', '.join(str(p.pid) for p in confined[:6])}) may run only on {where} of the "
           f"{len(job_cpus)} CPUs the job was started with ({format_cpulist(job_cpus)}): {cause}.")
    give_back = (f"DataLoader(..., worker_init_fn=lambda _: os.sched_setaffinity(0, "
                 f"{{{', '.join(map(str, job_cpus[:16]))}}}))")
    if in_code:
        # `env -u` outside cannot undo a binding the script makes itself: the fix is the script's lines
        fix, code = binding_removal(in_code)
        snippet, lang = f"{code}\n# or give each worker every CPU back: {give_back}", "python"
    elif binding and not parent_keeps:
        fix = ("Unset the OpenMP binding variables that are set and choose the CPUs outside the job (taskset -c / "
               "numactl); or give each worker every CPU back in worker_init_fn.")
        snippet = (f"{env_unset(binding)} taskset -c {format_cpulist(job_cpus)} {ev.cmd()}\n"
                   f"# or in the script: {give_back}")
        lang = "bash"
    else:
        # the CPU set was narrowed inside the job: a taskset outside it would be narrowed again
        fix = ("Find the call that narrows the CPU set inside the job and remove it, or give each worker every CPU "
               "back as it starts: worker_init_fn in a DataLoader (below), initializer in a multiprocessing Pool.")
        snippet, lang = give_back, "python"
    return [_finding("warning", f"{children} confined to {where} while the job has {cpus_text(job_cpus)}", why, fix,
                     snippet,
                     {"confined": len(confined), "job_cpus": len(job_cpus),
                      "child_cpus": [format_cpulist(m) for m in masks], "main_cpus": format_cpulist(main.affinity)
                      if main is not None and main.affinity else None, "binding": binding or None,
                      "set_by": setter, "set_at": [b.short_place() for b in in_code] or None}, lang=lang)]


def mask_setter(ev: Evidence, confined: list[ProcessTime]) -> str | None:
    """What narrowed the children's CPU set, in words ("os.sched_setaffinity(4242, {0}) at line 41 of train.py"),
    when the job's probe saw the call; None when it did not.

    The process facts (/proc, stacks) show a mask, never the call that set it: only the probe inside the job
    records ``os.sched_setaffinity`` calls with their lines (:class:`~cpudoctor.model.jobstate.JobState`). A call
    on a confined child's PID names it; else the last call that narrowed the main process itself.
    """
    state = ev.state
    if state is None:
        return None
    calls = state.calls_to("os.sched_setaffinity")
    pids = {str(p.pid) for p in confined}
    chosen = ([c for c in calls if c.key in pids]
              or [c for c in calls if c.key in ("0", str(state.pid))])
    setting = setting_of(chosen[-1]) if chosen else None
    return setting.where_words() if setting else None


@evidence_rule("EVID005", "children-oversubscribe", category="threads", severity="warning",
               title="The job's processes together run more threads than it has CPUs")
def children_oversubscribe(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The runnable threads (running or waiting for a CPU, from /proc) of all the job's processes
        at each sample, against the CPUs the job may use: how often there were more than CPUs while
        a child process ran two or more threads at once.

    Why it matters:
        Each process sizes its thread pools for the whole machine: three pool processes with a
        pool each ask for three times the CPUs there are. The kernel time-slices them, OpenMP threads
        spin while the thread they wait for is descheduled, and everything runs slower than with
        one thread per process. Runnable threads are the job's own demand: another program's load
        does not add to them.

    Fix:
        Give each child one thread (OMP_NUM_THREADS=1 in its environment, or torch.set_num_threads(1)
        at its start), or start fewer processes.
    """
    bd = ev.breakdown
    if bd is None or judge_breakdown(bd).verdict in ("thin", "idle") or not bd.oversubscribed_share or not bd.cpus:
        return []
    if bd.oversubscribed_share < OVERSUBSCRIBED_SHARE:
        return []
    children = [p for p in _children(bd) if (p.max_threads or 0) >= 2]
    why = (f"In {percent(bd.oversubscribed_share, fraction=True)} of the samples while its child processes ran, the job had more runnable "
           f"threads than its {plural(bd.cpus, 'CPU')} ({bd.runnable_mean:g} on average, {bd.runnable_peak} at "
           f"most) while a child process ran two or more of them: {plural(len(children), 'child process', 'child processes')} "
           "sized their thread pools for the whole machine.")
    insp = ev.process
    pools = worker_pools(insp.libraries, insp.libraries_readable) if insp is not None else ["torch"]
    workers = [p for p in children if p.role == "dataloader_worker"]
    named = ", ".join(WORKER_POOL_WORDS[p] for p in ("torch", "blas", "opencv") if p in pools)
    if workers:
        # DataLoader workers are forks: a variable read at load time never reaches the pools they inherit, and
        # OpenCV's pool reads none at all (cv2.getNumThreads() stays at every CPU): each library's own switch
        main_threads = max(1, bd.cpus - len(workers))
        fix = (f"Give every DataLoader worker one thread per pool with each library's own switch in worker_init_fn "
               f"({named}); the training process keeps {plural(main_threads, 'thread')}. A variable set in the shell "
               "does not shrink a pool a forked worker inherits" + (", and none reaches OpenCV's." if "opencv" in pools
                                                                     else "."))
        snippet = worker_init_snippet(pools, main_threads, len(workers))
    else:
        fix = ("Give every child process one thread: OMP_NUM_THREADS=1 in its environment (before it imports torch), "
               "or each library's own switch first thing in the child (a Pool initializer: "
               f"{named}); or start fewer processes.")
        snippet = ("import torch\ntorch.set_num_threads(1)   # first thing in each child process (Pool initializer)"
                   + ("\nimport cv2\ncv2.setNumThreads(1)   # OpenCV's own pool: no variable reaches it" if "opencv" in pools
                      else ""))
    return [_finding("warning", f"{bd.runnable_peak} runnable threads on {bd.cpus} CPUs across "
                     f"{len(children) + 1} processes", why, fix, snippet,
                     {"oversubscribed_share": bd.oversubscribed_share, "runnable_mean": bd.runnable_mean,
                      "runnable_peak": bd.runnable_peak, "cpus": bd.cpus, "pools": pools}, lang="python")]


@evidence_rule("EVID006", "python-dominates", category="threads", severity="warning",
               title="Python code dominates the step")
def python_dominates(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        The share of the job's sampled time in which the interpreter ran Python code (the leaf
        frame is Python), against the share in compute kernels.

    Why it matters:
        Every Python-level operation costs microseconds of interpreter and dispatcher time. A step
        built from many small operations, per-sample loops or Python-side metrics leaves the
        kernels idle: more threads or a faster CPU do not help.

    Fix:
        Vectorise the per-sample loop into tensor operations, move per-sample work into DataLoader
        workers, use larger batches, or compile the step (torch.compile). The top Python functions
        in the why show where to start.
    """
    bd = ev.own_shares()
    if bd is None:
        return []
    driver = bd.driver_thread()
    if driver is not None:
        py, comp = own_share(bd, PYTHON), own_share(bd, COMPUTE)
    else:
        py, comp = bd.share(PYTHON), bd.share(COMPUTE)
    if py < PYTHON_DOMINATES or py <= comp:
        return []
    tops = [t for t in (bd.driver_python or bd.top) if t.category == PYTHON][:3]
    where = "; ".join(f"{t.frame} {percent(t.share, fraction=True)}" for t in tops)
    why = (f"The training thread ran Python code {percent(py, fraction=True)} of its time and compute kernels only {percent(comp, fraction=True)} "
           f"({driver.samples if driver else bd.samples} samples over {bd.window_s:g} s)."
           + (f" Top Python lines: {where}." if where else "") + consequence(bd) + ev.load_sentence())
    fix = ("Turn the per-element Python work into tensor operations on whole batches, move per-sample work "
           "into the DataLoader's workers, or compile the step with torch.compile.")
    return [_finding("warning", f"Python code takes {percent(py, fraction=True)} of the time, kernels {percent(comp, fraction=True)}", why, fix,
                     "", {"python_share": round(py, 3), "compute_share": round(comp, 3), "samples": bd.samples})]


STILL_COMPILING = 0.5         # the window's counted time in torch.compile from which it saw no training yet
STILL_STARTING = 0.6          # ... or the share of all its samples spent importing (start-up)
WINDOW_ENDS = ("seconds", "interrupt", "stopped", "terminated", None)   # CPU Doctor ended the watching (None: inspect)


def still_starting(ev: Evidence) -> tuple[str, float] | None:
    """("compiling" | "starting", share) when the watching ended while the job had not begun to train: most of the
    window in torch.compile (with at most one compilation logged), or most of its samples importing modules."""
    bd = ev.breakdown
    if bd is None or ev.crash is not None or ev.ended_by not in WINDOW_ENDS:
        return None
    rec = ev.recompiles
    if rec is not None and len(rec.recompiles) >= 2:
        return None                     # it compiled again and again: EVID003's question
    if bd.seconds > 0 and bd.share(COMPILE) >= STILL_COMPILING:
        return "compiling", bd.share(COMPILE)
    total = bd.samples + bd.startup_samples
    if total and bd.startup_samples / total >= STILL_STARTING:
        return "starting", bd.startup_samples / total
    return None


@evidence_rule("EVID024", "window-before-training", category="evidence", severity="info",
               title="The window ended before the job trained")
def window_before_training(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Whether the window CPU Doctor watched (`run --seconds`, `inspect --seconds`, a Stop) ended
        while the job was still compiling (most of the sampled time in torch.compile, its compiler
        processes running, no recompilation logged yet) or still importing its modules.

    Why it matters:
        A first torch.compile takes tens of seconds, more on a busy machine: a window that ends
        inside it sees no training step, so no rule about training can speak, and a job that
        recompiles for every new shape looks the same as one compiling once. Saying nothing would
        read as "no problem".

    Fix:
        Watch it past its compile and first steps: a longer `--seconds` (or none, to its end), or
        inspect it again once it trains; `cpudoctor run` logs every recompilation and its cause.
    """
    found = still_starting(ev)
    if found is None:
        return []
    what, share = found
    bd = ev.breakdown
    assert bd is not None
    compilers = [p for p in bd.processes if p.role in ("compiler", "compile_worker")]
    window = f"{bd.window_s:g} s"
    if ev.ended_by is None:
        watch = f"inspected for {window}"
        again = ("Inspect it again once it trains (after its first steps), or run it under `cpudoctor run` with no "
                 "--seconds: run logs every recompilation and why")
        snippet = f"cpudoctor inspect {ev.pid or 'PID'} --seconds 30   # once the job trains"
    else:
        watch = f"stopped after {window}" if ev.ended_by == "seconds" else f"watched for {window}"
        longer = max(60, int(bd.window_s * 4 / 10 + 1) * 10)
        again = (f"Run it for longer: --seconds {longer} or more (or no --seconds, to its end), so the window covers "
                 "its compile and its first steps")
        snippet = f"cpudoctor run --seconds {longer} -- {ev.cmd()}"
    if what == "compiling":
        many = f", with {plural(len(compilers), 'compiler process', 'compiler processes')}" if compilers else ""
        why = (f"The job was {watch}, and {percent(share, fraction=True)} of that time went to torch.compile{many}: "
               "the window ended inside its compile, before its training steps, so nothing about its training "
               "could be judged (and whether it compiles again for each new input shape could not be seen).")
        title = f"The window ended while the job was still compiling ({percent(share, fraction=True)} of the time)"
    else:
        why = (f"The job was {watch}, and {percent(share, fraction=True)} of the samples found it still importing its "
               "modules: the window ended before its first training step, so nothing about its training could be "
               "judged.")
        title = "The window ended while the job was still starting"
    return [_finding("info", title, why, again + ".", snippet,
                     {"still": what, "share": round(share, 3), "window_s": bd.window_s, "compilers": len(compilers),
                      "ended_by": ev.ended_by})]


# What each signal a job dies of means, and what to do (SIGILL's fix comes from the ISA-floor table when the
# package is known).
CRASH_WORDS: dict[str, tuple[str, str]] = {
    "SIGILL": ("a build ran an instruction this CPU does not have (a package built for a newer "
               "CPU: AVX, AVX2, AVX-512, x86-64-v2/v3)",
               "Install a build of the package that crashed made for this CPU (an older release, a conda-forge "
               "build, or one compiled here), or run on a CPU that has the instructions; `cpudoctor doctor` "
               "imports every installed package on this CPU and names the one that crashes (ISA003)."),
    "SIGSEGV": ("native code read or wrote memory it may not (a bug or a mismatch between "
                "native libraries: two builds of one library, an extension built against another version)",
                "The Python stack above names where it died; reinstall that package in a fresh environment with "
                "versions that match, and check `cpudoctor doctor` for two OpenMP runtimes (BLAS001)."),
    "SIGBUS": ("memory that was mapped went away, most often DataLoader workers' shared memory "
               "(/dev/shm) filling up in a container, or a memory-mapped file that was truncated",
               "Give the container more shared memory (docker run --shm-size=8g), or num_workers=0 to test."),
    "SIGKILL": ("a process cannot catch it; on Linux it is most often the kernel's out-of-memory "
                "killer (or a container's memory limit)",
                "Check the kernel's log (dmesg | grep -i -E 'killed process|out of memory'); use a smaller batch "
                "or model, fewer DataLoader workers, or free memory."),
    "SIGABRT": ("a library stopped the process on purpose (a failed assertion, std::terminate, a double "
                "free), and usually printed why just above",
                "Read the last lines the job printed before it died; they name the library and the reason."),
    "SIGFPE": ("native code divided an integer by zero",
               "The Python stack above names where it died; report it to that package with the shapes used."),
}
CRASH_OTHER = ("it was killed by a signal sent from outside (another program or a user)",
               "Find what sends it (a job scheduler's time or memory limit, a watchdog), or run the job where "
               "nothing stops it.")


@evidence_rule("EVID023", "job-crashed", category="evidence", severity="error",
               title="The job crashed")
def job_crashed(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        How a job `cpudoctor run` started ended: whether it died of a signal of its own (SIGILL,
        SIGSEGV, SIGBUS, SIGKILL, SIGABRT, ...; not one CPU Doctor sent to stop it), where Python
        said it died (`run` switches Python's fault handler on), and for SIGILL, the package whose
        build needs instructions this CPU lacks (the ISA-floor table).

    Why it matters:
        A crashed job has no breakdown worth judging: what it did before it died is not why it is
        slow. SIGILL means a build made for a newer CPU; SIGKILL most often the out-of-memory killer;
        SIGBUS shared memory that ran out; SIGSEGV and SIGABRT a native library's fault.

    Fix:
        For SIGILL install the release of the package that runs on this CPU (named with its floor
        when the table knows it); for the others, the finding says what to look at first.
    """
    crash = ev.crash
    if crash is None:
        return []
    meaning, fix = CRASH_WORDS.get(crash.signal, CRASH_OTHER)
    how = (f"exited with code {128 + _signum(crash.signal)} after {crash.after_s:g} s, the way a shell in between "
           f"says its command died of {crash.signal}" if crash.via_shell and _signum(crash.signal)
           else f"died of {crash.signal}{f' ({crash.description})' if crash.description else ''} after {crash.after_s:g} s")
    where = ""
    if crash.module:
        named = f"{crash.distribution} {crash.version}" if crash.distribution and crash.version else crash.module
        frame = next((fr for fr in crash.frames if f"/{crash.module}/" in fr or f"/{crash.module}." in fr), "")
        where = f" It died in {crash.module}'s code ({named}{': ' + frame if frame else ''})."
    elif crash.frames:
        where = f" Python's last frame: {crash.frames[0]}."
    why = f"The job {how}: {meaning}.{where}"
    snippet, title = "", f"The job crashed: {crash.signal}"
    culprit = None
    if crash.signal == "SIGILL" and crash.module:
        culprit = floors.culprit(crash.distribution or crash.module, crash.version, ev.cpu_flags)
    if culprit is not None:
        version = f" {culprit.version}" if culprit.version else ""
        why += (f" {culprit.label}{version} needs {', '.join(culprit.needs)}, which this CPU lacks: "
                f"{', '.join(culprit.missing)}.")
        fix, snippet = culprit.fix, culprit.snippet
        title = f"The job crashed: {culprit.label}{version} needs {', '.join(culprit.needs)} (Illegal instruction)"
    elif crash.signal == "SIGILL" and crash.module:
        fix = (f"Install a {crash.distribution or crash.module} build made for this CPU (an older release, a "
               "conda-forge build, or one compiled here), or run on a CPU that has the instructions it needs.")
        title = f"The job crashed in {crash.module}: Illegal instruction"
    return [_finding("error", title, why, fix, snippet,
                     {"signal": crash.signal, "after_s": crash.after_s, "module": crash.module,
                      "distribution": crash.distribution, "version": crash.version,
                      "needs": list(culprit.needs) if culprit else None,
                      "safe_versions": culprit.safe if culprit else None})]


def _signum(name: str) -> int:
    import signal

    try:
        return int(signal.Signals[name])
    except KeyError:
        return 0


@evidence_rule("EVID009", "inconclusive", category="threads", severity="info",
               title="Not enough evidence to judge where the time went")
def inconclusive(ev: Evidence) -> list[Finding]:
    """
    What it checks:
        Whether the time breakdown may be judged: enough samples of the training thread, a job
        that used the CPU, and how much of the machine other programs used meanwhile.

    Why it matters:
        Shares from a few samples or from a job that was idle say nothing about the job: the
        breakdown rules stay silent instead of guessing. On a machine busy with other programs the
        shares of the job's own samples, its state and its kernels are still judged, but waiting
        and thread counts depend on the other programs: those findings say "likely".

    Fix:
        Sample longer while the job trains (`cpudoctor inspect PID --seconds 20`, or let
        `cpudoctor run` run longer); confirm the "likely" findings on a quiet machine.
    """
    bd = ev.breakdown
    if bd is None or ev.crash is not None or still_starting(ev) is not None:
        return []                       # a crashed job (EVID023) or one not yet training (EVID024) says why
    verdict = judge_breakdown(bd)
    if verdict.conclusive:
        return []
    why = reason(bd, verdict)
    evidence = {"verdict": verdict.verdict, "cause": verdict.cause, "samples": bd.samples,
                "others_cpus": bd.others_cpus, "job_cpus": bd.job_cpus}
    if verdict.verdict == "busy":
        words = load_words(bd)
        return [_finding("info", f"Busy machine: {words.replace(' meanwhile', '')}",
                         f"{why[:1].upper()}{why[1:]}. The shares of the job's own samples (its Python, data loading, "
                         "kernels and their data types, compiling), its state and its kernels were judged as usual; "
                         "OpenMP waiting and thread counts depend on what the other programs did, so findings about "
                         "them say \"likely\".",
                         "Confirm the \"likely\" findings on a quiet machine, or pin this job to CPUs nothing else "
                         "uses.", "", evidence)]
    return [_finding("info", f"Inconclusive: {why.split(':')[0]}", why[:1].upper() + why[1:] + ".",
                     "Sample longer while the job trains, on a quiet machine.", "", evidence)]


def run_evidence_rules(ev: Evidence, only: set[str] | None = None, *, strict: bool = False) -> list[Finding]:
    return EVIDENCE_RULES.run(ev, only, strict=strict)
