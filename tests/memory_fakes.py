"""Fake /proc and cgroup files for the memory tests, in the kernel's own formats (proc(5), cgroup-v1/v2 docs)."""

from __future__ import annotations

from pathlib import Path

MiB = 1 << 20
GiB = 1 << 30


def rollup_text(rss: int, pss: int, private: int, shared: int = 0, swap: int = 0, swap_pss: int = 0) -> str:
    """/proc/PID/smaps_rollup (bytes in, kB out; private split into clean and dirty as the kernel does)."""
    kib = lambda n: f"{n // 1024:>8} kB"  # noqa: E731
    return ("55f0c0a4e000-7ffd8a3f2000 ---p 00000000 00:00 0                          [rollup]\n"
            f"Rss:            {kib(rss)}\nPss:            {kib(pss)}\nPss_Anon:       {kib(private)}\n"
            f"Shared_Clean:   {kib(shared)}\nShared_Dirty:   {kib(0)}\nPrivate_Clean:  {kib(private // 8)}\n"
            f"Private_Dirty:  {kib(private - private // 8)}\nReferenced:     {kib(rss)}\nAnonymous:      {kib(private)}\n"
            f"Swap:           {kib(swap)}\nSwapPss:        {kib(swap_pss)}\nLocked:         {kib(0)}\n")


def write_memory(proc_dir: Path, *, rss: int, hwm: int | None = None, swap: int = 0, private: int | None = None,
                 shared: int = 0, pss: int | None = None) -> None:
    """A process's status memory lines and its smaps_rollup (other status lines kept)."""
    status = proc_dir / "status"
    keep = [line for line in status.read_text().splitlines() if not line.startswith(("VmRSS", "VmHWM", "VmSwap",
                                                                                     "RssAnon", "RssFile", "RssShmem"))]
    private = rss - shared if private is None else private
    keep += [f"VmHWM:\t{(hwm or rss) // 1024} kB", f"VmRSS:\t{rss // 1024} kB", f"RssAnon:\t{private // 1024} kB",
             f"RssFile:\t{shared // 1024} kB", "RssShmem:\t0 kB", f"VmSwap:\t{swap // 1024} kB"]
    status.write_text("\n".join(keep) + "\n")
    (proc_dir / "smaps_rollup").write_text(rollup_text(rss, pss if pss is not None else private + shared // 2, private,
                                                       shared, swap))


def psi_text(some_total_us: int, full_total_us: int = 0, some_avg10: float = 0.0, full_avg10: float = 0.0) -> str:
    return (f"some avg10={some_avg10:.2f} avg60=0.00 avg300=0.00 total={some_total_us}\n"
            f"full avg10={full_avg10:.2f} avg60=0.00 avg300=0.00 total={full_total_us}\n")


def vmstat_text(pswpin: int = 0, pswpout: int = 0, oom_kill: int = 0) -> str:
    return f"nr_free_pages 123456\npgmajfault 10\npswpin {pswpin}\npswpout {pswpout}\noom_kill {oom_kill}\n"


def meminfo_text(total: int, available: int, swap_total: int = 0, swap_free: int = 0) -> str:
    return (f"MemTotal:       {total // 1024} kB\nMemFree:        {available // 2048} kB\n"
            f"MemAvailable:   {available // 1024} kB\nSwapTotal:      {swap_total // 1024} kB\n"
            f"SwapFree:       {swap_free // 1024} kB\n")


def machine(root: Path, *, total: int = 16 * GiB, available: int = 12 * GiB, wsl: bool = False) -> None:
    """The machine-wide files: meminfo, vmstat, PSI, /proc/version."""
    proc = root / "proc"
    (proc / "pressure").mkdir(parents=True, exist_ok=True)
    (proc / "meminfo").write_text(meminfo_text(total, available))
    (proc / "vmstat").write_text(vmstat_text())
    (proc / "pressure" / "memory").write_text(psi_text(0))
    version = ("Linux version 5.15.167.4-microsoft-standard-WSL2 (root@1) (gcc) #1 SMP" if wsl
               else "Linux version 6.1.0-26-amd64 (debian-kernel@lists.debian.org) #1 SMP")
    (proc / "version").write_text(version + "\n")


def cgroup_v2(root: Path, rel: str, *, limit: int | None, parent_limit: int | None = None, current: int = 0,
              peak: int | None = None, events: dict[str, int] | None = None, file: int = 0,
              high: int | None = None) -> Path:
    """A cgroup v2 tree with the memory controller; ``rel`` like ``system.slice/train.scope``."""
    base = root / "sys/fs/cgroup"
    base.mkdir(parents=True, exist_ok=True)
    (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    leaf = base / rel.strip("/")
    leaf.mkdir(parents=True, exist_ok=True)
    if parent_limit is not None:
        (leaf.parent / "memory.max").write_text(f"{parent_limit}\n")
    (leaf / "memory.max").write_text("max\n" if limit is None else f"{limit}\n")
    (leaf / "memory.high").write_text("max\n" if high is None else f"{high}\n")
    (leaf / "memory.current").write_text(f"{current}\n")
    if peak is not None:
        (leaf / "memory.peak").write_text(f"{peak}\n")
    ev = {"low": 0, "high": 0, "max": 0, "oom": 0, "oom_kill": 0, "oom_group_kill": 0, **(events or {})}
    (leaf / "memory.events").write_text("".join(f"{k} {v}\n" for k, v in ev.items()))
    (leaf / "memory.stat").write_text(f"anon {current - file}\nfile {file}\n")
    (leaf / "memory.pressure").write_text(psi_text(0))
    return leaf


def cgroup_v1(root: Path, rel: str, *, limit: int | None, usage: int = 0, max_usage: int = 0, oom_kill: int = 0,
              failcnt: int = 0, cache: int = 0) -> Path:
    base = root / "sys/fs/cgroup/memory"
    base.mkdir(parents=True, exist_ok=True)
    (base / "memory.usage_in_bytes").write_text("999999999\n")
    (base / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    leaf = base / rel.strip("/")
    leaf.mkdir(parents=True, exist_ok=True)
    (leaf / "memory.limit_in_bytes").write_text(f"{limit if limit is not None else 9223372036854771712}\n")
    (leaf / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (leaf / "memory.max_usage_in_bytes").write_text(f"{max_usage}\n")
    (leaf / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {oom_kill}\n")
    (leaf / "memory.failcnt").write_text(f"{failcnt}\n")
    (leaf / "memory.stat").write_text(f"cache {cache}\nrss {usage - cache}\ntotal_cache {cache}\n")
    return leaf
