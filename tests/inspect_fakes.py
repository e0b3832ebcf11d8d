"""A fake /proc (and /sys/fs/cgroup) tree for inspector tests: real files, crafted content.

Mirrors the kernel's formats (proc(5)): stat lines with the comm in
parentheses, status ``Key:\\tvalue`` lines, NUL-separated environ/cmdline,
maps lines with the path in the sixth column.
"""

from __future__ import annotations

from pathlib import Path

from cpudoctor.model import Core, L3Domain, NumaNode, Topology


def stat_line(pid: int, comm: str, *, state: str = "S", ppid: int = 1, utime: int = 0, stime: int = 0,
              processor: int = 0, num_threads: int = 1, majflt: int = 0, nice: int = 0,
              starttime: int = 1000, rss_pages: int = 256, flags: int = 0x400000) -> str:
    fields = {n: 0 for n in range(3, 53)}
    fields.update({3: state, 4: ppid, 5: pid, 6: pid, 8: -1, 9: flags, 12: majflt, 14: utime, 15: stime,
                   18: 20, 19: nice, 20: num_threads, 22: starttime, 24: rss_pages, 39: processor})
    return f"{pid} ({comm}) " + " ".join(str(fields[n]) for n in range(3, 53)) + "\n"


class FakeProc:
    """Build ``root/proc/<pid>/...`` trees; every writer can be called again to change a value."""

    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "proc").mkdir(parents=True, exist_ok=True)

    def pdir(self, pid: int) -> Path:
        return self.root / "proc" / str(pid)

    def add_process(self, pid: int, comm: str = "python", *, ppid: int = 1, cmdline: list[str] | None = None,
                    environ: dict[str, str] | None = None, maps: list[str] | None = None,
                    cpus_allowed: str = "0-7", uid: int = 1000, rss_kib: int = 204800, swap_kib: int = 0,
                    cgroup: str = "0::/user.slice/job.scope\n", threads: dict[int, dict] | None = None,
                    starttime: int = 1000, majflt: int = 0, nice: int = 0, flags: int = 0x400000) -> None:
        d = self.pdir(pid)
        (d / "task").mkdir(parents=True, exist_ok=True)
        threads = threads if threads is not None else {pid: {}}
        (d / "cmdline").write_bytes("\0".join(cmdline or ["python", "train.py"]).encode() + b"\0")
        (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in (environ or {}).items()))
        lines = []
        for i, path in enumerate(maps or []):
            lo = 0x7f0000000000 + i * 0x10000
            lines.append(f"{lo:x}-{lo + 0x1000:x} r-xp 00000000 08:01 {1000 + i}                      {path}")
        lines.append("7ffd0000-7ffd2000 rw-p 00000000 00:00 0                          [stack]")
        (d / "maps").write_text("\n".join(lines) + "\n")
        (d / "status").write_text(
            f"Name:\t{comm}\nState:\tS (sleeping)\nPPid:\t{ppid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
            f"Threads:\t{len(threads)}\nVmRSS:\t{rss_kib} kB\nVmSwap:\t{swap_kib} kB\n"
            f"Cpus_allowed:\tff\nCpus_allowed_list:\t{cpus_allowed}\n"
        )
        (d / "cgroup").write_text(cgroup)
        self._meta = getattr(self, "_meta", {})
        self._meta[pid] = dict(comm=comm, ppid=ppid, starttime=starttime, nice=nice, flags=flags)
        total_u = total_s = 0
        for tid, spec in threads.items():
            self.set_thread(pid, tid, **spec)
            total_u += spec.get("utime", 0)
            total_s += spec.get("stime", 0)
        self.set_proc_stat(pid, utime=total_u, stime=total_s, num_threads=len(threads), majflt=majflt)

    def set_proc_stat(self, pid: int, **kw) -> None:
        m = self._meta[pid]
        kw.setdefault("state", "S")
        kw.setdefault("flags", m["flags"])
        (self.pdir(pid) / "stat").write_text(stat_line(pid, m["comm"], ppid=m["ppid"], starttime=m["starttime"],
                                                       nice=m["nice"], **kw))

    def set_thread(self, pid: int, tid: int, *, comm: str | None = None, state: str = "S", utime: int = 0,
                   stime: int = 0, processor: int = 0, run_ns: int = 0, wait_ns: int = 0) -> None:
        t = self.pdir(pid) / "task" / str(tid)
        t.mkdir(parents=True, exist_ok=True)
        m = self._meta[pid]
        (t / "stat").write_text(stat_line(tid, comm or m["comm"], state=state, ppid=m["ppid"], utime=utime,
                                          stime=stime, processor=processor, starttime=m["starttime"]))
        (t / "schedstat").write_text(f"{run_ns} {wait_ns} 10\n")

    def remove_process(self, pid: int) -> None:
        import shutil

        shutil.rmtree(self.pdir(pid))

    def cgroup_v2(self, rel: str, cpu_max: str | None) -> None:
        base = self.root / "sys/fs/cgroup"
        base.mkdir(parents=True, exist_ok=True)
        (base / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        d = base / rel.strip("/")
        d.mkdir(parents=True, exist_ok=True)
        if cpu_max is not None:
            (d / "cpu.max").write_text(cpu_max + "\n")


class StepClock:
    """A fake monotonic clock whose ``sleep`` advances time and runs a callback (the tree changes)."""

    def __init__(self, on_sleep=None):
        self.t = 100.0
        self.on_sleep = on_sleep
        self.sleeps = 0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.sleeps += 1
        if self.on_sleep is not None:
            self.on_sleep(self.sleeps, self.t)


def two_ccx_topology() -> Topology:
    """8 CPUs: 2 CCXs of 2 cores x 2 SMT threads, 2 NUMA nodes (siblings n and n+4)."""
    cores = [Core(package=0, core_id=c, cpus=[c, c + 4], l3=c // 2, numa=c // 2) for c in range(4)]
    return Topology(packages=1, cores=4, logical_cpus=8, online_cpus=list(range(8)),
                    l3_domains=[L3Domain([0, 1, 4, 5], 16 << 20), L3Domain([2, 3, 6, 7], 16 << 20)],
                    numa_nodes=[NumaNode(0, [0, 1, 4, 5]), NumaNode(1, [2, 3, 6, 7])],
                    core_list=cores, smt_threads_per_core=2, l3_known=True, source="test")
