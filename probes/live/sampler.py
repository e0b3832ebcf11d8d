"""Live sampler: per-CPU load, clocks, CPU temperatures and memory, one cheap call per tick.

No Qt here: the GUI drives :class:`Sampler` from a QTimer, a benchmark or a test
drives it directly. Every call is non-blocking (no ``interval`` sleeps): load is
the change in ``cpu_times`` since the previous call, like psutil's
``cpu_percent(interval=None, percpu=True)`` but with the previous times kept in
this object instead of a psutil module global, so a second sampler (or any other
code calling ``cpu_percent``) cannot steal the interval.

On Linux, clocks and temperatures are read from a few sysfs files found once at
start (``psutil.sensors_temperatures()`` reads every hwmon chip, NVMe and GPU
included, which costs milliseconds per tick on big servers). Elsewhere psutil's
portable calls are used. A sensor that is missing (VM, container, macOS) gives
``None``/empty, never zero, and is logged once per change of state, not per tick.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from cpudoctor.kits.rooted import list_dir, read_int, read_text, under
from cpudoctor.kits.cpulist import parse_cpulist
from cpudoctor.probes.live.sample import Sample

log = logging.getLogger(__name__)

# hwmon chips that measure the CPU itself, in order of preference. k10temp is
# AMD's (Tctl = control temperature, Tccd1.. = per chiplet), zenpower is its
# out-of-tree replacement, coretemp is Intel's, the rest are ARM SoCs.
CPU_HWMON_CHIPS: tuple[str, ...] = ("k10temp", "zenpower", "coretemp", "cpu_thermal", "cpu-thermal", "soc_thermal")
# Why there is no CPU temperature, per OS: an explanation, not a fault.
TEMPS_UNAVAILABLE: dict[str, str] = {
    "win32": ("Windows gives programs no CPU temperature without a kernel driver of their own (psutil has none "
              "there): AMD Ryzen Master or HWiNFO show it"),
    "darwin": ("macOS shows CPU temperatures only to administrators (powermetrics), and psutil has none there"),
    "linux": "no k10temp/coretemp sensor (virtual machine, container, or driver not loaded)",
}


def temps_unavailable_reason(platform: str = sys.platform) -> str:
    """Why a machine running ``platform`` (``sys.platform``) shows no CPU temperature."""
    return TEMPS_UNAVAILABLE.get("linux" if platform.startswith("linux") else platform,
                                 "psutil reads no CPU temperature on this operating system")


# coretemp reports one value per core; the package value is the one that matters
# at a glance and the per-core values would swamp the plot on a 60-core Xeon.
_CORETEMP_KEEP = re.compile(r"^Package id \d+$")


@dataclass(frozen=True)
class _TempInput:
    key: str        # "k10temp Tctl"
    path: Path      # .../temp1_input (millidegrees)


def _busy_total(times) -> tuple[float, float]:
    """(busy, total) seconds of one CPU, counted the way psutil's cpu_percent counts them."""
    total = sum(times)
    if sys.platform.startswith("linux"):
        # guest time is already included in user/nice on Linux
        total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


class Sampler:
    """Takes :class:`~cpudoctor.probes.live.sample.Sample` objects; cheap enough for 10 Hz."""

    # With no CPU sensor found, look for one again this often (a driver may load later).
    REDISCOVER_S = 10.0
    # Reading clocks is normally microseconds; on some many-CPU VMs /proc/cpuinfo makes
    # the kernel sample every CPU and takes milliseconds. Then clocks are refreshed only
    # this often, so the monitor's own cost stays small.
    SLOW_CLOCKS_S = 0.005
    SLOW_CLOCKS_EVERY_S = 5.0

    def __init__(self, root: Path = Path("/")):
        self.root = Path(root)
        self._linux = sys.platform.startswith("linux")
        self._prev: list[tuple[float, float]] | None = None
        self._cpu_ids: list[int] = []
        self._temp_inputs: list[_TempInput] = []
        self._discover_at = 0.0                              # monotonic time of the next hwmon scan
        self._state: dict[str, bool] = {}
        self._freq_cache: list[float] | None = None
        self._freq_next = 0.0                                # monotonic time clocks are read again
        self._prime()

    # -- load -------------------------------------------------------------
    def _prime(self) -> None:
        """Remember the current times so the first sample covers a real interval."""
        times = psutil.cpu_times(percpu=True)
        self._prev = [_busy_total(t) for t in times]
        self._cpu_ids = self._online_ids(len(times))

    def _online_ids(self, n: int) -> list[int]:
        """Logical CPU numbers of psutil's per-CPU entries (they skip offline CPUs)."""
        if self._linux:
            ids = parse_cpulist(read_text(under(self.root, "/sys/devices/system/cpu/online")))
            if ids and len(ids) == n:
                return ids
        return list(range(n))

    def _load(self) -> list[float]:
        times = psutil.cpu_times(percpu=True)
        now = [_busy_total(t) for t in times]
        prev = self._prev
        if prev is None or len(prev) != len(now):
            # CPUs went on/offline: start a new interval, report this tick as idle-unknown
            self._cpu_ids = self._online_ids(len(now))
            self._prev = now
            return [0.0] * len(now)
        out = []
        for (b0, t0), (b1, t1) in zip(prev, now):
            dt = t1 - t0
            pct = 0.0 if dt <= 0 else (b1 - b0) / dt * 100.0
            out.append(min(100.0, max(0.0, pct)))
        self._prev = now
        return out

    # -- clocks -----------------------------------------------------------
    def _freqs(self) -> list[float] | None:
        ids = self._cpu_ids
        if self._linux:
            # Method 1: cpufreq per CPU (kHz); Method 2: "cpu MHz" of /proc/cpuinfo
            # (VMs without cpufreq; KVM shows the host's nominal clock there).
            base = under(self.root, "/sys/devices/system/cpu")
            khz = [read_int(base / f"cpu{i}" / "cpufreq" / "scaling_cur_freq") for i in ids]
            if ids and all(v is not None and v > 0 for v in khz):
                return [v / 1000.0 for v in khz]  # type: ignore[operator]
            mhz = self._cpuinfo_mhz()
            if mhz and all(i in mhz for i in ids):
                return [mhz[i] for i in ids]
            return None
        try:
            freqs = psutil.cpu_freq(percpu=True)
        except (AttributeError, NotImplementedError, OSError, RuntimeError):
            return None
        if freqs and len(freqs) == len(ids) and all(f.current > 0 for f in freqs):
            return [float(f.current) for f in freqs]
        return None

    def _cpuinfo_mhz(self) -> dict[int, float]:
        text = read_text(under(self.root, "/proc/cpuinfo")) or ""
        out: dict[int, float] = {}
        cpu: int | None = None
        for line in text.splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "processor":
                try:
                    cpu = int(value)
                except ValueError:
                    cpu = None
            elif key == "cpu MHz" and cpu is not None:
                try:
                    mhz = float(value)
                except ValueError:
                    continue
                if mhz > 0:
                    out[cpu] = mhz
        return out

    # -- temperatures -----------------------------------------------------
    def _discover_temps(self) -> list[_TempInput]:
        hwmon = under(self.root, "/sys/class/hwmon")
        by_chip: dict[str, list[_TempInput]] = {}
        for entry in list_dir(hwmon):
            d = hwmon / entry
            name = read_text(d / "name")
            if name not in CPU_HWMON_CHIPS:
                continue
            inputs = []
            for f in list_dir(d):
                m = re.fullmatch(r"temp(\d+)_input", f)
                if not m:
                    continue
                label = read_text(d / f"temp{m.group(1)}_label") or f"temp{m.group(1)}"
                if name == "coretemp" and not _CORETEMP_KEEP.match(label):
                    continue
                inputs.append(_TempInput(f"{name} {label}", d / f))
            inputs.sort(key=lambda t: (len(t.key), t.key))
            by_chip.setdefault(name, []).extend(inputs)
        # several sockets give several chips of the same name: disambiguate by order
        result: list[_TempInput] = []
        for chip in CPU_HWMON_CHIPS:
            items = by_chip.get(chip, [])
            seen: dict[str, int] = {}
            for t in items:
                n = seen.get(t.key, 0)
                seen[t.key] = n + 1
                result.append(t if n == 0 else _TempInput(f"{t.key} #{n + 1}", t.path))
        return result

    def _temps(self) -> dict[str, float]:
        if not self._linux:
            read = getattr(psutil, "sensors_temperatures", None)
            if read is None:
                return {}
            try:
                found = read()
            except (OSError, RuntimeError):
                return {}
            out = {}
            for chip in CPU_HWMON_CHIPS:
                for i, t in enumerate(found.get(chip, [])):
                    if t.current is not None and t.current > 0:
                        out[f"{chip} {t.label or f'temp{i + 1}'}"] = float(t.current)
            return out
        now = time.monotonic()
        if not self._temp_inputs and now >= self._discover_at:
            self._temp_inputs = self._discover_temps()
            self._discover_at = now + self.REDISCOVER_S
        out = {}
        for t in self._temp_inputs:
            milli = read_int(t.path)
            if milli is not None and milli > 0:
                out[t.key] = milli / 1000.0
        if self._temp_inputs and not out:
            # the driver went away (module unloaded): scan again later
            self._temp_inputs = []
        return out

    # -- one tick ---------------------------------------------------------
    def _note(self, what: str, available: bool, why: str) -> None:
        """Log a sensor's availability once per change of state, never per tick."""
        before = self._state.get(what)
        if before == available:
            return
        self._state[what] = available
        if available:
            if before is not None:
                log.info("%s available again", what)
        else:
            log.info("%s unavailable: %s", what, why)

    def _clocks(self, now: float) -> list[float] | None:
        if now < self._freq_next:
            return self._freq_cache
        start = time.perf_counter()
        freqs = self._freqs()
        took = time.perf_counter() - start
        if took > self.SLOW_CLOCKS_S:
            if not self._state.get("slow clocks"):      # logged once, not every 5 s
                log.info("reading CPU clocks takes %.0f ms; refreshing them every %.0f s only",
                         took * 1000, self.SLOW_CLOCKS_EVERY_S)
                self._state["slow clocks"] = True
            self._freq_next = now + self.SLOW_CLOCKS_EVERY_S
        self._freq_cache = freqs
        return freqs

    def sample(self) -> Sample:
        """One non-blocking sample."""
        t = time.monotonic()
        load = self._load()
        freqs = self._clocks(t)
        self._note("CPU clocks", freqs is not None, "no cpufreq and no 'cpu MHz' (virtual machine or container?)")
        temps = self._temps()
        why_no_temps = "" if temps else temps_unavailable_reason()
        self._note("CPU temperatures", bool(temps), why_no_temps)
        mem = swap = None
        try:
            mem = psutil.virtual_memory()
            swap = psutil.swap_memory()
        except (OSError, RuntimeError) as exc:
            self._note("memory", False, str(exc))
        return Sample(
            t=t,
            cpu_ids=list(self._cpu_ids),
            cpu_percent=load,
            freq_mhz=freqs,
            temps_c=temps,
            mem_total_bytes=int(mem.total) if mem else None,
            # "used" = what is not available: the figure that predicts swapping and OOM
            mem_used_bytes=int(mem.total - mem.available) if mem else None,
            swap_total_bytes=int(swap.total) if swap else None,
            swap_used_bytes=int(swap.used) if swap else None,
            temps_unavailable=why_no_temps,
        )

    @property
    def states(self) -> dict[str, bool]:
        """Availability of each sensor as last seen (for a status line)."""
        return dict(self._state)
