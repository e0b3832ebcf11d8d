"""A job's memory over a window: the trainer and its workers, their growth, the cgroup, pressure and swap.

:class:`MemoryWatch` is stepped by the process sampler (:func:`cpudoctor.probes.process.inspect.inspect_process`)
at each of its samples and gives a :class:`~cpudoctor.model.memory.JobMemory` at the end. Every file comes
from under ``root``, so a fake tree tests it:

* each sample: the trainer's and the workers' ``status`` (VmRSS, VmHWM, VmSwap: no page-table walk, a few
  microseconds);
* every ``smaps_every`` seconds, or less often for a big process: ``smaps_rollup`` of each (the kernel walks
  the page tables, about 10 ms per resident GiB), for unique (USS) and proportional (PSS) memory, so a worker's
  copy-on-access growth shows although its RSS does not move; the workers are listed again at the same pace,
  so a DataLoader's new workers (a new epoch) are seen;
* at the start and the end: the machine's ``/proc/vmstat`` (swap-ins, OOM kills), ``/proc/pressure/memory``,
  ``/proc/meminfo``, and the job's memory cgroup (limits, use, peak, events, its ``memory.pressure``).

Nothing here judges; the memory rules (:mod:`cpudoctor.advisor.memory_rules`) do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.kits.rooted import read_text, under
from cpudoctor.model.memory import JobMemory, MemorySample, ProcessMemory, SystemMemory
from cpudoctor.probes.process import memfiles, procfs

SMAPS_EVERY_S = 2.0          # USS/PSS of every process at most this often ...
SMAPS_COST_SHARE = 0.02      # ... and less often when reading them costs more than this share of one CPU
MAX_SAMPLES = 600            # samples kept (older ones thinned to every other one)
MAX_PROCESSES = 64           # workers followed (a pool of hundreds is counted, not read one by one)
GROWTH_MIN_WINDOW_S = 10.0   # growth is only figured over this much of the window at least


@dataclass
class _Track:
    """One process over the window."""

    pid: int
    role: str
    name: str
    starttime: int
    started_in_window: bool = False
    status: memfiles.StatusMemory | None = None
    rollup: memfiles.Rollup | None = None
    uss: list[tuple[float, int]] = field(default_factory=list)
    majflt0: int | None = None
    majflt1: int | None = None
    gone: bool = False


class MemoryWatch:
    """The memory of process ``pid`` and its descendants, one :meth:`sample` at a time; :meth:`finish` at the end."""

    def __init__(self, root: Path, pid: int, now: float, *, list_children: Callable[[], list[int]] | None = None,
                 smaps_every: float = SMAPS_EVERY_S, clock: Callable[[], float] | None = None):
        self.root, self.pid, self.t0 = Path(root), pid, now
        self.smaps_every = smaps_every
        self._list_children = list_children or (lambda: procfs.descendants(self.root, pid))
        self._clock = clock
        self._last_smaps: float | None = None
        self._smaps_cost = 0.0
        self.tracks: dict[int, _Track] = {}
        self.samples: list[MemorySample] = []
        self.generations: list[tuple[float, int]] = []     # (time, trainer RSS) when a new set of workers started
        self._stride = 1
        self._n = 0
        self.notes: list[str] = []
        self.vmstat0 = memfiles.read_vmstat(self.root)
        self.psi0 = memfiles.read_psi(self.root, "/proc/pressure/memory")
        self._cg_text = self._cgroup_text()
        self.place = memfiles.cgroup_place(self.root, pid)
        self.cg0 = memfiles.read_cgroup_memory(self.root, self.place) if self.place else None
        self.cg_psi0 = self._cgroup_psi()
        self._follow(pid, "job", first=True)
        self._refresh_children(now, first=True)
        self.sample(now)

    # -- following processes ------------------------------------------------------------------

    def _follow(self, pid: int, role: str, first: bool = False) -> _Track | None:
        st = procfs.read_pid_stat(self.root, pid)
        if st is None or st.state in ("Z", "X"):
            return None
        track = _Track(pid, role, st.comm, st.starttime, started_in_window=not first, majflt0=st.majflt,
                       majflt1=st.majflt)
        self.tracks[pid] = track
        return track

    def _refresh_children(self, now: float, first: bool = False) -> None:
        kids = [c for c in self._list_children() if c != self.pid]
        known = {pid for pid, t in self.tracks.items() if t.role == "worker"}
        new = [c for c in kids if c not in known]
        room = MAX_PROCESSES - len(self.tracks)
        if len(new) > room:
            self.notes.append(f"{len(kids)} child processes: the memory of the first {MAX_PROCESSES - 1} is read")
            new = new[:max(0, room)]
        started = [t for c in new if (t := self._follow(c, "worker", first=first)) is not None]
        if started and not first and any(t.started_in_window for t in started):
            job = self.tracks.get(self.pid)
            rss = job.status.rss if job is not None and job.status is not None else None
            if rss is not None and (not self.generations or now - self.generations[-1][0] > 1.0):
                self.generations.append((now, rss))

    # -- one sample ------------------------------------------------------------------------------

    def sample(self, now: float) -> None:
        """Read each process's status; every ``smaps_every`` seconds also its USS/PSS and the list of workers."""
        self._follow_cgroup(now)
        smaps = self._last_smaps is None or now - self._last_smaps >= max(self.smaps_every,
                                                                          self._smaps_cost / SMAPS_COST_SHARE)
        if smaps and self._last_smaps is not None:
            self._refresh_children(now)
        for track in list(self.tracks.values()):
            if track.gone:
                continue
            st = procfs.read_pid_stat(self.root, track.pid)
            if st is None or st.starttime != track.starttime or st.state in ("Z", "X"):
                track.gone = True
                continue
            track.majflt1 = st.majflt
            status = memfiles.read_status_memory(self.root, track.pid)
            if status is not None:
                track.status = status
        if smaps:
            self._read_rollups(now)
        self._record(now, smaps)

    def _read_rollups(self, now: float) -> None:
        start = self._clock() if self._clock else None
        for track in self.tracks.values():
            if track.gone:
                continue
            rollup = memfiles.read_rollup(self.root, track.pid)
            if rollup is not None:
                track.rollup = rollup
                if rollup.uss is not None:
                    track.uss.append((now - self.t0, rollup.uss))
        if start is not None:
            self._smaps_cost = max(0.0, self._clock() - start)
        self._last_smaps = now

    def _record(self, now: float, smaps: bool) -> None:
        job = self.tracks.get(self.pid)
        if job is None or job.status is None or job.status.rss is None or job.gone:
            return
        workers = [t for t in self.tracks.values() if t.role == "worker" and not t.gone]
        w_uss = sum(t.rollup.uss or 0 for t in workers if t.rollup) if smaps and workers else None
        swap = sum((t.status.swap or 0) for t in self.tracks.values() if t.status and not t.gone)
        self._n += 1
        if self._n % self._stride:
            return
        self.samples.append(MemorySample(round(now - self.t0, 3), job.status.rss, w_uss,
                                         job.rollup.uss if smaps and job.rollup else None, swap))
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]          # keep the whole window, at half the density
            self._stride *= 2

    def _cgroup_text(self) -> str:
        return read_text(under(self.root, f"/proc/{self.pid}/cgroup")) or ""

    def _follow_cgroup(self, now: float) -> None:
        """The job's memory cgroup read again: a wrapper that enters one and then execs the job (cgexec,
        ``systemd-run --scope``, a container's entry point) moves the job after the watch began, and the limit
        that kills it is the new cgroup's. Its events count from the move (the ones before were not the job's).
        One small file a sample; the cgroup's own files only when it changed."""
        text = self._cgroup_text()
        if not text or text == self._cg_text:
            return
        self._cg_text = text
        place = memfiles.cgroup_place(self.root, self.pid)
        if place is None or (self.place is not None and (place.path, place.version) == (self.place.path,
                                                                                          self.place.version)):
            return
        was = self.place.path if self.place is not None else None
        self.place = place
        self.cg0 = memfiles.read_cgroup_memory(self.root, place)
        self.cg_psi0 = self._cgroup_psi()
        self.notes.append(f"the job moved to memory cgroup {place.path} {now - self.t0:.1f} s into the window"
                          + (f" (from {was})" if was else "") + ": its limit and events are that cgroup's, from then")

    def _cgroup_psi(self) -> memfiles.PsiReading | None:
        if self.place is None or self.place.psi_dir is None:
            return None
        path = getattr(self.place.psi_dir / "memory.pressure", "inside", None)
        rel = path() if callable(path) else str(self.place.psi_dir / "memory.pressure")
        return memfiles.parse_psi(read_text(self.place.psi_dir / "memory.pressure"), rel)

    # -- the end -----------------------------------------------------------------------------------

    def finish(self, now: float) -> JobMemory:
        """What the window showed; the machine's and the cgroup's counters read once more (even after the job died)."""
        window = max(0.0, now - self.t0)
        out = JobMemory(window_s=round(window, 3), samples=list(self.samples), notes=list(self.notes))
        for track in self.tracks.values():
            out.processes.append(self._process(track))
        job = out.job
        if job is not None:
            out.rss_bytes, out.swap_bytes, out.peak_rss_bytes = job.rss_bytes, job.swap_bytes, job.peak_rss_bytes
        # What the job holds at the end: the trainer and its live workers; when no worker is left (the job or its
        # epoch ended as the window did), the workers' last readings.
        workers = [p for p in out.processes if p.role == "worker"]
        alive = [p for p in out.processes if p.role == "job"] + ([w for w in workers if not w.exited_in_window]
                                                                 or workers)
        out.total_rss_bytes = _sum(p.rss_bytes for p in alive)
        out.total_pss_bytes = _sum(p.pss_bytes for p in alive)
        out.total_uss_bytes = _sum(p.uss_bytes for p in alive)
        out.total_swap_bytes = _sum(p.swap_bytes for p in alive)
        faults = [t.majflt1 - t.majflt0 for t in self.tracks.values() if t.majflt0 is not None and t.majflt1 is not None]
        if faults and window > 0:
            out.major_faults_per_s = round(sum(faults) / window, 1)
        totals = [s.rss_bytes + (s.workers_uss_bytes or 0) for s in self.samples]
        out.peak_total_bytes = max(totals) if totals else None
        _growth(out)
        out.worker_generations = len(self.generations) + (1 if any(not t.started_in_window for t in self.tracks.values()
                                                                   if t.role == "worker") else 0)
        if len(self.generations) >= 2:
            rises = [b[1] - a[1] for a, b in zip(self.generations, self.generations[1:])]
            out.growth_per_epoch_bytes = int(sum(rises) / len(rises))
        out.system = self._system(window)
        if self.place is not None:
            out.cgroup = memfiles.read_cgroup_memory(self.root, self.place)
            if self.cg0 is not None:
                out.cgroup.events_in_window = {k: v - self.cg0.events.get(k, 0) for k, v in out.cgroup.events.items()
                                               if v - self.cg0.events.get(k, 0) > 0}
            out.cgroup.pressure = memfiles.pressure(self.cg_psi0, self._cgroup_psi(), window)
        else:
            out.notes.append("the job's memory cgroup is unknown (no memory controller found for it): its limit, "
                             "use and events are not shown")
        if not any(p.uss_bytes is not None for p in out.processes):
            out.notes.append("unique and shared memory unknown: /proc/PID/smaps_rollup unreadable (Linux 4.14+, "
                             "the process's owner or root)")
        return out

    def _process(self, t: _Track) -> ProcessMemory:
        st, ro = t.status or memfiles.StatusMemory(), t.rollup
        p = ProcessMemory(pid=t.pid, role=t.role, name=t.name, rss_bytes=st.rss, peak_rss_bytes=st.hwm,
                          anon_bytes=st.anon, file_bytes=st.file, shmem_bytes=st.shmem, swap_bytes=st.swap,
                          started_in_window=t.started_in_window, exited_in_window=t.gone)
        if ro is not None:
            p.uss_bytes, p.pss_bytes, p.shared_bytes, p.swap_pss_bytes = ro.uss, ro.pss, ro.shared, ro.swap_pss
            if ro.swap is not None and p.swap_bytes is None:
                p.swap_bytes = ro.swap
        if t.uss:
            p.uss_first_bytes = t.uss[0][1]
            span = t.uss[-1][0] - t.uss[0][0]
            p.read_s = round(span, 2)
            if span > 0 and len(t.uss) >= 2:
                p.uss_growth_bytes_per_s = round(_slope(t.uss), 1)
        if t.majflt0 is not None and t.majflt1 is not None:
            p.major_faults = t.majflt1 - t.majflt0
        return p

    def _system(self, window: float) -> SystemMemory:
        from cpudoctor.probes.software.osinfo import parse_meminfo, wsl_version

        mem = parse_meminfo(read_text(under(self.root, "/proc/meminfo")))
        sysmem = SystemMemory(total_bytes=mem.get("MemTotal"), available_bytes=mem.get("MemAvailable", mem.get("MemFree")),
                              swap_total_bytes=mem.get("SwapTotal"), swap_free_bytes=mem.get("SwapFree"),
                              wsl=wsl_version(read_text(under(self.root, "/proc/version"))))
        vm1 = memfiles.read_vmstat(self.root)
        if window > 0:
            for key, attr in (("pswpin", "swap_in_per_s"), ("pswpout", "swap_out_per_s")):
                if key in vm1 and key in self.vmstat0:
                    setattr(sysmem, attr, round(max(0, vm1[key] - self.vmstat0[key]) / window, 1))
        if "oom_kill" in vm1 and "oom_kill" in self.vmstat0:
            sysmem.oom_kills_in_window = max(0, vm1["oom_kill"] - self.vmstat0["oom_kill"])
        sysmem.pressure = memfiles.pressure(self.psi0, memfiles.read_psi(self.root, "/proc/pressure/memory"), window)
        return sysmem


def _sum(values) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, value) points: units per second."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / den if den > 0 else 0.0


def _r2(points: list[tuple[float, float]], slope: float) -> float:
    """How well a straight line of ``slope`` fits the points (1: all on it; 0: no better than their mean)."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    total = sum((v - mv) ** 2 for _, v in points)
    if total <= 0:
        return 0.0
    residual = sum((v - (mv + slope * (t - mt))) ** 2 for t, v in points)
    return max(0.0, 1 - residual / total)


def _median_slope(points: list[tuple[float, float]]) -> float:
    """Theil-Sen: the median of the slopes between pairs of points (a few odd points do not move it)."""
    slopes = sorted((b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points) for b in points[i + 1:] if b[0] > a[0])
    return slopes[len(slopes) // 2] if slopes else 0.0


def _growth(out: JobMemory) -> None:
    """The trainer's growth over the later half of the window (the start-up's loading and first steps left out),
    how straight it was, and whether its last quarter still rose (a leak keeps rising; a job filling its caches
    levels off)."""
    pts = [(s.t, float(s.rss_bytes)) for s in out.samples]
    if len(pts) < 6 or not out.window_s or out.window_s < GROWTH_MIN_WINDOW_S:
        return
    half = pts[0][0] + (pts[-1][0] - pts[0][0]) / 2
    later = [p for p in pts if p[0] >= half]
    quarter = [p for p in later if p[0] >= later[0][0] + (later[-1][0] - later[0][0]) / 2]
    if len(later) < 4 or len(quarter) < 2:
        return
    slope = _slope(later)
    out.growth_bytes_per_s = round(slope, 1)
    out.growth_window_s = round(later[-1][0] - later[0][0], 2)
    out.growth_fit = round(_r2(later, slope), 3)
    out.growth_still_rising = slope > 0 and _median_slope(quarter[-60:]) > 0.25 * slope


def memory_here(root: Path = Path("/"), pid: int | str = "self") -> tuple[SystemMemory, "memfiles.CgroupMemory | None"]:
    """The machine's memory and the memory cgroup of ``pid`` (CPU Doctor itself by default: a job started from
    the same shell lands in the same cgroup), for ``fit``'s budget."""
    from cpudoctor.probes.software.osinfo import parse_meminfo, wsl_version

    root = Path(root)
    mem = parse_meminfo(read_text(under(root, "/proc/meminfo")))
    system = SystemMemory(total_bytes=mem.get("MemTotal"), available_bytes=mem.get("MemAvailable", mem.get("MemFree")),
                          swap_total_bytes=mem.get("SwapTotal"), swap_free_bytes=mem.get("SwapFree"),
                          wsl=wsl_version(read_text(under(root, "/proc/version"))))
    place = memfiles.cgroup_place(root, pid)
    return system, (memfiles.read_cgroup_memory(root, place) if place is not None else None)
