"""What a running process (a training job) is doing right now, sampled over a few seconds.

Everything comes from /proc under ``root`` so a fake tree can stand in for a
real one in tests: per-thread CPU time and the CPU each thread last ran on
(``task/*/stat``), run-queue waits (``task/*/schedstat``), affinity and memory
(``status``), the cgroup CPU quota, the thread environment (``environ``,
whitelisted), the native libraries (``maps``, file names only) and the
children (DataLoader workers). The advisor's process rules turn the result
into findings; nothing here judges.

Sampling reads a few small files per thread every ``interval`` seconds; CPU%
is the change in utime+stime over the window (100 = one CPU busy), and a
migration is a change of the last-ran-on CPU between two samples (a lower
bound: moves between samples are invisible).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cpudoctor.kits.rooted import is_live_root, read_text
from cpudoctor.model import Topology
from cpudoctor.model.inspection import (ChildProcess, Inspection, NativeLib, ProcessEntry, ReadProblem, ThreadInfo,
                                        ThreadPlace)
from cpudoctor.probes.process import procfs
from cpudoctor.probes.process.interpreter import process_python
from cpudoctor.probes.process.peers import find_peer_jobs, snapshot as peer_snapshot
from cpudoctor.probes.software.envvars import filter_thread_env, preload_names

class InspectError(Exception):
    """The process cannot be inspected at all.

    ``kind`` says why: not_a_pid | no_proc | no_such_process | denied | unreadable_stat | zombie |
    kernel_thread | no_tasks | exited; ``pid`` and ``detail`` are the facts render words
    (:func:`cpudoctor.render.inspect.inspect_error_text`). ``str()`` of it names the kind and the
    process, for a log: the words for a person are render's.
    """

    def __init__(self, kind: str, pid: int, detail: str = ""):
        self.kind, self.pid, self.detail = kind, pid, detail
        super().__init__(f"{kind}: process {pid}" + (f" ({detail})" if detail else ""))


# --- native libraries ------------------------------------------------------------------


@lru_cache(maxsize=1)
def _lib_patterns() -> tuple[tuple[re.Pattern[str], dict], ...]:
    from cpudoctor.knowledge import NATIVE_LIBS

    return tuple((re.compile(e["pattern"]), e) for e in NATIVE_LIBS.data["libraries"])


_SITE_RE = re.compile(r"/(?:site|dist)-packages/([^/]+)/")


def _origin(path: str) -> str:
    """Which Python package ships the file (``torch``, ``numpy.libs``), ``system`` or ``""``."""
    m = _SITE_RE.search(path)
    if m:
        return m.group(1)
    if path.startswith(("/usr/lib", "/lib", "/usr/local/lib", "/opt/")):
        return "system"
    if "/conda" in path or "/miniforge" in path or "/mambaforge" in path:
        return "conda"
    return ""


def classify_libraries(paths: list[str]) -> list[NativeLib]:
    """The recognised native libraries among mapped file paths (file names kept, folders dropped).

    The same file name from two folders is two entries: two copies of libgomp
    are two OpenMP thread pools, just like libgomp + libiomp5.
    """
    out: list[NativeLib] = []
    seen: set[tuple[str, str]] = set()
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        for pattern, entry in _lib_patterns():
            if pattern.search(name):
                key = (name, path.rsplit("/", 1)[0])
                if key not in seen:
                    seen.add(key)
                    out.append(NativeLib(file=name, kind=entry["kind"], library=entry["id"],
                                         runtime=entry.get("runtime"), origin=_origin(path)))
                break
    return out


# --- topology ---------------------------------------------------------------------------


@dataclass
class CpuPlace:
    l3: int | None = None
    numa: int | None = None
    core: int | None = None


def locate_cpu(topo: Topology | None, cpu: int | None) -> CpuPlace:
    """Where a logical CPU sits: its L3 (CCX) index, NUMA node id and core index."""
    place = CpuPlace()
    if topo is None or cpu is None:
        return place
    for i, dom in enumerate(topo.l3_domains):
        if cpu in dom.cpus:
            place.l3 = i
            break
    for node in topo.numa_nodes:
        if cpu in node.cpus:
            place.numa = node.id
            break
    for i, core in enumerate(topo.core_list):
        if cpu in core.cpus:
            place.core = i
            if place.l3 is None and core.l3 is not None:
                place.l3 = core.l3
            if place.numa is None and core.numa is not None:
                place.numa = core.numa
            break
    return place


def place_threads(insp: Inspection, topo: Topology | None) -> None:
    """Fill each thread's l3/numa/core from its last CPU (also used to re-map live markers)."""
    insp.topology_known = bool(topo and (topo.l3_domains or topo.core_list or topo.numa_nodes))
    for t in insp.threads:
        p = locate_cpu(topo, t.last_cpu)
        t.l3, t.numa, t.core = p.l3, p.numa, p.core


# --- helpers ----------------------------------------------------------------------------


def _is_python(cmd: list[str] | None, comm: str | None) -> bool:
    if comm and comm.lower().startswith(("python", "pytest", "ipykernel", "jupyter", "torchrun", "accelerate")):
        return True
    if not cmd:
        return False
    first = cmd[0].rsplit("/", 1)[-1].lower()
    return "python" in first or any("python" in a.rsplit("/", 1)[-1].lower() for a in cmd[:2])


def _join_cmd(cmd: list[str] | None, limit: int = 400) -> str:
    if not cmd:
        return ""
    # Control characters (a `python -c` script's newlines) would break one-line displays.
    args = procfs.redact_args(cmd)
    text = procfs.redact_paths(" ".join(" ".join(a.split()) if any(c in a for c in "\n\r\t") else a for a in args))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _proc_alive(root: Path, pid: int, starttime: int) -> procfs.TaskStat | None:
    """The process's stat, or None when it is gone, a zombie, or the PID was reused."""
    st = procfs.read_pid_stat(root, pid)
    if st is None:
        return None
    if st.starttime != starttime or st.state in ("Z", "X", "x"):
        return None
    return st


def _uptime(root: Path) -> float | None:
    """Seconds since boot (/proc/uptime), to age a process from its stat starttime."""
    text = read_text(procfs.under(root, "/proc/uptime"))
    try:
        return float(text.split()[0]) if text else None
    except (ValueError, IndexError):
        return None


def open_process(pid: int, root: Path = Path("/")) -> procfs.TaskStat:
    """The process's stat line, or :class:`InspectError` saying clearly why not."""
    if pid <= 0:
        raise InspectError("not_a_pid", pid)
    pdir = procfs.proc_dir(root, pid)
    if not procfs.under(root, "/proc").is_dir():
        raise InspectError("no_proc", pid, str(root))
    r = procfs.read_reason(pdir / "stat")
    if r.text is None:
        raise InspectError("denied" if r.problem == "denied" else "no_such_process", pid)
    try:
        st = procfs.parse_stat(r.text)
    except procfs.StatParseError as exc:
        raise InspectError("unreadable_stat", pid, str(exc)) from None
    if st.state in ("Z", "X", "x"):
        raise InspectError("zombie", pid)
    if st.kernel_thread:       # by its flag, not its PID: PID 2 in a PID namespace is a program
        raise InspectError("kernel_thread", pid)
    return st


# --- the sampler -------------------------------------------------------------------------


@dataclass
class _Track:
    name: str
    state: str
    first_ticks: int
    last_ticks: int
    first_t: float
    last_t: float
    cpus: list[int]
    last_cpu: int | None
    migrations: int = 0
    r_count: int = 0
    samples: int = 0
    sched0: tuple[int, int] | None = None
    sched1: tuple[int, int] | None = None


def _job_descendants(root: Path, pid: int) -> list[int]:
    """``pid``'s descendants, less the inspector itself and what it started.

    The inspector descends from ``pid`` when one inspects a shell, a session
    leader or PID 1; it is not one of the job's workers.
    """
    found = procfs.descendants(root, pid)
    me = os.getpid()
    if not is_live_root(root) or me not in found:
        return found                 # e.g. a job the inspector started itself keeps all its workers
    mine = {me, *procfs.descendants(root, me)}
    return [c for c in found if c not in mine]


def inspect_process(
    pid: int,
    seconds: float = 2.0,
    root: Path = Path("/"),
    topology: Topology | None = None,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    should_stop: Callable[[], bool] | None = None,
    stacks: bool = False,
    refresh_s: float | None = None,
) -> Inspection:
    """Sample ``pid`` for ``seconds`` and describe it.

    With ``stacks``, the stacks and thread states of the process and its children
    are sampled over the same window (:mod:`.timing`) into ``time``. With
    ``refresh_s``, the facts that change while a job starts (the libraries it
    loads, its affinity, its memory) are read again every ``refresh_s`` seconds
    and the last reading kept: ``cpudoctor run`` watches a job from its first
    instant to its end, when nothing can be read any more.

    Raises :class:`InspectError` when nothing can be read (no such PID, kernel
    thread, zombie, unreadable stat). A process that exits during the window
    gives ``status="exited"`` with the data gathered so far and a note.
    ``clock``/``sleep`` are injectable so a fake /proc tree can be stepped
    deterministically; ``should_stop`` lets a GUI cancel early.

    The steps: static facts read once, the sampling window, then the figures
    derived from it (threads, memory, children) and the place of each thread
    on the topology.
    """
    root = Path(root)
    first = open_process(pid, root)
    insp = Inspection(pid=pid, name=first.comm, nice=first.nice)
    seconds = max(0.0, float(seconds))
    if interval is None:
        interval = max(0.1, seconds / 40) if seconds > 0 else 0.1
    status = _read_static_facts(insp, root, pid, first.comm)
    late = _LateFacts(insp, root, pid, refresh_s, status, clock()) if refresh_s else None
    sampler = _Sampler(root, pid, first, _children_at_start(insp, root, pid))
    peers_before = peer_snapshot(root)
    timer = None
    if stacks:
        from cpudoctor.probes.process.timing import TimeSampler

        timer = TimeSampler(pid, root=root, duration=seconds)
        timer.start()
    try:
        window = _sample_window(sampler, seconds, interval, clock, sleep, should_stop, late)
    finally:
        if timer is not None:
            insp.time = timer.stop()
    _record_window(insp, window)
    _find_peers(insp, root, pid, peers_before, window)
    _summarise_threads(insp, sampler, window)
    _read_memory(insp, root, pid, late.status if late else status, first, sampler.last_stat)
    _summarise_children(insp, root, pid, sampler, window)
    _place_on_topology(insp, root, topology)
    return insp


def _read_static_facts(insp: Inspection, root: Path, pid: int, comm: str) -> dict[str, str]:
    """Command line, affinity, cgroup quota, thread environment and libraries, read once at the start.

    Returns the parsed ``status`` file (the memory step falls back to it).
    """
    pdir = procfs.proc_dir(root, pid)
    status_r = procfs.read_reason(pdir / "status")
    status = procfs.parse_status(status_r.text) if status_r.text else {}
    insp.uid = procfs.status_uid(status)
    cmd = procfs.read_cmdline(root, pid)
    insp.cmdline = _join_cmd(cmd) if cmd is not None else None
    insp.argv = procfs.shown_argv(cmd) if cmd else []
    insp.is_python = _is_python(cmd, comm)
    insp.affinity = procfs.status_cpus_allowed(status)
    if insp.affinity is None:
        insp.notes.append("CPU affinity unknown: no Cpus_allowed_list in /proc/<pid>/status")
    quota = procfs.read_cgroup_quota(root, pid)
    insp.cgroup_path = quota.path
    insp.cpu_quota = quota.quota_cpus
    if quota.path is None:
        insp.notes.append("cgroup unknown: /proc/<pid>/cgroup unreadable")
    elif not quota.readable:
        insp.notes.append("no cpu controller files under /sys/fs/cgroup for this process: CPU quota unknown")
    insp.usable_cpus = procfs.usable_cpus(insp.affinity, insp.cpu_quota)
    raw_env = _read_environment(insp, pdir, pid)
    mapped = _read_libraries(insp, pdir, pid)
    if insp.is_python:
        found = process_python(root, pid, environ=raw_env, argv=cmd, mapped=mapped)
        if found is not None:
            insp.python, insp.python_found_by = found.executable, found.found_by
    return status


def _read_environment(insp: Inspection, pdir: Path, pid: int) -> dict[str, str] | None:
    """The thread variables (allow-listed) into ``insp``; the raw environment back for the interpreter step."""
    env_r = procfs.read_reason(pdir / "environ", binary_nul=True)
    if env_r.text is not None:
        raw = procfs.parse_environ(env_r.text)
        insp.env = filter_thread_env(raw)
        insp.preload = preload_names(raw.get("LD_PRELOAD"))
        insp.env_readable = True
        return raw
    insp.env_problem = ReadProblem(env_r.problem or "unreadable", env_r.detail or "")
    if env_r.problem == "denied":
        insp.denied.append("environment")
    return None


def _read_libraries(insp: Inspection, pdir: Path, pid: int) -> list[str]:
    """The native libraries (file names) into ``insp``; the mapped paths back for the interpreter step."""
    maps_r = procfs.read_reason(pdir / "maps")
    if maps_r.text is not None:
        paths = procfs.parse_maps_paths(maps_r.text)
        insp.libraries = classify_libraries(paths)
        insp.libraries_readable = True
        if not maps_r.text.strip() and insp.env_readable is False:
            insp.notes.append("the memory map is empty: the process may be exiting")
        return paths
    insp.libraries_problem = ReadProblem(maps_r.problem or "unreadable", maps_r.detail or "")
    if maps_r.problem == "denied":
        insp.denied.append("libraries")
    return []


def _children_at_start(insp: Inspection, root: Path, pid: int) -> dict[int, procfs.TaskStat]:
    """DataLoader workers and any grandchildren, fixed at the start (zombies noted, not sampled)."""
    found: dict[int, procfs.TaskStat] = {}
    for c in _job_descendants(root, pid):
        cst = procfs.read_pid_stat(root, c)
        if cst is None:
            continue
        if cst.state in ("Z", "X"):
            insp.notes.append(f"child {c} has exited but was not reaped by its parent (zombie)")
            continue
        found[c] = cst
    return found


class _Sampler:
    """Per-thread tracks of one process (and run-queue counts of its children), one sample at a time."""

    def __init__(self, root: Path, pid: int, first: procfs.TaskStat, children: dict[int, procfs.TaskStat]):
        self.root, self.pid, self.first = root, pid, first
        self.children = children                      # pid -> stat at the start
        self.child_runnable: dict[int, int] = {c: 0 for c in children}
        self.tracks: dict[int, _Track] = {}
        self.runnable_counts: list[int] = []
        self.last_stat = first
        self.last_t = 0.0

    def alive(self) -> bool:
        return _proc_alive(self.root, self.pid, self.first.starttime) is not None

    def take(self, now: float, last: bool = False) -> bool:
        """One sample of every thread; False when the process is gone."""
        root, pid = self.root, self.pid
        st = _proc_alive(root, pid, self.first.starttime)
        if st is None:
            return False
        tasks = procfs.read_task_stats(root, pid)
        if not tasks:
            return False
        self.last_stat, self.last_t = st, now
        running = 0
        for tid, ts in tasks.items():
            tr = self.tracks.get(tid)
            if tr is None:
                tr = self.tracks[tid] = _Track(ts.comm, ts.state, ts.cpu_ticks, ts.cpu_ticks, now, now, [], ts.processor)
                tr.sched0 = procfs.read_schedstat(root, pid, tid)
            else:
                if ts.processor is not None and tr.last_cpu is not None and ts.processor != tr.last_cpu:
                    tr.migrations += 1
                tr.last_ticks, tr.last_t = ts.cpu_ticks, now
            tr.name, tr.state, tr.last_cpu = ts.comm, ts.state, ts.processor
            if ts.processor is not None and ts.processor not in tr.cpus:
                tr.cpus.append(ts.processor)
            tr.samples += 1
            if ts.state == "R":
                tr.r_count += 1
                running += 1
            if last:
                tr.sched1 = procfs.read_schedstat(root, pid, tid)
        for c in self.children:
            for cts in procfs.read_task_stats(root, c).values():
                if cts.state == "R":
                    running += 1
                    self.child_runnable[c] += 1
        self.runnable_counts.append(running)
        return True

    def finish_schedstat(self) -> None:
        """Final schedstat reading when the loop ended without a "last" sample (stop / zero window)."""
        for tid, tr in self.tracks.items():
            if tr.sched1 is None:
                tr.sched1 = procfs.read_schedstat(self.root, self.pid, tid)


@dataclass
class _Window:
    start: float
    end: float                                # time of the last good sample
    exited_at: float | None = None

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 0.0)


def _sample_window(sampler: _Sampler, seconds: float, interval: float, clock: Callable[[], float],
                   sleep: Callable[[float], None], should_stop: Callable[[], bool] | None,
                   on_sample: Callable[[float], None] | None = None) -> _Window:
    """Sample every ``interval`` until ``seconds`` pass, the caller stops, or the process exits."""
    t_start = clock()
    deadline = t_start + seconds - 1e-6     # float steps (0.1 x 10) must not add a sample
    if not sampler.take(t_start):
        raise InspectError("no_tasks" if sampler.alive() else "exited", sampler.pid)
    exited_at = None
    while True:
        now = clock()
        if now >= deadline or (should_stop is not None and should_stop()):
            break
        sleep(min(interval, max(0.0, deadline - now)))
        now = clock()
        final = now >= deadline
        if not sampler.take(now, last=final):
            exited_at = now
            break
        if on_sample is not None:
            on_sample(now)
        if final:
            break
    if exited_at is None and sampler.tracks:
        sampler.finish_schedstat()
    return _Window(t_start, sampler.last_t, exited_at)


class _LateFacts:
    """Reads again, every ``every`` seconds, what a starting job changes: its libraries, affinity and status."""

    def __init__(self, insp: Inspection, root: Path, pid: int, every: float, status: dict[str, str], now: float):
        self.insp, self.root, self.pid, self.every = insp, root, pid, every
        self.status = status
        self._last = now

    def __call__(self, now: float) -> None:
        if now - self._last < self.every:
            return
        self._last = now
        pdir = procfs.proc_dir(self.root, self.pid)
        status = procfs.parse_status(read_text(pdir / "status") or "")
        if status:
            self.status = status
            affinity = procfs.status_cpus_allowed(status)
            if affinity is not None:
                self.insp.affinity = affinity
                self.insp.usable_cpus = procfs.usable_cpus(affinity, self.insp.cpu_quota)
        maps = procfs.read_reason(pdir / "maps")
        if maps.text and self.insp.libraries_readable:
            self.insp.libraries = classify_libraries(procfs.parse_maps_paths(maps.text))


def _record_window(insp: Inspection, window: _Window) -> None:
    insp.window_s = round(window.seconds, 3)
    if window.exited_at is not None:
        insp.status = "exited"
        insp.exited_after_s = round(window.exited_at - window.start, 2)


def _find_peers(insp: Inspection, root: Path, pid: int, before, window: _Window) -> None:
    """Other busy PyTorch jobs on the same CPUs during the window (CPU Doctor's own lab jobs are no
    peers, unless the inspected job is one of them)."""
    me = os.getpid()
    mine = set(procfs.descendants(root, me))
    insp.peers = find_peer_jobs(root, pid, insp.affinity, before, window.seconds,
                                exclude={me} if pid in mine else {me, *mine})


def _summarise_threads(insp: Inspection, sampler: _Sampler, window: _Window) -> None:
    """Per-thread CPU%, run-queue wait and migrations; the process's totals."""
    hz = procfs.CLK_TCK
    insp.samples = len(sampler.runnable_counts)
    for tid in sorted(sampler.tracks):
        tr = sampler.tracks[tid]
        span = tr.last_t - tr.first_t
        cpu = (tr.last_ticks - tr.first_ticks) / hz / span * 100 if span > 0 else None
        wait = None
        if tr.sched0 and tr.sched1 and span > 0:
            wait = max(0.0, (tr.sched1[1] - tr.sched0[1]) / 1e9 / span * 100)
        insp.threads.append(ThreadInfo(
            tid=tid, name=tr.name, state=tr.state if tr.last_t >= window.end else "exited",
            cpu_percent=round(cpu, 1) if cpu is not None else None,
            last_cpu=tr.last_cpu, cpus_seen=tr.cpus, migrations=tr.migrations,
            runnable_share=round(tr.r_count / tr.samples, 2) if tr.samples else None,
            wait_percent=round(wait, 1) if wait is not None else None,
        ))
    last = sampler.last_stat
    insp.num_threads = last.num_threads
    if window.seconds > 0:
        insp.cpu_percent = round((last.cpu_ticks - sampler.first.cpu_ticks) / hz / window.seconds * 100, 1)
        waits = [t.wait_percent for t in insp.threads if t.wait_percent is not None]
        insp.wait_percent = round(sum(waits), 1) if waits else None
        if not waits:
            insp.notes.append("run-queue waits unknown: no task schedstat (kernel without CONFIG_SCHEDSTATS/SCHED_INFO)")
    else:
        insp.notes.append("the window was too short to measure CPU use")
    insp.migrations = sum(t.migrations for t in insp.threads)
    counts = sampler.runnable_counts
    if counts:
        insp.runnable_mean = round(sum(counts) / len(counts), 2)
        insp.runnable_max = max(counts)
    if insp.samples < 3:
        insp.notes.append(f"only {insp.samples} sample(s): migrations and runnable counts are rough")


def _read_memory(insp: Inspection, root: Path, pid: int, status: dict[str, str], first: procfs.TaskStat,
                 last: procfs.TaskStat) -> None:
    """Resident and swapped memory at the end of the window, and major faults during it."""
    end_status = procfs.parse_status(read_text(procfs.proc_dir(root, pid) / "status") or "") or status
    insp.rss_bytes = procfs.status_kib(end_status, "VmRSS")
    if insp.rss_bytes is None and last.rss_pages:
        insp.rss_bytes = last.rss_pages * procfs.PAGE_SIZE
    insp.swap_bytes = procfs.status_kib(end_status, "VmSwap")
    insp.major_faults = last.majflt - first.majflt
    if insp.window_s and insp.window_s > 0:
        insp.major_faults_per_s = round(insp.major_faults / insp.window_s, 1)


def _summarise_children(insp: Inspection, root: Path, pid: int, sampler: _Sampler, window: _Window) -> None:
    """Children at the end of the window.

    Those there from the start get CPU% over the window, workers started
    during it (a DataLoader's first iteration) over their life so far, and
    those that exited keep their start data without a CPU figure.
    """
    hz = procfs.CLK_TCK
    start_stats = sampler.children
    end_stats: dict[int, procfs.TaskStat] = {}
    for c in sorted(set(start_stats) | set(_job_descendants(root, pid) if insp.status == "ok" else [])):
        st_end = procfs.read_pid_stat(root, c)
        if st_end is not None:
            end_stats[c] = st_end
    uptime = _uptime(root)
    total_threads = 0
    total_cpu = 0.0
    for c in sorted(set(start_stats) | set(end_stats)):
        st0 = start_stats.get(c)
        st1 = end_stats.get(c)
        if st1 is not None and (st1.state in ("Z", "X") or (st0 is not None and st1.starttime != st0.starttime)):
            st1 = None
        if st0 is None and st1 is None:
            continue
        cpu = None
        state = "running"
        if st0 is None:
            state = "new"
            age = (uptime - st1.starttime / hz) if uptime is not None else None
            span = min(window.seconds, age) if age is not None and age > 0 else None
            if span:
                cpu = round(st1.cpu_ticks / hz / span * 100, 1)
        elif st1 is None:
            state = "exited"
        elif window.seconds > 0:
            cpu = round((st1.cpu_ticks - st0.cpu_ticks) / hz / window.seconds * 100, 1)
        st = st1 or st0
        if cpu is not None:
            total_cpu += cpu
        if state != "exited":
            total_threads += st.num_threads
        runnable = sampler.child_runnable.get(c)
        insp.children.append(ChildProcess(
            pid=c, name=st.comm, cmdline=_join_cmd(procfs.read_cmdline(root, c), 200),
            threads=st.num_threads, cpu_percent=cpu, rss_bytes=st.rss_pages * procfs.PAGE_SIZE,
            runnable_mean=round(runnable / insp.samples, 2) if runnable is not None and insp.samples else None,
            state=state,
        ))
    if insp.children:
        insp.children_threads = total_threads
        insp.children_cpu_percent = round(total_cpu, 1)
    new = [c.pid for c in insp.children if c.state == "new"]
    if new:
        insp.notes.append(f"{len(new)} child process(es) started during the window (e.g. DataLoader workers "
                          "starting an epoch): their CPU% covers only their life so far")


def _place_on_topology(insp: Inspection, root: Path, topology: Topology | None) -> None:
    """Map each thread's CPU to its core, L3 and NUMA node (the topology is probed when not given)."""
    if topology is None:
        try:
            from cpudoctor.probes.cpu.topology import probe_topology

            topology = probe_topology(root)
        except Exception as exc:  # noqa: BLE001 - a topology failure must not lose the inspection
            insp.notes.append(f"topology unknown ({exc}): threads are not mapped to L3/NUMA")
    place_threads(insp, topology)
    if not insp.topology_known:
        insp.notes.append("topology unknown: threads are shown by CPU number only")


# --- the picker's process list -----------------------------------------------------------


BUSY_PERCENT = 5.0          # a process using this much of one CPU in the listing's window is worth showing


def candidates(entries: list[ProcessEntry], everything: bool = False) -> tuple[list[ProcessEntry], int]:
    """(what a picker shows first, how many it leaves out): Python processes and busy ones, the rest on request.

    A training job is a Python process or, when it runs under another name (a launcher, a compiled
    binary), a busy one; the seventy idle daemons of a desktop are noise in between.
    """
    if everything:
        return list(entries), 0
    shown = [e for e in entries if e.is_python or (e.cpu_percent or 0.0) >= BUSY_PERCENT]
    return shown, len(entries) - len(shown)


def _snapshot(root: Path) -> dict[int, procfs.TaskStat]:
    return procfs.read_all_stats(root)


def list_processes(
    root: Path = Path("/"),
    interval: float = 0.3,
    exclude_self: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[ProcessEntry]:
    """Processes for the picker: Python ones first, then the others, each by CPU% (busiest first).

    Kernel threads are left out, and with ``exclude_self`` (the default) so
    are the caller and everything it started (the GUI's own lab children).
    """
    root = Path(root)
    t0 = clock()
    before = _snapshot(root)
    if interval > 0:
        sleep(interval)
    t1 = clock()
    after = _snapshot(root)
    excluded: set[int] = set()
    if exclude_self:
        me = os.getpid()
        excluded = {me, *procfs.descendants(root, me, after)}
    my_uid = os.geteuid() if hasattr(os, "geteuid") else None
    hz = procfs.CLK_TCK
    entries: list[ProcessEntry] = []
    for pid, st in after.items():
        if pid in excluded or st.kernel_thread or st.state in ("Z", "X"):
            continue
        cmd = procfs.read_cmdline(root, pid)
        prev = before.get(pid)
        cpu = None
        if prev is not None and prev.starttime == st.starttime and t1 > t0:
            cpu = round((st.cpu_ticks - prev.cpu_ticks) / hz / (t1 - t0) * 100, 1)
        status = procfs.parse_status(read_text(procfs.proc_dir(root, pid) / "status") or "")
        uid = procfs.status_uid(status)
        rss = procfs.status_kib(status, "VmRSS")
        entries.append(ProcessEntry(
            pid=pid, name=st.comm, cmdline=_join_cmd(cmd, 300) or f"[{st.comm}]",
            is_python=_is_python(cmd, st.comm), threads=st.num_threads, cpu_percent=cpu,
            rss_bytes=rss if rss is not None else st.rss_pages * procfs.PAGE_SIZE,
            own=(uid is None or my_uid is None or my_uid == 0 or uid == my_uid),
        ))
    entries.sort(key=lambda e: (not e.is_python, -(e.cpu_percent or 0.0), e.pid))
    return entries


# --- live markers ------------------------------------------------------------------------------


class ThreadTracker:
    """Where each thread of a process is now, cheaply: one stat read per thread per poll.

    Used for the topology map's live markers; CPU% is the change since the
    previous poll. ``poll`` returns None once the process is gone (or the PID
    was reused).
    """

    def __init__(self, pid: int, root: Path = Path("/"), clock: Callable[[], float] = time.monotonic):
        self.pid = pid
        self.root = Path(root)
        self.clock = clock
        self._starttime: int | None = None
        self._prev: dict[int, int] = {}
        self._prev_t: float | None = None

    def poll(self) -> list[ThreadPlace] | None:
        st = procfs.read_pid_stat(self.root, self.pid)
        if st is None:
            return None
        if self._starttime is None:
            self._starttime = st.starttime
        elif st.starttime != self._starttime or st.state in ("Z", "X"):
            return None
        now = self.clock()
        tasks = procfs.read_task_stats(self.root, self.pid)
        span = now - self._prev_t if self._prev_t is not None else 0.0
        out = []
        for tid in sorted(tasks):
            ts = tasks[tid]
            prev = self._prev.get(tid)
            pct = None
            if prev is not None and span > 0:
                pct = round((ts.cpu_ticks - prev) / procfs.CLK_TCK / span * 100, 1)
            out.append(ThreadPlace(tid, ts.comm, ts.processor, pct))
        self._prev = {tid: ts.cpu_ticks for tid, ts in tasks.items()}
        self._prev_t = now
        return out
