"""The kernel's memory files, parsed: smaps_rollup, status, PSI, vmstat, and a process's memory cgroup.

Pure parsers plus readers that take ``root`` (a fake tree in tests, a captured one
with ``inspect --root``); every read goes through :mod:`cpudoctor.kits.rooted`
(regular files only, size-capped, contained in the tree). Figures are bytes; a
file the kernel lacks (PSI before 4.20, ``memory.peak`` before 5.19, smaps_rollup
before 4.14) gives ``None``, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.kits.cpulist import GarbledValue, parse_int
from cpudoctor.kits.rooted import read_text, under
from cpudoctor.model.memory import CgroupMemory, MemoryPressure

# A cgroup limit at or above this is "no limit" (v1 writes LONG_MAX rounded down to a page: 9223372036854771712).
UNLIMITED = 1 << 60
_MAX_KIB = 1 << 50              # a kB figure above this (a petabyte squared) is a garbled file, not memory
_MAX_COUNT = 1 << 62


def _kib(value: str) -> int | None:
    try:
        return parse_int(value, 0, _MAX_KIB) * 1024
    except GarbledValue:
        return None


def parse_kib_table(text: str | None) -> dict[str, int]:
    """``Key:   1234 kB`` lines (smaps_rollup, status) as bytes; other lines are skipped."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or len(parts) != 2 or parts[1] != "kB":
            continue
        value = _kib(parts[0])
        if value is not None:
            out[key.strip()] = value
    return out


@dataclass
class Rollup:
    """/proc/PID/smaps_rollup: the process's mappings summed by the kernel."""

    rss: int | None = None
    pss: int | None = None
    uss: int | None = None                 # Private_Clean + Private_Dirty
    shared: int | None = None              # Shared_Clean + Shared_Dirty
    swap: int | None = None
    swap_pss: int | None = None


def parse_rollup(text: str | None) -> Rollup | None:
    table = parse_kib_table(text)
    if "Rss" not in table:
        return None
    private = [table[k] for k in ("Private_Clean", "Private_Dirty") if k in table]
    shared = [table[k] for k in ("Shared_Clean", "Shared_Dirty") if k in table]
    return Rollup(rss=table.get("Rss"), pss=table.get("Pss"), uss=sum(private) if private else None,
                  shared=sum(shared) if shared else None, swap=table.get("Swap"), swap_pss=table.get("SwapPss"))


def read_rollup(root: Path, pid: int) -> Rollup | None:
    return parse_rollup(read_text(under(root, f"/proc/{pid}/smaps_rollup")))


@dataclass
class StatusMemory:
    """The memory lines of /proc/PID/status (cheap to read: no walk of the page tables)."""

    rss: int | None = None
    hwm: int | None = None
    swap: int | None = None
    anon: int | None = None
    file: int | None = None
    shmem: int | None = None


def parse_status_memory(text: str | None) -> StatusMemory | None:
    t = parse_kib_table(text)
    if "VmRSS" not in t:
        return None            # a kernel thread, a zombie, or no such process
    return StatusMemory(rss=t.get("VmRSS"), hwm=t.get("VmHWM"), swap=t.get("VmSwap"), anon=t.get("RssAnon"),
                        file=t.get("RssFile"), shmem=t.get("RssShmem"))


def read_status_memory(root: Path, pid: int) -> StatusMemory | None:
    return parse_status_memory(read_text(under(root, f"/proc/{pid}/status")))


# --- pressure stall information ---------------------------------------------------------------


@dataclass
class PsiReading:
    """One read of a PSI file: the averages and the stall totals (microseconds)."""

    source: str
    some: dict[str, float] = field(default_factory=dict)     # avg10, avg60, avg300, total
    full: dict[str, float] = field(default_factory=dict)


def parse_psi(text: str | None, source: str) -> PsiReading | None:
    """``some avg10=0.00 avg60=0.00 avg300=0.00 total=123`` (and a ``full`` line): proc(5), psi.rst."""
    reading = PsiReading(source)
    for line in (text or "").splitlines():
        kind, _, rest = line.partition(" ")
        if kind not in ("some", "full"):
            continue
        values: dict[str, float] = {}
        for item in rest.split():
            key, sep, value = item.partition("=")
            if not sep:
                continue
            try:
                number = float(value)
            except ValueError:
                continue
            if number == number and 0 <= number < _MAX_COUNT:      # not NaN, not negative, not absurd
                values[key] = number
        setattr(reading, kind, values)
    return reading if (reading.some or reading.full) else None


def pressure(first: PsiReading | None, last: PsiReading | None, window_s: float | None) -> MemoryPressure | None:
    """The kernel's averages at the end and the share of the window stalled (from the totals' rise)."""
    if last is None:
        return None
    out = MemoryPressure(source=last.source, some_avg10=last.some.get("avg10"), full_avg10=last.full.get("avg10"),
                         some_avg60=last.some.get("avg60"), full_avg60=last.full.get("avg60"))
    if first is not None and window_s and window_s > 0:
        for kind in ("some", "full"):
            a, b = getattr(first, kind).get("total"), getattr(last, kind).get("total")
            if a is not None and b is not None and b >= a:
                setattr(out, f"{kind}_share", round(min(1.0, (b - a) / 1e6 / window_s), 4))
    return out


def read_psi(root: Path, path: str) -> PsiReading | None:
    return parse_psi(read_text(under(root, path)), path)


# --- /proc/vmstat -----------------------------------------------------------------------------

VMSTAT_KEYS = ("pswpin", "pswpout", "oom_kill", "pgmajfault")


def parse_vmstat(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in VMSTAT_KEYS:
            try:
                out[parts[0]] = parse_int(parts[1], 0, _MAX_COUNT)
            except GarbledValue:
                continue
    return out


def read_vmstat(root: Path) -> dict[str, int]:
    return parse_vmstat(read_text(under(root, "/proc/vmstat")))


# --- the memory cgroup of a process -------------------------------------------------------------


def _int_file(path: Path) -> int | None:
    text = read_text(path)
    if text is None or text.strip() == "max":
        return None
    try:
        value = parse_int(text.strip(), 0, _MAX_COUNT)
    except GarbledValue:
        return None
    return value if value < UNLIMITED else None


def parse_events(text: str | None) -> dict[str, int]:
    """``memory.events`` (v2: low, high, max, oom, oom_kill, oom_group_kill) or v1's ``memory.oom_control``."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = parse_int(parts[1], 0, _MAX_COUNT)
            except GarbledValue:
                continue
    return out


def _clean(path: str) -> str | None:
    """A cgroup path the kernel could write (no ``.``/``..`` steps: those would only walk out of the mount)."""
    if "\0" in path or any(p in (".", "..") for p in path.split("/")):
        return None
    return path


@dataclass
class CgroupPlace:
    """Where a process's memory cgroup lives: its folder (the leaf) and its ancestors up to the mount."""

    path: str
    version: int
    dirs: list[Path]                  # leaf first, the mount root last
    psi_dir: Path | None = None       # a v2 folder with memory.pressure (the unified tree on a hybrid host)


def cgroup_place(root: Path, pid: int | str) -> CgroupPlace | None:
    """The memory cgroup of ``pid`` (``self`` too): cgroup v2 when its tree has the memory files, else v1."""
    text = read_text(under(root, f"/proc/{pid}/cgroup"))
    if not text:
        return None
    v2 = v1 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = _clean(parts[2])
        elif "memory" in parts[1].split(","):
            v1 = _clean(parts[2])

    def chain(base: Path, path: str) -> list[Path]:
        steps = [p for p in path.split("/") if p]
        dirs = [base.joinpath(*steps[:i]) for i in range(len(steps), -1, -1)]
        # Inside a cgroup namespace the path may not exist under the (namespaced) mount: its root is the cgroup.
        return [d for d in dirs if d.is_dir()] or [base]

    psi_dir = None
    if v2 is not None:
        for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            base = under(root, mount)
            if not (base / "cgroup.controllers").is_file():
                continue
            dirs = chain(base, v2)
            psi_dir = next((d for d in dirs if (d / "memory.pressure").is_file()), None)
            if any((d / "memory.current").is_file() or (d / "memory.max").is_file() for d in dirs):
                return CgroupPlace(v2, 2, dirs, psi_dir)
    if v1 is not None:
        base = under(root, "/sys/fs/cgroup/memory")
        if (base / "memory.usage_in_bytes").is_file():
            return CgroupPlace(v1, 1, chain(base, v1), psi_dir)
    return None


def _rel(root: Path, path: Path) -> str:
    inside = getattr(path, "inside", None)
    if callable(inside):
        return inside()
    try:
        return "/" + str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def read_cgroup_memory(root: Path, place: CgroupPlace) -> CgroupMemory:
    """Limits (the tightest on the way up), use, peak and event counters of one memory cgroup."""
    out = CgroupMemory(path=place.path, version=place.version)
    leaf = place.dirs[0]
    limit_name, high_name = ("memory.max", "memory.high") if place.version == 2 else ("memory.limit_in_bytes", None)
    for d in place.dirs:
        limit = _int_file(d / limit_name)
        if limit is not None and (out.limit_bytes is None or limit < out.limit_bytes):
            out.limit_bytes, out.limit_at = limit, _rel(root, d)
        if high_name:
            high = _int_file(d / high_name)
            if high is not None and (out.high_bytes is None or high < out.high_bytes):
                out.high_bytes = high
    stat = parse_events(read_text(leaf / "memory.stat"))
    # The page cache the cgroup is charged for: the kernel drops it before it kills (v2 "file", v1 "total_cache").
    out.file_bytes = stat.get("file", stat.get("total_cache", stat.get("cache")))
    if place.version == 2:
        out.current_bytes = _int_file(leaf / "memory.current")
        out.peak_bytes = _int_file(leaf / "memory.peak")
        out.swap_limit_bytes = _int_file(leaf / "memory.swap.max")
        out.events = parse_events(read_text(leaf / "memory.events"))
    else:
        out.current_bytes = _int_file(leaf / "memory.usage_in_bytes")
        out.peak_bytes = _int_file(leaf / "memory.max_usage_in_bytes")
        memsw = _int_file(leaf / "memory.memsw.limit_in_bytes")
        if memsw is not None and out.limit_bytes is not None and memsw >= out.limit_bytes:
            out.swap_limit_bytes = memsw - out.limit_bytes
        control = parse_events(read_text(leaf / "memory.oom_control"))
        events = {k: control[k] for k in ("oom_kill",) if k in control}
        failcnt = _int_file(leaf / "memory.failcnt")
        if failcnt is not None:
            events["max"] = failcnt          # v1 counts each time usage hit the limit: v2's "max" event
        out.events = events
    return out
