"""Parsing one process's /proc files: task stat lines, status, maps, cgroup quota.

Pure parsers plus readers that take ``root`` so tests run on a fake /proc tree.
Readers distinguish *why* a file could not be read (gone, permission, other),
because "the process exited" and "it belongs to another user" need different
advice. Field numbers follow proc(5), counted from 1.
"""

from __future__ import annotations

import errno
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cpudoctor.kits.rooted import list_dir, read_bytes_checked, read_text, under
from cpudoctor.kits.cpulist import parse_cpulist

# Clock ticks per second for utime/stime. Linux has used USER_HZ = 100 on every
# architecture for decades; sysconf gives the live value where available.
try:
    CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
    CLK_TCK = 100

PAGE_SIZE = 4096


@dataclass
class TaskStat:
    """The fields of /proc/<pid>/task/<tid>/stat (or /proc/<pid>/stat) we use."""

    tid: int
    comm: str
    state: str                 # R running/runnable, S sleeping, D disk wait, Z zombie, ...
    ppid: int
    majflt: int                # field 12
    utime: int                 # field 14, clock ticks
    stime: int                 # field 15, clock ticks
    nice: int                  # field 19
    num_threads: int           # field 20
    starttime: int             # field 22, ticks since boot
    rss_pages: int             # field 24
    processor: int | None      # field 39: CPU the task last ran on (None on ancient kernels)
    minflt: int = 0            # field 10: minor page faults (a first touch of fresh memory)
    flags: int = 0             # field 9: the kernel's PF_* flags

    @property
    def cpu_ticks(self) -> int:
        return self.utime + self.stime

    @property
    def kernel_thread(self) -> bool:
        """PF_KTHREAD: what makes a task a kernel thread, whatever its PID (inside a PID namespace PID 2 and
        its children are ordinary programs; on the host kthreadd is PID 2)."""
        return bool(self.flags & PF_KTHREAD)


PF_KTHREAD = 0x00200000        # include/linux/sched.h


class StatParseError(ValueError):
    """A stat line that does not have the proc(5) shape."""


def parse_stat(text: str) -> TaskStat:
    """Parse a stat line. ``comm`` may hold spaces and ')' so split at the LAST ')'.

    ``12 (my (odd) name) S 1 ...``: everything between the first '(' and the
    last ')' is the name; the fields after it start at field 3 (state).
    """
    text = text.strip()
    open_i = text.find("(")
    close_i = text.rfind(")")
    if open_i < 0 or close_i < open_i:
        raise StatParseError(f"no '(comm)' in stat line: {text[:60]!r}")
    try:
        tid = int(text[:open_i].strip())
    except ValueError:
        raise StatParseError(f"bad pid in stat line: {text[:60]!r}") from None
    comm = text[open_i + 1 : close_i]
    rest = text[close_i + 1 :].split()
    # rest[0] is field 3, so field N is rest[N - 3].
    if len(rest) < 22:
        raise StatParseError(f"stat line too short ({len(rest) + 2} fields): {text[:60]!r}")

    def field_(n: int) -> int:
        return int(rest[n - 3])

    try:
        return TaskStat(
            tid=tid,
            comm=comm,
            state=rest[0],
            ppid=field_(4),
            majflt=field_(12),
            utime=field_(14),
            stime=field_(15),
            nice=field_(19),
            num_threads=field_(20),
            starttime=field_(22),
            rss_pages=field_(24),
            processor=field_(39) if len(rest) >= 37 else None,
            minflt=field_(10),
            flags=field_(9),
        )
    except ValueError as exc:
        raise StatParseError(f"non-numeric field in stat line: {exc}") from None


# --- reading with a reason ----------------------------------------------------------


@dataclass
class ReadResult:
    """File text, or why it could not be read: ``gone``, ``denied`` or ``error``."""

    text: str | None
    problem: str | None = None          # None | gone | denied | error
    detail: str = ""


def read_reason(path: Path, binary_nul: bool = False) -> ReadResult:
    """Read a /proc file and keep the reason for a failure (psutil does the same split).

    ``binary_nul`` keeps NUL separators (environ, cmdline) as they are.
    """
    try:
        data = read_bytes_checked(path)     # regular files only, size-capped (a fake tree may hold a FIFO)
    except FileNotFoundError:
        return ReadResult(None, "gone", "no such file")
    except ProcessLookupError:
        return ReadResult(None, "gone", "no such process")
    except PermissionError as exc:
        return ReadResult(None, "denied", exc.strerror or "permission denied")
    except OSError as exc:
        if exc.errno in (errno.ESRCH,):
            return ReadResult(None, "gone", "no such process")
        if exc.errno in (errno.EACCES, errno.EPERM):
            return ReadResult(None, "denied", exc.strerror or "permission denied")
        return ReadResult(None, "error", exc.strerror or str(exc))
    text = data.decode("utf-8", "replace")
    return ReadResult(text if binary_nul else text.replace("\0", ""))


def proc_dir(root: Path, pid: int) -> Path:
    return under(root, f"/proc/{pid}")


def read_stat(path: Path) -> TaskStat | None:
    """A ``stat`` file parsed, or None when it is gone (the task exited) or garbled."""
    text = read_text(path)
    if not text:
        return None
    try:
        return parse_stat(text)
    except StatParseError:
        return None


def read_pid_stat(root: Path, pid: int) -> TaskStat | None:
    return read_stat(proc_dir(root, pid) / "stat")


def read_all_stats(root: Path) -> dict[int, TaskStat]:
    """Every process's stat, one scan of /proc; processes that vanish meanwhile are skipped."""
    out: dict[int, TaskStat] = {}
    for p in list_pids(root):
        st = read_pid_stat(root, p)
        if st is not None:
            out[p] = st
    return out


def read_task_stats(root: Path, pid: int) -> dict[int, TaskStat]:
    """Every thread's stat; threads that vanish between listing and reading are skipped."""
    out: dict[int, TaskStat] = {}
    task_dir = proc_dir(root, pid) / "task"
    for name in list_dir(task_dir):
        if not name.isdigit():
            continue
        st = read_stat(task_dir / name / "stat")
        if st is not None:
            out[st.tid] = st
    return out


def read_schedstat(root: Path, pid: int, tid: int) -> tuple[int, int] | None:
    """(ns on CPU, ns waiting on a run queue) from task/<tid>/schedstat, or None.

    The wait time is the direct measure of oversubscription: a thread that wants
    a CPU and cannot get one accumulates it.
    """
    text = read_text(proc_dir(root, pid) / "task" / str(tid) / "schedstat")
    if not text:
        return None
    parts = text.split()
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


def parse_status(text: str) -> dict[str, str]:
    """/proc/<pid>/status as a name -> value mapping (values stripped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def status_kib(status: dict[str, str], key: str) -> int | None:
    """``VmRSS: 1234 kB`` -> bytes."""
    value = status.get(key)
    if not value:
        return None
    try:
        return int(value.split()[0]) * 1024
    except (ValueError, IndexError):
        return None


def status_uid(status: dict[str, str]) -> int | None:
    value = status.get("Uid")
    try:
        return int(value.split()[0]) if value else None
    except (ValueError, IndexError):
        return None


def status_cpus_allowed(status: dict[str, str]) -> list[int] | None:
    return parse_cpulist(status.get("Cpus_allowed_list"))


def parse_environ(raw: str) -> dict[str, str]:
    """NUL-separated ``NAME=value`` entries (as in /proc/<pid>/environ)."""
    out: dict[str, str] = {}
    for entry in raw.split("\0"):
        name, sep, value = entry.partition("=")
        if sep and name:
            out[name] = value
    return out


def parse_maps_paths(text: str) -> list[str]:
    """Distinct file paths mapped by the process, in first-seen order.

    A maps line is ``addr perms offset dev inode pathname``; the path may hold
    spaces and may end in `` (deleted)``. Pseudo entries ([heap], [vdso]) and
    anonymous maps are skipped.
    """
    seen: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        if not path.startswith("/"):
            continue
        path = path.removesuffix(" (deleted)")
        seen.setdefault(path, None)
    return list(seen)


# --- cgroup CPU quota -----------------------------------------------------------------


@dataclass
class CgroupQuota:
    path: str | None = None            # the cgroup path of the process (no user data in it normally)
    quota_cpus: float | None = None    # tightest limit on the way up, in CPUs; None = no limit found
    limited_at: str | None = None      # the cgroup that sets that limit
    version: int | None = None         # 1 or 2
    readable: bool = False             # whether any cpu controller file was found


def _parse_cpu_max(text: str | None) -> float | None:
    """cgroup v2 ``cpu.max``: ``max 100000`` (no limit) or ``150000 100000`` (1.5 CPUs)."""
    if not text:
        return None
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100000
    except ValueError:
        return None
    return quota / period if period > 0 and quota > 0 else None


def _parents(cg_path: str) -> list[str]:
    """``/a/b/c`` -> [``/a/b/c``, ``/a/b``, ``/a``, ``/``]."""
    parts = [p for p in cg_path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts), -1, -1)]


def read_cgroup_quota(root: Path, pid: int) -> CgroupQuota:
    """The CPU quota of the cgroup the process lives in, walking up to the tightest limit.

    cgroup v1 ``cpu`` controller (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) and
    cgroup v2 (``0::/path`` -> ``/sys/fs/cgroup[/unified]/path/cpu.max``) both count.
    Inside a container the path is relative to the container's own mount, which
    is what /sys/fs/cgroup shows there, so the same walk works.
    """
    text = read_text(proc_dir(root, pid) / "cgroup")
    out = CgroupQuota()
    if not text:
        return out
    v2_path = None
    v1_path = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier, controllers, path = parts
        if hier == "0" and controllers == "":
            v2_path = path
        elif "cpu" in controllers.split(","):
            v1_path = (controllers, path)
    best: float | None = None
    best_at: str | None = None
    # Hybrid hosts list both a v2 line and v1 controllers; the v2 tree may be
    # mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified. Every limit found counts.
    if v1_path is not None:
        controllers, path = v1_path
        out.path = path
        for mount in dict.fromkeys((controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu")):
            base = under(root, f"/sys/fs/cgroup/{mount}")
            if not (base / "cpu.cfs_quota_us").is_file():
                continue
            out.readable, out.version = True, 1
            for cg in _parents(path):
                d = base / cg.lstrip("/")
                quota = read_text(d / "cpu.cfs_quota_us")
                period = read_text(d / "cpu.cfs_period_us")
                if quota is None:
                    continue
                out.readable, out.version = True, 1
                try:
                    q, p = int(quota), int(period or "100000")
                except ValueError:
                    continue
                if q > 0 and p > 0 and (best is None or q / p < best):
                    best, best_at = q / p, cg
            break
    if v2_path is not None:
        out.path = out.path or v2_path
        for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            base = under(root, mount)
            if not (base / "cgroup.controllers").is_file():
                continue
            out.readable = True            # the root cgroup has no cpu.max: no file = no limit
            out.version = out.version or 2
            for cg in _parents(v2_path):
                value = read_text(base / cg.lstrip("/") / "cpu.max")
                if value is None:
                    continue
                out.readable = True
                out.version = out.version or 2
                q = _parse_cpu_max(value)
                if q is not None and (best is None or q < best):
                    best, best_at = q, cg
                    out.path = v2_path
    out.quota_cpus = best
    out.limited_at = best_at
    return out


def usable_cpus(allowed: list[int] | None, quota_cpus: float | None) -> int | None:
    """min(len(affinity), ceil(quota)): the CPUs a thread count must respect."""
    counts: list[int] = []
    if allowed:
        counts.append(len(allowed))
    if quota_cpus:
        counts.append(max(1, math.ceil(quota_cpus - 1e-9)))
    return min(counts) if counts else None


# --- privacy ---------------------------------------------------------------------------

_HOME_RE = re.compile(r"(?:/home|/Users|/var/home)/[^/\s'\"=:]+|/root(?=/|\s|$)")


def redact_paths(text: str) -> str:
    """Replace home folders (``/home/alice``, ``/root``) with ``~``: reports get pasted publicly."""
    return _HOME_RE.sub("~", text)


REDACTED = "<redacted>"
_ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]{0,63})=(.*)", re.DOTALL)
_NUMBER_RE = re.compile(r"-[0-9.]+")
_PYTHON_RE = re.compile(r"(python|pypy)[0-9.]*[a-z]?(\.exe)?|ipykernel_launcher|pytest|torchrun|accelerate|deepspeed",
                        re.IGNORECASE)


def redact_args(args: list[str]) -> list[str]:
    """A command line as it may be shown (see :func:`_allowed_args`), and no URL's userinfo in what is kept."""
    return _without_url_passwords(_allowed_args(args))


def _allowed_args(args: list[str]) -> list[str]:
    """A command line kept by allow-list, everything else ``<redacted>``.

    Kept: the program, the script or module it runs (``train.py``, ``-m torch.distributed.run``),
    the names of flags, and the values of the flags in ``resources/shown_settings.json``
    (threads, workers, batch size, dtype ...) when they look like a number or a short word.
    Replaced: every other value and positional argument: ``--key sk-…``, ``--pw …``,
    ``-p …``, ``--wandb-key …``, ``postgres://u:PASSWORD@h/x``, ``-pPASSWORD``. Training
    scripts take keys on the command line often enough that no keyword list can be trusted.
    """
    from cpudoctor.probes.software.envvars import shown_settings, shown_value

    if not args:
        return []
    allow = shown_settings()
    flags, value_ok, scripts = allow["flags"], allow["value_shape"], allow["script_suffixes"]

    def value(flag: str | None, text: str) -> str:
        if flag == "-c" and runs_python and any(rx.fullmatch(text) for rx in allow["python_code"]):
            return text                               # multiprocessing's own worker stanza
        return text if flag in flags and value_ok.fullmatch(text) else REDACTED

    out = [args[0]]
    runs_python = bool(_PYTHON_RE.fullmatch(args[0].replace("\\", "/").rsplit("/", 1)[-1]))
    pending: str | None = None            # a flag whose value may be the next argument
    script_seen = only_positionals = False
    for arg in args[1:]:
        is_flag = (not only_positionals and arg.startswith("-") and len(arg) > 1
                   and not _NUMBER_RE.fullmatch(arg))
        if arg == "--" and not only_positionals:
            out.append(arg)
            only_positionals, pending = True, None
            continue
        if is_flag:
            name, eq, rest = arg.partition("=")
            if eq:
                out.append(f"{name}={value(name, rest)}")
                pending = None
            elif not arg.startswith("--") and len(arg) > 2 and arg not in flags:
                out.append(arg[:2] + REDACTED)        # -pPASSWORD, -Xmx4g: the value is glued on
                pending = None
            else:
                out.append(arg)
                pending = arg
            continue
        if arg.lower().endswith(scripts) and (not script_seen or pending is None):
            out.append(arg)                           # the script a launcher or interpreter runs
            script_seen, pending = True, None
            continue
        if pending is not None:
            out.append(value(pending, arg))
            if pending in ("-m", "-c") and runs_python:
                script_seen = True                    # python -m module / -c code: that is the script
            pending = None
            continue
        if runs_python and not script_seen and not only_positionals:
            out.append(arg)                           # python's first positional is its script
            script_seen = True
            continue
        m = _ASSIGNMENT_RE.fullmatch(arg)
        if m:                                         # env-style NAME=value, hydra-style key=value
            shown = shown_value(m.group(1), m.group(2))
            out.append(f"{m.group(1)}={m.group(2) if shown != 'set' else REDACTED}")
            continue
        out.append(REDACTED)
    return out


# scheme://user:password@host: the userinfo of a URL, whatever else is shown of the argument.
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/?#@\s]*@")


def _without_url_passwords(args: list[str]) -> list[str]:
    """Every kept argument with a URL's userinfo replaced (``postgres://u:secret@h/x`` -> ``postgres://<redacted>@h/x``):
    a program or script name shown as it is may still be a URL that carries a password."""
    return [_URL_USERINFO.sub(rf"\1{REDACTED}@", a) if "@" in a else a for a in args]


def shown_cmdline(args: list[str] | None, limit: int = 300) -> str:
    """A process's command line as one line that may be shown anywhere: :func:`redact_args` (no values a
    flag list does not allow, no URL's password), whitespace inside an argument folded, homes as ``~``."""
    return " ".join(" ".join(a.split()) for a in shown_argv(args or []))[:limit]


def shown_argv(args: list[str]) -> list[str]:
    """``args`` as they may be shown, one entry per argument: :func:`redact_args`, then home folders as ``~``."""
    return [redact_paths(a) for a in redact_args(args)]


def read_cmdline(root: Path, pid: int) -> list[str] | None:
    r = read_reason(proc_dir(root, pid) / "cmdline", binary_nul=True)
    if r.text is None:
        return None
    args = r.text.split("\0")
    while args and args[-1] == "":
        args.pop()
    return args


def list_pids(root: Path) -> list[int]:
    return sorted(int(n) for n in list_dir(under(root, "/proc")) if n.isdigit())


def descendants(root: Path, pid: int, stats: dict[int, TaskStat] | None = None) -> list[int]:
    """All descendants of ``pid`` (children, grandchildren, ...), scanning /proc/*/stat once."""
    if stats is None:
        stats = read_all_stats(root)
    children: dict[int, list[int]] = {}
    for p, st in stats.items():
        children.setdefault(st.ppid, []).append(p)
    out: list[int] = []
    stack = list(children.get(pid, []))
    while stack:
        c = stack.pop()
        if c in out or c == pid:
            continue
        out.append(c)
        stack.extend(children.get(c, []))
    return sorted(out)
