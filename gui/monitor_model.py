"""The Monitor's data without its widgets: ring buffers of live samples and the arithmetic that draws them.

:class:`MonitorHistory` keeps everything the Monitor page draws in fixed-size
ring buffers, so hours of monitoring use the same memory as a minute; the
functions group CPUs by L3 domain, resample the per-core rows onto time
columns and thin a curve to what a plot can show. No Qt: it sits beside the
application model (:mod:`cpudoctor.gui.model`) and is tested without a window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpudoctor.model import Report
from cpudoctor.probes.live.ringbuffer import RingBuffer, RingBuffer2D
from cpudoctor.probes.live.sample import Sample

# 15 minutes at the fastest rate; memory is fixed by this, whatever the run time.
CAPACITY = 9000
MAX_TEMP_SERIES = 8
GIB = 1024 ** 3
MAX_CURVE_POINTS = 800


@dataclass
class CpuGroup:
    label: str               # "CCX 0"
    cpus: list[int]          # logical CPU numbers, in display order


def cpu_groups(report: Report | None, cpu_ids: list[int]) -> list[CpuGroup]:
    """CPUs grouped by L3 domain (one CCX on AMD), in the order the heat strip shows them.

    CPUs the topology does not place go last, in an "other" group; without a
    topology everything is one group.
    """
    live = set(cpu_ids)
    groups: list[CpuGroup] = []
    placed: set[int] = set()
    domains = report.topology.l3_domains if report is not None else []
    if len(domains) > 1 or (domains and len(domains[0].cpus) < len(cpu_ids)):
        name = "CCX" if report is not None and report.topology.l3_is_ccx() else "L3"
        for i, d in enumerate(domains):
            cpus = [c for c in d.cpus if c in live and c not in placed]
            if cpus:
                groups.append(CpuGroup(f"{name} {i}", cpus))
                placed.update(cpus)
    rest = [c for c in cpu_ids if c not in placed]
    if rest:
        groups.append(CpuGroup("other" if groups else "CPUs", rest))
    return groups


def heat_columns(x: np.ndarray, rows: np.ndarray, max_columns: int = 400) -> tuple[np.ndarray, float]:
    """(image, x0): per-CPU rows resampled onto evenly spaced time columns from x0 to 0.

    ``x`` are sample times in seconds before the newest (ascending, ``x[-1] == 0``);
    ``rows`` is (samples, cpus). Sample ``i`` covers the interval (x[i-1], x[i]], so
    each column takes the first sample at or after its centre. Columns stay true to
    time when the rate changes, and an interval much longer than usual (the monitor
    was paused) is left empty (NaN) instead of being stretched.
    """
    n = x.shape[0]
    if n < 2:
        return rows.T.copy(), -1.0
    x0 = float(x[0])
    span = -x0
    usual = float(np.median(np.diff(x)))
    # as many columns as the usual rate gives over the span, capped for drawing cost
    cols = int(min(max_columns, max(n, span / usual if usual > 0 else n)))
    centres = x0 + (np.arange(cols) + 0.5) * (span / cols)
    idx = np.searchsorted(x, centres, side="left").clip(1, n - 1)
    img = rows[idx].T.copy()
    gaps = (x[idx] - x[idx - 1]) > max(3.0 * usual, 2.5)
    img[:, gaps] = np.nan
    return img, x0


def decimate(x: np.ndarray, y: np.ndarray, max_points: int = MAX_CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points, keeping each bucket's lowest and highest value (peaks stay visible).

    15 minutes at 10 Hz is 9000 samples for a plot a few hundred pixels wide:
    drawing them all costs time and shows nothing more. NaN (gaps) survive
    within a bucket only where the whole bucket is a gap.
    """
    n = x.shape[0]
    if n <= max_points:
        return x, y
    buckets = max_points // 2
    starts = np.linspace(0, n, buckets, endpoint=False).astype(np.intp)
    with np.errstate(invalid="ignore"):
        lo = np.fmin.reduceat(y, starts)
        hi = np.fmax.reduceat(y, starts)
    ends = np.append(starts[1:], n) - 1
    xs = np.empty(2 * buckets)
    ys = np.empty(2 * buckets)
    xs[0::2], xs[1::2] = x[starts], x[ends]
    ys[0::2], ys[1::2] = lo, hi
    return xs, ys


def temperature_range(history: "MonitorHistory", n: int) -> tuple[float, float]:
    """Whole tens of °C around every shown series, so the axis only moves when a line would leave it."""
    values = [buf.last(n) for buf in history.temps.values()]
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.empty(0)
    if finite.size == 0:
        return 0.0, 100.0
    return float(np.floor((finite.min() - 3) / 10) * 10), float(np.ceil((finite.max() + 3) / 10) * 10)


class MonitorHistory:
    """Ring buffers for everything the monitor draws; constant memory. No Qt."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self.cpu_ids: list[int] = []
        self.t = RingBuffer(capacity)
        self.total = RingBuffer(capacity)
        self.per_cpu: RingBuffer2D | None = None
        self.freq_avg = RingBuffer(capacity)
        self.freq_max = RingBuffer(capacity)
        self.mem_used = RingBuffer(capacity)
        self.swap_used = RingBuffer(capacity)
        self.temps: dict[str, RingBuffer] = {}
        self.last: Sample | None = None

    def clear(self) -> None:
        self.__init__(self.capacity)

    @property
    def nbytes(self) -> int:
        bufs = [self.t, self.total, self.freq_avg, self.freq_max, self.mem_used, self.swap_used,
                *self.temps.values()] + ([self.per_cpu] if self.per_cpu is not None else [])
        return sum(b.nbytes for b in bufs)

    def append(self, s: Sample) -> None:
        if s.cpu_ids != self.cpu_ids or self.per_cpu is None:
            # first sample, or CPUs went on/offline: the old rows no longer line up
            self.clear()
            self.cpu_ids = list(s.cpu_ids)
            self.per_cpu = RingBuffer2D(self.capacity, max(1, len(s.cpu_ids)))
        n_before = len(self.t)
        self.t.append(s.t)
        self.total.append(s.total_percent)
        self.per_cpu.append(s.cpu_percent)
        if s.freq_mhz:
            self.freq_avg.append(sum(s.freq_mhz) / len(s.freq_mhz) / 1000.0)    # GHz
            self.freq_max.append(max(s.freq_mhz) / 1000.0)
        else:
            self.freq_avg.append(None)
            self.freq_max.append(None)
        self.mem_used.append(s.mem_used_bytes / GIB if s.mem_used_bytes is not None else None)
        self.swap_used.append(s.swap_used_bytes / GIB if s.swap_used_bytes is not None else None)
        for key in list(s.temps_c)[:MAX_TEMP_SERIES]:
            if key not in self.temps and len(self.temps) < MAX_TEMP_SERIES:
                buf = RingBuffer(self.capacity)
                for _ in range(min(n_before, self.capacity)):
                    buf.append(None)       # no value before the sensor appeared
                self.temps[key] = buf
        for key, buf in self.temps.items():
            buf.append(s.temps_c.get(key))
        self.last = s

    def append_gap(self, t: float) -> None:
        """A row of 'no data' at time ``t``, so lines break where the monitor was paused."""
        if self.per_cpu is None or len(self.t) == 0:
            return
        self.t.append(t)
        self.per_cpu.append([])
        for buf in (self.total, self.freq_avg, self.freq_max, self.mem_used, self.swap_used,
                    *self.temps.values()):
            buf.append(None)

    def window(self, seconds: float) -> tuple[int, np.ndarray]:
        """(n, x): the newest ``n`` samples within ``seconds``, x = seconds before the newest."""
        t = self.t.last()
        if t.size == 0:
            return 0, t
        start = int(np.searchsorted(t, t[-1] - seconds, side="left"))
        x = t[start:] - t[-1]
        return x.size, x


SENSOR_DRIVERS = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "acpitz", "thinkpad", "nct6775", "it87")
TITLE_SERIES = 3          # sensors named in a plot's title; the rest are counted (all of them in its tooltip)


def sensor_name(key: str) -> str:
    """A temperature sensor as a plot legend names it: ``coretemp Package id 0`` -> ``package 0``,
    ``k10temp Tccd1`` -> ``Tccd1`` (the driver is in the tooltip)."""
    words = key.split()
    if len(words) > 1 and words[0] in SENSOR_DRIVERS:
        words = words[1:]
    text = " ".join(words)
    return text.replace("Package id ", "package ").replace("Core ", "core ") or key

