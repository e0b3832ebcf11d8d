"""Where a job's time went: stacks and thread states turned into shares per category, thread and process.

Accounting, in thread-seconds (a sample stands for 1/rate seconds of one thread):

- The *driving thread* (the main thread of the top Python process: the one that
  runs the training loop) counts with every sample, waiting included: when it
  waits for the next batch or sleeps, the step waits with it.
- Every other thread (OpenMP workers, the pin-memory thread, DataLoader worker
  processes, compilers) counts while it works; its samples blocked in the
  kernel are *idle* capacity, counted apart and left out of the shares. A
  DataLoader worker that waits for its next index is no time the job lost.
- Threads py-spy sees (they run Python) are classified from their stacks; the
  others (native OpenMP workers, non-Python children) from their /proc state:
  a compiler process's running samples are compilation; an OpenMP worker's
  running samples are split between the kernels its team ran (at most as long
  as the driving thread computed, in the same libraries) and OpenMP waiting
  (spinning) for the rest.

Shares add up to 1 over the counted thread-seconds of each thread, process and
the job. Beside them the breakdown records what the job and the other programs
did with the CPUs; whether that lets it be judged (too few samples, an idle job,
a busy machine) is the advisor's (:mod:`cpudoctor.advisor.job_verdict`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from cpudoctor.model.breakdown import (COMPILE, COMPUTE, DATA, INSTRUMENTATION, IO, MEMORY, OPENMP, OTHER,
                                       ProcessTime, Share, ThreadTime, TimeBreakdown, TopFrame)
from cpudoctor.probes.process.classify import Verdict, classify, classify_process, rules, waits_for_work
from cpudoctor.probes.process.stacks import StackRecord
from cpudoctor.probes.process.threadstates import TreeStates


DRIVER_TOP = 8          # the driving thread's top native frames and top Python lines kept


class _Acc:
    """Seconds per (category, library) and sample counts."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.libs: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.samples: Counter[str] = Counter()
        self.idle = 0
        self.work_wait = 0          # of idle: a worker loop blocked on its queue of work (see ThreadTime)
        self.startup = 0
        self.instrumentation = 0

    def add(self, category: str, library: str | None, seconds: float, samples: int) -> None:
        self.seconds[category] += seconds
        self.samples[category] += samples
        if category == COMPUTE:
            self.libs[category][library or "other"] += seconds

    def merge(self, other: _Acc) -> None:
        for c, s in other.seconds.items():
            self.seconds[c] += s
        for c, n in other.samples.items():
            self.samples[c] += n
        for c, libs in other.libs.items():
            for lib, s in libs.items():
                self.libs[c][lib] += s
        self.idle += other.idle
        self.work_wait += other.work_wait
        self.startup += other.startup
        self.instrumentation += other.instrumentation

    def total(self) -> float:
        return sum(self.seconds.values())

    def shares(self) -> list[Share]:
        total = self.total()
        r = rules()
        out = []
        for cat in r.category_ids():
            sec = self.seconds.get(cat, 0.0)
            if sec <= 0:
                continue
            libs = {lib: round(s, 3) for lib, s in sorted(self.libs.get(cat, {}).items(), key=lambda kv: -kv[1])}
            out.append(Share(cat, round(sec, 3), round(sec / total, 4) if total else 0.0,
                             self.samples.get(cat, 0), libs))
        return out


def _leaf_name(frames) -> str:
    for f in reversed(frames):
        if f.python:
            return f.text()
        if not f.name.startswith("0x"):
            return f.text()
    return frames[-1].text() if frames else "?"


# Library code, the standard library, and CPU Doctor's own probe in the job (its sitecustomize folder)
_LIBRARY_FILE = re.compile(r"(?:/|^)(?:site|dist)-packages/|/lib/python3\.\d+/|^<frozen |/cpudoctor-probe-[^/]*/")


def _native_leaf(frames) -> str | None:
    """The innermost native frame that names something (a symbol, not a bare address), with its library."""
    for f in reversed(frames):
        if f.python:
            return None
        if not f.name.startswith("0x"):
            return f.text()
    return None


def _user_line(frames) -> str | None:
    """The innermost Python frame of the user's own code (outside site-packages and the standard library), else the
    innermost Python frame."""
    python = [f for f in frames if f.python]
    for f in reversed(python):
        if not _LIBRARY_FILE.search(f.file):
            return f.text()
    return python[-1].text() if python else None


def _reduced_type(frames) -> str | None:
    """f16 / bf16 when a native frame of the stack is a kernel instantiated for that type (ATen's own
    fallback kernels run there when oneDNN has no native kernel for it on this CPU)."""
    for f in reversed(frames):
        if f.python:
            break
        if "c10::Half" in f.name:
            return "f16"
        if "c10::BFloat16" in f.name:
            return "bf16"
    return None


def _driver(record: StackRecord, root_pid: int) -> tuple[int, int] | None:
    """The main thread of the top-most sampled process (the one that runs the loop)."""
    if not record.samples:
        return None
    depth = {}
    for s in record.samples:
        pid = s.pid or root_pid
        depth[pid] = min(depth.get(pid, 99), len(s.pids))
    top = min(depth, key=lambda p: (depth[p], p != root_pid, p))
    return top, top


def build_breakdown(record: StackRecord, states: TreeStates) -> TimeBreakdown:
    """The breakdown of one window from py-spy's stacks and the /proc thread states."""
    root = states.root_pid
    bd = TimeBreakdown(pid=root, window_s=round(states.window_s, 2), stack_rate_hz=record.rate_hz,
                       state_rate_hz=states.rate_hz, stacks_error=record.error, stacks_error_kind=record.error_kind,
                       online_cpus=states.online_cpus)
    bd.sampler = f"{record.sampler} + /proc" if record.samples else "/proc only"
    driver = _driver(record, root) or (root, root)
    bd.driver = f"{driver[0]}/{driver[1]}"
    stack_w = 1.0 / max(1, record.rate_hz)
    state_w = 1.0 / max(0.1, states.rate_hz)
    threads: dict[tuple[int, int], _Acc] = defaultdict(_Acc)
    names: dict[tuple[int, int], str] = {}
    roles: dict[int, str] = {}
    leaf_time: Counter[tuple[str, str]] = Counter()
    sampled_pids: set[int] = set()
    typed: Counter[str] = Counter()       # compute seconds by reduced type ("" = a generic GEMM of unknown type)
    driver_native: dict[str, Counter[str]] = defaultdict(Counter)    # frame -> category -> seconds
    driver_python: dict[str, Counter[str]] = defaultdict(Counter)
    for s in record.samples:
        pid = s.pid or root
        key = (pid, s.tid)
        sampled_pids.add(pid)
        names.setdefault(key, s.thread or str(s.tid))
        pname = states.processes[pid].name if pid in states.processes else ""
        v: Verdict = classify(s.frames, pname)
        if v.rule == "dataloader-worker" and s.tid == pid:
            roles[pid] = "dataloader_worker"
        elif v.rule == "inductor-compile-worker":
            roles.setdefault(pid, "compile_worker")
        acc = threads[key]
        if v.startup or (s.tid == pid and s.frames and not any(f.python for f in s.frames)):
            # importing modules, or a Python process's main thread with no Python frame at all: the interpreter
            # starting or finishing (the garbage collection at exit), not the job's work; counted apart
            acc.startup += s.count
            continue
        if v.category == INSTRUMENTATION:       # the verbose lines CPU Doctor switched on: the cost of watching
            acc.instrumentation += s.count
            continue
        if v.blocking and key != driver and v.category != "gil":
            acc.idle += s.count
            if waits_for_work(s.frames):
                acc.work_wait += s.count
            continue
        acc.add(v.category, v.library, s.count * stack_w, s.count)
        leaf_time[(v.category, _leaf_name(s.frames))] += s.count * stack_w
        if key == driver:
            native, line = _native_leaf(s.frames), _user_line(s.frames)
            if native:
                driver_native[native][v.category] += s.count * stack_w
            if line:
                driver_python[line][v.category] += s.count * stack_w
        if v.category == COMPUTE:
            dtype = _reduced_type(s.frames)
            if dtype or any("cpublas" in f.name for f in s.frames[-4:]):
                typed[dtype or ""] += s.count * stack_w
    known = [t for t in typed if t]
    for t in known:
        # generic GEMM stacks whose frames do not name the type take it from the typed ones beside them
        share = typed[""] * typed[t] / sum(typed[k] for k in known)
        bd.reduced_precision[t] = round(typed[t] + share, 3)
    stacked = set(threads)
    _add_page_faults(bd, states, threads, driver)
    _add_state_threads(states, threads, names, roles, stacked, sampled_pids, driver, state_w)
    _assemble(bd, states, threads, names, roles, sampled_pids, stacked, driver)
    total = bd.seconds or 1.0
    bd.top = [TopFrame(cat, frame, round(sec, 3), round(sec / total, 4))
              for (cat, frame), sec in leaf_time.most_common(10)]
    driver_acc = threads.get(driver)
    bd.driver_samples = sum(driver_acc.samples.values()) if driver_acc else 0
    own = driver_acc.total() if driver_acc else 0.0
    if own > 0:
        bd.driver_native, bd.driver_python = (_top_frames(top, own) for top in (driver_native, driver_python))
    _load_facts(bd, states)
    return bd


def _top_frames(frames: dict[str, Counter[str]], own: float) -> list[TopFrame]:
    """The frames the driving thread spent most time in, each with its main category and share of the thread."""
    ranked = sorted(frames.items(), key=lambda kv: -sum(kv[1].values()))[:DRIVER_TOP]
    return [TopFrame(cats.most_common(1)[0][0], frame, round(sum(cats.values()), 3),
                     round(min(1.0, sum(cats.values()) / own), 4)) for frame, cats in ranked]


def _add_page_faults(bd: TimeBreakdown, states: TreeStates, threads, driver) -> None:
    """Minor page faults of the threads sampled with stacks: their time (count x the cost of one fault,
    measured here) moves from the categories of the code that touched the memory to memory."""
    from cpudoctor.probes.process.faults import fault_cost_s

    cost = fault_cost_s()
    churn = _churn_faults(states, threads)
    bd.minor_faults = int(sum(churn.values()))
    if not cost or not bd.minor_faults:
        return
    bd.fault_cost_us = round(cost * 1e6, 2)
    for key, acc in threads.items():
        faults = churn.get(key, 0.0)
        if not faults:
            continue
        movable = {c: s for c, s in acc.seconds.items() if c in (COMPUTE, OTHER, "python")}
        total = sum(movable.values())
        if total <= 0:
            continue
        moved = min(faults * cost, 0.9 * total)
        for cat, sec in movable.items():
            part = moved * sec / total
            acc.seconds[cat] -= part
            if cat == COMPUTE:
                libs = acc.libs[COMPUTE]
                lib_total = sum(libs.values()) or 1.0
                for lib in list(libs):
                    libs[lib] -= part * libs[lib] / lib_total
        acc.seconds[MEMORY] += moved


def _churn_faults(states: TreeStates, threads) -> dict[tuple[int, int], float]:
    """Each thread's share of its process's faults beyond the memory the process kept.

    Loading libraries and building the model fault pages in that stay resident
    (the resident set grows by as many pages); a loop that maps, touches and frees
    fresh memory every step faults while the resident set stays flat. Only the
    second is time lost to allocation: faults less the growth of the resident set.
    """
    out: dict[tuple[int, int], float] = {}
    by_pid: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key in threads:
        if key in states.threads:
            by_pid[key[0]].append(key)
    for pid, keys in by_pid.items():
        proc = states.processes.get(pid)
        total = sum(states.threads[k].minor_faults for k in keys)
        if not total or proc is None or proc.rss_first is None or proc.rss_last is None:
            continue
        churn = max(0, total - max(0, proc.rss_last - proc.rss_first))
        for k in keys:
            out[k] = churn * states.threads[k].minor_faults / total
    return out


def _add_state_threads(states: TreeStates, threads, names, roles, stacked, sampled_pids, driver, state_w) -> None:
    """Threads py-spy did not see: classified from their state (see the module docstring)."""
    for key, th in states.threads.items():
        if key in stacked:
            continue
        pid, tid = key
        proc = states.processes.get(pid)
        pname = proc.name if proc else th.name
        names.setdefault(key, th.name)
        acc = threads[key]
        by_name = classify_process(pname)
        if by_name is not None:
            roles.setdefault(pid, "compiler" if by_name.category == COMPILE else "child")
        if key == driver:
            # no stacks for the driving thread (the sampler was refused): on CPU or waiting, no more
            acc.add(OTHER, None, th.running * state_w, th.running)
            acc.add(IO, None, th.waiting * state_w, th.waiting)
            continue
        acc.idle += th.waiting
        if not th.running:
            continue
        if by_name is not None:
            acc.add(by_name.category, by_name.library, th.running * state_w, th.running)
        elif pid in sampled_pids and th.name == pname:
            _attribute_pool_thread(acc, threads.get((pid, pid)), th.running, state_w)
        elif roles.get(pid) == "dataloader_worker":
            acc.add(DATA, None, th.running * state_w, th.running)
        else:
            acc.add(OTHER, None, th.running * state_w, th.running)


def _attribute_pool_thread(acc: _Acc, master: _Acc | None, running: int, w: float) -> None:
    """An OpenMP worker's running samples: its team's kernels while the master computed, spinning otherwise."""
    seconds = running * w
    compute = master.seconds.get(COMPUTE, 0.0) if master else 0.0
    in_kernels = min(seconds, compute)
    if in_kernels > 0 and master is not None:
        libs = master.libs.get(COMPUTE, {})
        total = sum(libs.values()) or 1.0
        for lib, s in libs.items():
            part = in_kernels * s / total
            acc.add(COMPUTE, lib, part, round(running * part / seconds))
    rest = seconds - in_kernels
    if rest > 1e-9:
        acc.add(OPENMP, None, rest, round(running * rest / seconds))


def _assemble(bd: TimeBreakdown, states: TreeStates, threads, names, roles, sampled_pids, stacked, driver) -> None:
    job = _Acc()
    by_pid: dict[int, list[tuple[int, _Acc]]] = defaultdict(list)
    for (pid, tid), acc in threads.items():
        by_pid[pid].append((tid, acc))
    for pid in sorted(by_pid, key=lambda p: (p != bd.pid, p)):
        proc_acc = _Acc()
        ps = states.processes.get(pid)
        role = "main" if pid == bd.pid else roles.get(pid, "child")
        pt = ProcessTime(pid=pid, ppid=ps.ppid if ps else None, name=ps.name if ps else "?",
                         cmdline=ps.cmdline if ps else "", role=role,
                         python=bool(ps and ps.is_python) or pid in sampled_pids, stacks=pid in sampled_pids,
                         affinity=ps.affinity if ps else None, max_threads=ps.max_threads if ps else None,
                         thread_vars=dict(ps.thread_vars) if ps else {},
                         cpu_percent=round(ps.cpu_seconds / states.window_s * 100, 1)
                         if ps and states.window_s > 0 else None)
        for tid, acc in sorted(by_pid[pid], key=lambda ta: (ta[0] != pid, ta[0])):
            key = (pid, tid)
            role_t = "driver" if key == driver else ("python" if key in stacked else "native")
            tt = ThreadTime(pid, tid, names.get(key, str(tid)), role_t, "stacks" if key in stacked else "states",
                            samples=sum(acc.samples.values()), idle_samples=acc.idle,
                            work_wait_samples=acc.work_wait,
                            seconds=round(acc.total(), 3), shares=acc.shares())
            pt.threads.append(tt)
            proc_acc.merge(acc)
        pt.samples = sum(proc_acc.samples.values())
        pt.idle_samples = proc_acc.idle
        pt.seconds = round(proc_acc.total(), 3)
        pt.shares = proc_acc.shares()
        bd.processes.append(pt)
        job.merge(proc_acc)
    bd.samples = sum(job.samples.values())
    bd.idle_samples = job.idle
    bd.startup_samples = job.startup
    bd.instrumentation_samples = job.instrumentation
    bd.seconds = round(job.total(), 3)
    bd.shares = job.shares()


def _load_facts(bd: TimeBreakdown, states: TreeStates) -> None:
    """What the job and the other programs did with the CPUs over the window (whether that lets the
    breakdown be judged is the advisor's: :mod:`cpudoctor.advisor.job_verdict`)."""
    bd.job_cpus = round(states.job_cpus, 2)
    bd.cpus = states.cpus
    if states.active_samples:
        bd.runnable_mean = round(states.runnable_sum / states.active_samples, 2)
        bd.runnable_peak = states.runnable_peak
    if states.child_active_samples:
        bd.oversubscribed_share = round(states.oversubscribed_samples / states.child_active_samples, 3)
    others = states.others_cpus
    bd.others_cpus = round(others, 2) if others is not None else None
