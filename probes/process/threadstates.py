"""Every thread of a process tree, sampled from /proc: running or waiting, with each process's setup.

The stack sampler (py-spy) sees the threads that run Python. This one sees them
all, including native-only threads (OpenMP workers) and non-Python children (a
C++ compiler started by Inductor), at a lower rate: one ``task/*/stat`` read per
thread per sample, no attaching. It also records what each process of the tree
was given: its affinity, thread count and thread variables, and the CPU time it
used, plus how busy the whole machine was (``/proc/stat``), so that "the CPU was
busy with other programs" can be told from "the job was slow".
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.kits.rooted import read_text
from cpudoctor.probes.process import procfs
from cpudoctor.probes.software.envvars import filter_thread_env

DEFAULT_RATE = 10           # thread-state samples a second
RESCAN_S = 0.5              # how often the tree is listed again (new DataLoader workers, compilers)
MAX_PROCESSES = 256         # a fork bomb must not make the sampler the bottleneck


@dataclass
class ThreadState:
    pid: int
    tid: int
    name: str
    running: int = 0            # samples in state R
    waiting: int = 0            # samples in any other state (S, D, ...)
    minflt_first: int = 0       # minor page faults at the first and the last sample
    minflt_last: int = 0

    @property
    def minor_faults(self) -> int:
        return max(0, self.minflt_last - self.minflt_first)

    @property
    def samples(self) -> int:
        return self.running + self.waiting


@dataclass
class ProcState:
    """One process of the job's tree as it was set up and what it used."""

    pid: int
    ppid: int
    name: str
    cmdline: str = ""
    is_python: bool = False
    affinity: list[int] | None = None   # the CPUs it may use, as last read (the tree's rescans read it again)
    max_threads: int = 0
    thread_vars: dict[str, str] = field(default_factory=dict)   # allow-listed thread variables
    env_readable: bool = False
    cpu_seconds: float = 0.0      # user+system time used while seen
    first_seen: float = 0.0       # seconds into the window
    last_seen: float = 0.0
    start_ticks: int = 0
    starttime: int = 0
    rss_first: int | None = None  # resident pages at the first and the last sample
    rss_last: int | None = None


@dataclass
class TreeStates:
    root_pid: int
    rate_hz: float
    window_s: float = 0.0
    samples: int = 0
    processes: dict[int, ProcState] = field(default_factory=dict)
    threads: dict[tuple[int, int], ThreadState] = field(default_factory=dict)
    machine_busy_cpus: float | None = None    # CPUs busy machine-wide on average (everything)
    online_cpus: int | None = None
    observer_cpus: float = 0.0                # what CPU Doctor and its sampler used meanwhile
    active_samples: int = 0                   # samples with at least one of the job's threads runnable
    runnable_sum: int = 0                     # runnable (state R) threads of the job, summed over active samples
    runnable_peak: int = 0
    # samples where the job had more runnable threads than CPUs while a child process ran two or more
    # of them at once: each process sized its pools for the whole machine
    oversubscribed_samples: int = 0
    child_active_samples: int = 0             # samples with a child process's thread runnable
    cpus: int | None = None                   # the CPUs the root process may use (its affinity at the start)

    @property
    def job_cpus(self) -> float:
        """CPUs the job used on average over the window (all its processes)."""
        if self.window_s <= 0:
            return 0.0
        return sum(p.cpu_seconds for p in self.processes.values()) / self.window_s

    @property
    def others_cpus(self) -> float | None:
        """CPUs other programs used on average (the machine's busy time less the job and the observer)."""
        if self.machine_busy_cpus is None:
            return None
        return max(0.0, self.machine_busy_cpus - self.job_cpus - self.observer_cpus)


def _machine_busy(root: Path) -> tuple[int, int] | None:
    """(busy jiffies, total jiffies) from the first line of /proc/stat."""
    text = read_text(procfs.under(root, "/proc/stat")) or ""
    first = text.split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        return None
    try:
        vals = [int(v) for v in first[1:9]]
    except ValueError:
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals) - idle, sum(vals)


class TreeSampler:
    """Samples the threads of ``pid`` and its descendants until :meth:`stop`."""

    def __init__(self, pid: int, root: Path = Path("/"), rate: float = DEFAULT_RATE,
                 observers: Callable[[], list[int]] | None = None, clock: Callable[[], float] = time.monotonic):
        self.pid = pid
        self.root = Path(root)
        self.interval = 1.0 / max(0.5, float(rate))
        self.clock = clock
        self.observers = observers or (lambda: [os.getpid()])
        self.result = TreeStates(pid, rate_hz=float(rate))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._tree: list[int] = []
        self._last_scan = -1e9
        self._machine0: tuple[int, int] | None = None
        self._observer0: dict[int, int] = {}

    # -- running in a thread --

    def start(self) -> None:
        self._t0 = self.clock()
        self._machine0 = _machine_busy(self.root)
        self._observer0 = self._observer_ticks()
        self._thread = threading.Thread(target=self._loop, name="cpudoctor-threadstates", daemon=True)
        self._thread.start()

    def stop(self) -> TreeStates:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._finish()
        return self.result

    def _loop(self) -> None:
        next_t = self.clock()
        while not self._stop.is_set():
            if not self.take():
                break
            next_t += self.interval
            self._stop.wait(max(0.0, next_t - self.clock()))

    # -- one sample --

    def take(self) -> bool:
        """One sample of every thread of the tree; False once the root process is gone."""
        now = self.clock() - self._t0
        if now - self._last_scan >= RESCAN_S or not self._tree:
            self._scan(now)
        if not self._tree:
            return False
        res = self.result
        total_r = 0
        multi_r_child = False
        child_r = False
        for pid in self._tree:
            tasks = procfs.read_task_stats(self.root, pid)
            proc = res.processes.get(pid)
            if not tasks or proc is None:
                continue
            running = sum(1 for ts in tasks.values() if ts.state == "R")
            total_r += running
            multi_r_child = multi_r_child or (pid != self.pid and running >= 2)
            child_r = child_r or (pid != self.pid and running >= 1)
            proc.last_seen = now
            proc.max_threads = max(proc.max_threads, len(tasks))
            main = tasks.get(pid) or next(iter(tasks.values()))
            if proc.rss_first is None:
                proc.rss_first = main.rss_pages
            proc.rss_last = main.rss_pages
            for tid, ts in tasks.items():
                key = (pid, tid)
                th = res.threads.get(key)
                if th is None:
                    th = res.threads[key] = ThreadState(pid, tid, ts.comm, minflt_first=ts.minflt)
                th.name = ts.comm
                th.minflt_last = ts.minflt
                if ts.state == "R":
                    th.running += 1
                else:
                    th.waiting += 1
        res.samples += 1
        res.window_s = now
        if total_r:
            res.active_samples += 1
            res.runnable_sum += total_r
            res.runnable_peak = max(res.runnable_peak, total_r)
            if child_r:
                res.child_active_samples += 1
            if res.cpus and total_r > res.cpus and multi_r_child:
                res.oversubscribed_samples += 1
        return procfs.read_pid_stat(self.root, self.pid) is not None

    def _scan(self, now: float) -> None:
        """List the tree again and read the setup of processes seen for the first time."""
        self._last_scan = now
        stats = procfs.read_all_stats(self.root)
        root_stat = stats.get(self.pid)
        if root_stat is None or root_stat.state in ("Z", "X"):
            self._tree = []
            return
        tree = [self.pid] + procfs.descendants(self.root, self.pid, stats)
        mine = {os.getpid()}
        self._tree = [p for p in tree if p not in mine][:MAX_PROCESSES]
        for pid in self._tree:
            st = stats.get(pid)
            if st is None:
                continue
            proc = self.result.processes.get(pid)
            if proc is not None and proc.starttime == st.starttime:
                proc.cpu_seconds = (st.cpu_ticks - proc.start_ticks) / procfs.CLK_TCK
                # the CPUs it may use now: libgomp's binding pins the main thread at `import torch`, a worker
                # may narrow itself after its start; the first sight is often before either
                now_allowed = procfs.status_cpus_allowed(
                    procfs.parse_status(read_text(procfs.proc_dir(self.root, pid) / "status") or ""))
                if now_allowed:
                    proc.affinity = now_allowed
                continue
            self.result.processes[pid] = self._describe(pid, st, now)
            if pid == self.pid and self.result.cpus is None and self.result.processes[pid].affinity:
                self.result.cpus = len(self.result.processes[pid].affinity or [])

    def _describe(self, pid: int, st: procfs.TaskStat, now: float) -> ProcState:
        pdir = procfs.proc_dir(self.root, pid)
        status = procfs.parse_status(read_text(pdir / "status") or "")
        cmd = procfs.read_cmdline(self.root, pid) or []
        env = procfs.read_reason(pdir / "environ", binary_nul=True)
        first = (cmd[0].rsplit("/", 1)[-1].lower() if cmd else "")
        # a process that started during the window counts its CPU time from its start
        started_inside = now > 0 and self.result.samples > 0
        proc = ProcState(
            pid=pid, ppid=st.ppid, name=st.comm,
            cmdline=procfs.shown_cmdline(cmd),
            is_python="python" in first or st.comm.lower().startswith("python"),
            affinity=procfs.status_cpus_allowed(status),
            max_threads=st.num_threads,
            first_seen=now, last_seen=now,
            start_ticks=0 if started_inside else st.cpu_ticks, starttime=st.starttime,
        )
        if env.text is not None:
            proc.thread_vars = filter_thread_env(procfs.parse_environ(env.text))
            proc.env_readable = True
        proc.cpu_seconds = (st.cpu_ticks - proc.start_ticks) / procfs.CLK_TCK
        return proc

    def _observer_ticks(self) -> dict[int, int]:
        out = {}
        for pid in self.observers():
            st = procfs.read_pid_stat(self.root, pid)
            if st is not None:
                out[pid] = st.cpu_ticks
        return out

    def _finish(self) -> None:
        res = self.result
        now = self.clock() - self._t0
        if res.window_s <= 0:
            res.window_s = now
        stats = procfs.read_all_stats(self.root)
        for pid, proc in res.processes.items():
            st = stats.get(pid)
            if st is not None and st.starttime == proc.starttime and st.state not in ("Z", "X"):
                proc.cpu_seconds = (st.cpu_ticks - proc.start_ticks) / procfs.CLK_TCK
        res.online_cpus = os.cpu_count()
        m1 = _machine_busy(self.root)
        if self._machine0 and m1 and m1[1] > self._machine0[1] and res.online_cpus:
            busy = m1[0] - self._machine0[0]
            total = m1[1] - self._machine0[1]
            res.machine_busy_cpus = round(busy / total * res.online_cpus, 2)
        ticks1 = self._observer_ticks()
        used = sum(t - self._observer0.get(p, t) for p, t in ticks1.items())
        if res.window_s > 0:
            res.observer_cpus = round(used / procfs.CLK_TCK / res.window_s, 3)
