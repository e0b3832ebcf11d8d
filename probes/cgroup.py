"""Cgroup limits on where and how much this process may run: cpuset and CPU quota.

A container limited to 4 CPUs on a 64-core host must be seen as 4: thread
counts derived from ``os.cpu_count()`` there oversubscribe badly. Two limits
matter and both are read here, from files under ``root`` only:

* the **cpuset** (which CPUs / memory nodes): cgroup v2 ``cpuset.cpus.effective``,
  cgroup v1 ``cpuset.cpus`` (or ``cpus`` with the ``noprefix`` option), or the
  legacy cpuset filesystem ``cpus``;
* the **CPU quota** (how much CPU time): cgroup v2 ``cpu.max`` (``"400000 100000"``
  = 4 CPUs, ``"max 100000"`` = unlimited), cgroup v1 ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us`` (quota ``-1`` = unlimited).

The mount points come from ``/proc/self/mounts`` (falling back to
``/proc/mounts``), the process's cgroup path from ``/proc/self/cgroup`` and,
for the legacy cpuset filesystem, ``/proc/self/cpuset``. This follows hwloc's
``hwloc_find_linux_cgroup_mntpnt``: a cgroup2 mount only counts for the cpuset
when its ``cgroup.controllers`` lists ``cpuset``. The quota is the smallest
limit found walking from the process's cgroup up to the mount root, because
a parent's limit caps every child.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cpudoctor.kits.cpulist import GarbledValue, parse_int
from cpudoctor.kits.rooted import read_cpulist, read_lines, read_text, under
from cpudoctor.model.topology import CgroupLimits


# cpu.max / cfs_quota_us are microseconds; the kernel caps the period at 1 s and the
# quota well below this, so anything larger is a garbled file, not a limit.
_MAX_USEC = 1 << 50


@dataclass
class Mount:
    path: str          # mount point, absolute inside the tree ("/sys/fs/cgroup")
    fstype: str        # cgroup2 | cgroup | cpuset
    options: list[str]


def read_mounts(root: Path) -> list[Mount]:
    """cgroup-related mounts, from /proc/self/mounts or /proc/mounts."""
    lines = read_lines(under(root, "/proc/self/mounts"))
    if lines is None:
        lines = read_lines(under(root, "/proc/mounts")) or []
    mounts: list[Mount] = []
    for line in lines:
        parts = line.split()
        if len(parts) < 4 or parts[2] not in ("cgroup2", "cgroup", "cpuset"):
            continue
        point = clean_cgroup_path(parts[1].replace("\\040", " "))
        if point is not None:           # the kernel writes mount points without ./.. steps
            mounts.append(Mount(point, parts[2], parts[3].split(",")))
    return mounts


def clean_cgroup_path(path: str | None) -> str | None:
    """A cgroup path as the kernel writes it (``/kubepods/pod1``), or None for one with ``.``/``..`` steps.

    The kernel never writes those; in a captured tree they would only serve to
    walk out of the cgroup mount (reads are contained in the tree anyway, see
    ``kits.rooted.under``, but the answer would be some other folder's limits).
    """
    if path is None:
        return None
    if any(p in (".", "..") for p in path.split("/")) or "\0" in path:
        return None
    return path


def read_self_cgroup(root: Path, notes: list[str] | None = None) -> dict[str, str]:
    """/proc/self/cgroup as {controller: path}; the v2 entry is under key ``""``."""
    result: dict[str, str] = {}
    for line in read_lines(under(root, "/proc/self/cgroup")) or []:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, raw = parts
        path = clean_cgroup_path(raw)
        if path is None:
            if notes is not None:
                notes.append(f"/proc/self/cgroup names the path {raw[:80]!r}, which no kernel writes "
                             "(it steps out with . or ..): ignored")
            continue
        if not controllers:
            result[""] = path
        for name in controllers.split(","):
            if name:
                result[name] = path
    return result


def _candidate_dirs(root: Path, mount: str, cg_path: str | None) -> list[Path]:
    """The process's cgroup directory under a mount, then the mount root.

    Inside a cgroup namespace the path in /proc/self/cgroup is "/" while the
    mount shows the container's own cgroup, so the mount root is the fallback.
    """
    base = under(root, mount)
    dirs = []
    if cg_path and cg_path.strip("/"):
        dirs.append(base / cg_path.strip("/"))
    dirs.append(base)
    return dirs


def _ancestors(root: Path, mount: str, cg_path: str | None) -> list[Path]:
    """The process's cgroup dir and each parent up to the mount root (child first)."""
    base = under(root, mount)
    parts = [p for p in (cg_path or "").split("/") if p]
    return [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _rel(root: Path, path: Path) -> str:
    try:
        return "/" + str(path.relative_to(root))
    except ValueError:
        return str(path)


def _read_cpuset(root: Path, mounts: list[Mount], cg: dict[str, str], limits: CgroupLimits) -> None:
    legacy_path = clean_cgroup_path(read_text(under(root, "/proc/self/cpuset")))
    for m in mounts:
        if m.fstype == "cgroup2":
            controllers = (read_text(under(root, m.path) / "cgroup.controllers") or "").split()
            if "cpuset" not in controllers:
                continue
            # v2 path: the "0::" line; old trees only kept /proc/self/cpuset (same path).
            cg_path = cg.get("", legacy_path)
            names, mems, version = (("cpuset.cpus.effective", "cpuset.cpus"),
                                    ("cpuset.mems.effective", "cpuset.mems"), "v2")
        elif m.fstype == "cpuset" or (m.fstype == "cgroup" and "cpuset" in m.options):
            cg_path = cg.get("cpuset", legacy_path)
            if m.fstype == "cpuset" or "noprefix" in m.options:
                names, mems, version = ("cpus",), ("mems",), "cpuset"
            else:
                names, mems, version = (("cpuset.effective_cpus", "cpuset.cpus"),
                                        ("cpuset.effective_mems", "cpuset.mems"), "v1")
        else:
            continue
        for d in _candidate_dirs(root, m.path, cg_path):
            for name in names:
                cpus = read_cpulist(d / name, limits.notes)
                if cpus:       # an empty v1 cpuset.cpus means "not set here"
                    limits.cpuset_cpus = cpus
                    limits.version = version
                    limits.cpuset_path = _rel(root, d / name)
                    for mname in mems:
                        mem = read_cpulist(d / mname, limits.notes)
                        if mem:
                            limits.cpuset_mems = mem
                            break
                    return


def _read_quota(root: Path, mounts: list[Mount], cg: dict[str, str], limits: CgroupLimits) -> None:
    best: tuple[float, Path] | None = None
    for m in mounts:
        if m.fstype == "cgroup2":
            for d in _ancestors(root, m.path, cg.get("")):
                text = read_text(d / "cpu.max")
                if not text:
                    continue
                parts = text.split()
                if parts[0] == "max":
                    continue
                try:
                    quota = parse_int(parts[0], 0, _MAX_USEC)
                    period = parse_int(parts[1], 1, _MAX_USEC) if len(parts) > 1 else 100_000
                except GarbledValue:
                    limits.notes.append(f"could not parse {_rel(root, d / 'cpu.max')!r}: {text!r}")
                    continue
                if quota > 0 and period > 0 and (best is None or quota / period < best[0]):
                    best = (quota / period, d / "cpu.max")
        elif m.fstype == "cgroup" and "cpu" in m.options:
            for d in _ancestors(root, m.path, cg.get("cpu")):
                q_text = read_text(d / "cpu.cfs_quota_us")
                p_text = read_text(d / "cpu.cfs_period_us")
                if q_text is None or p_text is None:
                    continue
                try:
                    quota, period = parse_int(q_text, -1, _MAX_USEC), parse_int(p_text, 1, _MAX_USEC)
                except GarbledValue:
                    limits.notes.append(f"could not parse CFS quota in {_rel(root, d)!r}")
                    continue
                if quota > 0 and period > 0 and (best is None or quota / period < best[0]):
                    best = (quota / period, d / "cpu.cfs_quota_us")
    if best is not None:
        limits.cpu_quota = best[0]
        limits.quota_path = _rel(root, best[1])


def read_cgroup_limits(root: Path = Path("/")) -> CgroupLimits:
    """The cpuset and CPU quota of this process (or of the process that captured ``root``)."""
    limits = CgroupLimits()
    mounts = read_mounts(root)
    if not mounts:
        limits.notes.append("no cgroup mounts listed in /proc/self/mounts: cgroup limits unknown")
        return limits
    cg = read_self_cgroup(root, limits.notes)
    _read_cpuset(root, mounts, cg, limits)
    _read_quota(root, mounts, cg, limits)
    return limits
