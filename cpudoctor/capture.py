"""Pack the /proc and /sys files the probes read into a tarball, like hwloc-gather-topology.

``cpudoctor report --root EXTRACTED`` on another machine then gives the same
CPU, topology, OS and software answers as on this one. What goes in:

* the files the probes really read on this machine, recorded by running them
  in a child process under a Python audit hook (``open``/``listdir`` events),
  so the capture follows the probes as they evolve; plus
* a fixed list in the spirit of hwloc-gather-topology (cpuinfo, topology,
  caches, cpufreq, NUMA nodes, cgroup limits), so a capture is complete even
  when a probe skipped a file on this machine.

A capture of this machine also carries ``environment.json``: the software
side the doctor sees here, for the chosen Python environment (interpreter and
version, packages and versions, the PyTorch build, BLAS libraries, import
checks, the thread variables a shared report keeps: known knobs with their
values, others by name only) and the CPUID check, redacted like a shared
report (no host or user names, home folders as ``~``). Under ``--root`` the
software probe reads it back (:mod:`cpudoctor.probes.software.captured`), so
the findings about the software are the ones ``doctor`` gives on the machine.

The files are filtered through an allowlist: nothing outside CPU/NUMA/cgroup/OS
release facts, DMI *names* only (never serials or UUIDs), ``/proc/self/status``
cut down to its CPU/memory-affinity lines, mount tables cut down to cgroup
mounts (they otherwise list home folders). Symlinks that the probes follow
(``cpuN/cpufreq -> ../cpufreq/policyN``, ``/sys/class/dmi/id``) are kept as
links next to the files they point to.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import platform
import posixpath
import re
import stat
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor import __version__
from cpudoctor.probes.software.captured import ENVIRONMENT_FILE
from cpudoctor.kits.rooted import is_live_root

# (glob relative to the root) — the hwloc-gather-topology style fixed list.
STATIC_GLOBS = (
    "proc/cpuinfo", "proc/meminfo", "proc/version", "proc/swaps", "proc/sys/kernel/osrelease",
    "proc/self/status", "proc/self/cgroup", "proc/self/cpuset", "proc/self/mounts", "proc/mounts", "proc/1/cgroup",
    "proc/hwloc-nofile-info",
    "etc/os-release", "usr/lib/os-release",
    "sys/devices/system/cpu/*", "sys/devices/system/cpu/smt/*", "sys/devices/system/cpu/cpufreq/boost",
    "sys/devices/system/cpu/intel_pstate/no_turbo", "sys/devices/system/cpu/amd_pstate/status",
    "sys/devices/system/cpu/cpu[0-9]*/online", "sys/devices/system/cpu/cpu[0-9]*/cpu_capacity",
    "sys/devices/system/cpu/cpu[0-9]*/topology/*",
    "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/*",
    "sys/devices/system/cpu/cpu[0-9]*/cpufreq/*",
    "sys/devices/system/cpu/cpu[0-9]*/node[0-9]*",
    "sys/devices/system/cpu/cpu[0-9]*/regs/identification/midr_el1",
    "sys/devices/system/cpu/cpu[0-9]*/acpi_cppc/*perf*",
    "sys/devices/system/node/*", "sys/devices/system/node/node[0-9]*/cpulist",
    "sys/devices/system/node/node[0-9]*/cpumap", "sys/devices/system/node/node[0-9]*/distance",
    "sys/devices/system/node/node[0-9]*/meminfo",
    "sys/class/dmi/id/product_name", "sys/class/dmi/id/product_family", "sys/class/dmi/id/sys_vendor",
    "sys/class/dmi/id/board_name", "sys/class/dmi/id/board_vendor", "sys/class/dmi/id/bios_vendor",
    "sys/class/dmi/id/bios_version", "sys/class/dmi/id/bios_date",
    "sys/kernel/mm/transparent_hugepage/enabled", "sys/kernel/mm/transparent_hugepage/defrag",
    "sys/hypervisor/type",
    # a container's marker (the OS probe's first container check) and the PCI ids the GPU probe reads
    ".dockerenv", "sys/bus/pci/devices/*/class", "sys/bus/pci/devices/*/vendor", "sys/bus/pci/devices/*/device",
)
# What may ever be packed (after symlinks are resolved), however it was found.
ALLOW = (
    "proc/cpuinfo", "proc/meminfo", "proc/version", "proc/swaps", "proc/sys/kernel/osrelease",
    "proc/self/status", "proc/self/cgroup", "proc/self/cpuset", "proc/self/mounts", "proc/mounts",
    "proc/1/cgroup", "proc/hwloc-nofile-info", "etc/os-release", "usr/lib/os-release",
    "sys/devices/system/cpu/*", "sys/devices/system/node/*", "sys/kernel/mm/transparent_hugepage/*",
    "sys/hypervisor/type", "sys/fs/cgroup/*", "dev/cpuset/*", "cgroup/*",
    "sys/class/dmi/id", "sys/devices/virtual/dmi/id/*",
    ".dockerenv", "sys/bus/pci/devices/*", "sys/devices/pci*/class", "sys/devices/pci*/vendor",
    "sys/devices/pci*/device",
)
DMI_NAMES = {"product_name", "product_family", "product_version", "sys_vendor", "board_name", "board_vendor",
             "bios_vendor", "bios_version", "bios_date"}
# Never, even when a probe reads them: identity, secrets, or just noise.
DENY = re.compile(r"(serial|uuid|asset_tag|/environ$|/cmdline$|/maps$|/smaps|/fd/|/exe$|/cwd$|/stat$|"
                  r"/crash_notes|/uevent$|/power/|/subsystem|/driver$|/firmware_node|/hotplug/|/msr/)")
CGROUP_FILES = ("cpuset.cpus", "cpuset.cpus.effective", "cpuset.mems", "cpuset.mems.effective", "cpu.max",
                "memory.max", "memory.high", "cgroup.controllers", "cpuset.effective_cpus", "cpuset.effective_mems",
                "cpu.cfs_quota_us", "cpu.cfs_period_us", "memory.limit_in_bytes", "cpus", "mems")
STATUS_KEEP = ("Cpus_allowed", "Mems_allowed")
# What one capture may pack: a machine of 8,192 CPUs (every one the probes read) is about 60 MB of sysfs
# text. A tree whose files are larger (sparse files of 16 MiB each in every cpuN folder) is cut off there,
# with a note, instead of reading for hours.
MAX_CAPTURE_BYTES = 256 << 20
CGROUP_FS = {"cgroup", "cgroup2", "cpuset"}
TOP = "cpudoctor-capture"


class CaptureError(Exception):
    """The capture could not be made; the message says what to do, ``code`` is the CLI exit code."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


@dataclass
class CaptureResult:
    path: Path
    files: int = 0
    links: int = 0
    bytes: int = 0
    traced: int = 0                       # how many of the files came from the probes' own reads
    environment: str = ""                 # the Python environment environment.json describes, in words
    skipped: list[str] = field(default_factory=list)
    scrubbed: dict[str, dict[str, int]] = field(default_factory=dict)   # file -> {what was replaced: count}

    def summary(self) -> str:
        kib = self.bytes / 1024
        text = f"Packed {self.files} files and {self.links} symlinks ({kib:.1f} KiB of data) into {self.path}\n"
        if self.scrubbed:
            what = sorted({k for changes in self.scrubbed.values() for k in changes})
            text += (f"Replaced identifiers ({', '.join(what)}) in {len(self.scrubbed)} file(s); "
                     f"{TOP}/capture.json lists where\n")
        if self.environment:
            text += f"Described the Python environment {self.environment} in {TOP}/{ENVIRONMENT_FILE}\n"
        text += "".join(f"Note: {line}\n" for line in self.skipped)
        return text + f"Analyse it anywhere: tar xzf {self.path.name} && cpudoctor report --root {TOP}"


def allowed(rel: str) -> bool:
    if DENY.search("/" + rel):
        return False
    if rel.startswith(("sys/devices/virtual/dmi/id/", "sys/class/dmi/id/")):
        return rel.rsplit("/", 1)[-1] in DMI_NAMES
    return any(rel == pat or fnmatch.fnmatchcase(rel, pat) for pat in ALLOW)


def _resolve(root: Path, rel: str) -> tuple[str, list[tuple[str, str]]]:
    """``rel`` with symlinked components resolved inside ``root``, and the links met on the way.

    Like a chroot (and like ``_fs.under``, which does the reading): ``..`` stops
    at the root and an absolute link target starts again at the root, so the
    result never names anything outside the tree. ``proc/self`` is kept as it is
    (it names the capturing process, and the probes on the other side read
    ``proc/self`` too).
    """
    links: list[tuple[str, str]] = []
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    done: list[str] = []
    guard = 0
    while parts:
        guard += 1
        if guard > 200:
            break
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        cur = "/".join(done + [part])
        full = os.path.join(root, *done, part)     # done is resolved and inside root; part is one name
        try:
            is_link = cur not in ("proc/self", "proc/1") and stat.S_ISLNK(os.lstat(full).st_mode)
            target = os.readlink(full) if is_link else ""
        except (OSError, ValueError):
            is_link = False
        if not is_link:
            done.append(part)
            continue
        links.append((cur, target))
        base = [] if target.startswith("/") else list(done)
        parts = base + [t for t in target.split("/") if t not in ("", ".")] + parts
        done = []
    return "/".join(done), links


def _resolve_cached(root: Path, rel: str, folders: dict[str, tuple[str, list[tuple[str, str]]]]
                    ) -> tuple[str, list[tuple[str, str]]]:
    """:func:`_resolve`, with each folder resolved once per capture: a file's own name is looked at alone
    unless it is a link (a capture of thousands of CPUs resolved every folder of every file again)."""
    folder, _, last = rel.rpartition("/")
    if not folder or last in ("", ".", ".."):
        return _resolve(root, rel)
    if folder not in folders:
        if len(folders) > 65536:
            folders.clear()
        folders[folder] = _resolve(root, folder)
    done, links = folders[folder]
    full = os.path.join(root, *done.split("/"), last) if done else os.path.join(root, last)
    try:
        if stat.S_ISLNK(os.lstat(full).st_mode) and f"{done}/{last}" not in ("proc/self", "proc/1"):
            return _resolve(root, rel)
    except (OSError, ValueError):
        pass
    return (f"{done}/{last}" if done else last), list(links)


# Identity files of the DMI table: never packed, but their values are scrubbed wherever else they appear
# (vendors put the serial number into product_version or board_name surprisingly often).
DMI_IDENTIFIERS = ("product_serial", "board_serial", "chassis_serial", "product_uuid", "board_asset_tag",
                   "chassis_asset_tag")


def _dmi_identifiers(root: Path) -> list[str]:
    from cpudoctor.kits.rooted import read_text, under

    values = []
    for folder in ("sys/class/dmi/id", "sys/devices/virtual/dmi/id"):
        for name in DMI_IDENTIFIERS:
            text = read_text(under(root, f"{folder}/{name}"))
            if text and len(text) <= 256:
                values.append(text)
    return values


def member_name(rel: str) -> str | None:
    """``cpudoctor-capture/<rel>``, or None when ``rel`` could land outside that folder when extracted."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in rel or "\\" in rel:
        return None
    return f"{TOP}/{rel}"


def _link_target_ok(link: str, target: str) -> bool:
    """A relative symlink target that, from ``link``'s folder, stays inside the capture folder."""
    if target.startswith("/") or "\0" in target:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    return not (joined == ".." or joined.startswith("../") or joined.startswith("/"))


def _glob(root: Path, pattern: str, listed: dict[tuple[str, str], list[str]] | None = None) -> list[str]:
    """Relative paths under ``root`` matching ``pattern`` (fnmatch per component), listed inside the root only.

    ``listed`` remembers each folder's matches across patterns (eight patterns list cpuN folders). A path
    whose last component came from a listing exists; only one ending in a literal name is checked."""
    from cpudoctor.kits.rooted import list_dir, under

    listed = {} if listed is None else listed
    found = [""]
    last_listed = False
    for comp in pattern.split("/"):
        nxt = []
        last_listed = any(ch in comp for ch in "*?[")
        for rel in found:
            if not last_listed:
                nxt.append(f"{rel}/{comp}" if rel else comp)
                continue
            if (rel, comp) not in listed:
                listed[(rel, comp)] = _bounded([name for name in list_dir(under(root, rel))
                                                if fnmatch.fnmatchcase(name, comp)])
            nxt += [f"{rel}/{name}" if rel else name for name in listed[(rel, comp)]]
        found = nxt
    return sorted(found if last_listed else (rel for rel in found if under(root, rel).exists()))


_NUMBERED = re.compile(r"([A-Za-z_]+)([0-9]{1,9})")


def _bounded(names: list[str]) -> list[str]:
    """At most MAX_NUMBERED_DIRS names of each numbered kind (cpuN, nodeN, policyN: the smallest numbers) and
    of the others: the probes read no more (kits.rooted.numbered_dirs), and a tree of 100,000 cpuN folders
    must not make a capture of minutes (issue 29)."""
    from cpudoctor.kits.rooted import MAX_NUMBERED_DIRS

    groups: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        m = _NUMBERED.fullmatch(name)
        groups.setdefault(m.group(1) if m else "", []).append((int(m.group(2)) if m else 0, name))
    return sorted(name for items in groups.values() for _, name in sorted(items)[:MAX_NUMBERED_DIRS])


def _filter_content(rel: str, data: bytes) -> bytes:
    """Cut files that hold more than the probes need down to the lines they use."""
    if rel.endswith("/status") and rel.startswith("proc/"):
        return b"".join(ln for ln in data.splitlines(keepends=True) if ln.startswith(tuple(
            k.encode() for k in STATUS_KEEP)))
    if rel.endswith("mounts") and rel.startswith("proc/"):
        keep = []
        for ln in data.splitlines(keepends=True):
            fields = ln.split()
            if len(fields) >= 3 and fields[2].decode(errors="replace") in CGROUP_FS | {"proc", "sysfs"}:
                keep.append(ln)
        return b"".join(keep)
    return data


def _cgroup_paths(root: Path) -> list[str]:
    """The cgroup files that limit this process: its own cgroup dir and every ancestor, per mount.

    Mirrors what the topology probe reads: the path comes from /proc/self/cgroup
    (per controller) or, in old trees, /proc/self/cpuset; mounts from the
    mount table, wherever they are (/sys/fs/cgroup, /cgroup/unified, /dev/cpuset).
    A path or mount point with ``.``/``..`` steps (no kernel writes one) is
    skipped: it could only walk out of the cgroup mount.
    """
    from cpudoctor.probes.cgroup import clean_cgroup_path
    from cpudoctor.kits.rooted import read_text, under

    mounts = read_text(under(root, "proc/self/mounts")) or read_text(under(root, "proc/mounts")) or ""
    legacy = clean_cgroup_path((read_text(under(root, "proc/self/cpuset")) or "").strip() or None)
    cg: dict[str, str] = {}
    for line in (read_text(under(root, "proc/self/cgroup")) or "").splitlines():
        bits = line.split(":", 2)
        if len(bits) == 3 and clean_cgroup_path(bits[2]) is not None:
            for ctrl in bits[1].split(",") if bits[1] else [""]:
                cg[ctrl] = bits[2]
    out: list[str] = []
    for m in mounts.splitlines():
        f = m.split()
        if len(f) < 4 or f[2] not in CGROUP_FS:
            continue
        options = f[3].split(",")
        if f[2] == "cgroup2":
            path = cg.get("", legacy)
        elif f[2] == "cpuset":
            path = cg.get("cpuset", legacy)
        else:
            path = next((cg[o] for o in options if o in cg), legacy if "cpuset" in options else None)
        point = clean_cgroup_path(f[1].replace("\\040", " "))
        if point is None:
            continue
        mount = point.strip("/")
        segs = [s for s in (path or "").split("/") if s][:64]
        for depth in range(len(segs) + 1):
            d = "/".join([mount] + segs[:depth])
            out += [f"{d}/{name}" for name in CGROUP_FILES]
    return out


def trace_probe_reads(timeout: float = 60.0) -> list[str]:
    """Paths the probes open or list on this machine (absolute), from a child process."""
    from cpudoctor.kits.child.own import own_command
    from cpudoctor.kits.child.runner import ChildSpec, run_child

    result = run_child(ChildSpec(own_command("cpudoctor.capture", "--trace"),
                                 what="the probe trace", timeout=timeout))
    paths = result.data.get("paths") if result.ok else None
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def _trace_main() -> None:
    seen: set[str] = set()
    pid = str(os.getpid())

    def hook(event: str, args: tuple) -> None:
        if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, Path)):
            seen.add(os.path.abspath(str(args[0])))

    sys.addaudithook(hook)
    from cpudoctor.pipeline import Source, build_report

    build_report(Source.this_machine(), children=False, findings=False)
    out = []
    for p in sorted(seen):
        p = re.sub(rf"^/proc/(?:{pid}|thread-self)(?=/|$)", "/proc/self", p)
        if p.startswith(("/proc/", "/sys/", "/etc/os-release", "/usr/lib/os-release")):
            out.append(p)
    sys.stdout.write(json.dumps({"paths": out}) + "\n")   # a fact line for the child runner


def environment_report(source) -> tuple[bytes, str]:
    """(``environment.json``, the environment in words): the software side of this machine as the doctor sees
    it for ``source``'s Python environment, and the CPUID check, redacted like a shared report."""
    from cpudoctor.model import CpuInfo, Report
    from cpudoctor.pipeline import build_report
    from cpudoctor.privacy import redact_report

    report = build_report(source, findings=False)
    carried = Report(meta=report.meta, cpu=CpuInfo(cpuid_check=report.cpu.cpuid_check), software=report.software,
                     notes=["the software side of a capture: read by cpudoctor report --root (see docs/capture.md)"])
    shared = redact_report(carried)
    sw = shared.software
    words = f"{sw.python.executable or 'unknown'} (Python {sw.python.version or '?'}, {len(sw.packages)} packages)" \
        if sw is not None else "unknown"
    return (shared.to_json() + "\n").encode(), words


def capture(output: Path | str, root: Path | str = Path("/"), force: bool = False,
            trace: bool = True, environment=None) -> CaptureResult:
    """Write the capture tarball atomically; CaptureError on any problem, nothing half-written.

    ``environment``: the :class:`~cpudoctor.pipeline.Source` whose Python environment the capture describes
    (``environment.json``); only for this machine (``root`` is ``/``), None for none.
    """
    from cpudoctor.fileio import WriteError, atomic_write
    from cpudoctor.privacy import IdentifierScrubber
    from cpudoctor.kits.rooted import MAX_READ_BYTES, read_bytes, under

    output, root = Path(output).expanduser(), Path(root)
    try:
        if not force and output.is_file():
            raise CaptureError(f"{output} already exists; choose another name or pass --force to replace it")
    except OSError as exc:                        # a name too long to even look at
        raise CaptureError(f"cannot write {str(output)[:120]}: {exc.strerror}; choose another name") from None
    if not under(root, "proc").is_dir() and not under(root, "sys").is_dir():
        if is_live_root(root) and sys.platform in ("win32", "darwin"):
            from cpudoctor.probes.platforms import capture_files

            files, notes = capture_files("windows" if sys.platform == "win32" else "macos")
            described = environment_report(environment) if environment is not None else None
            return write_native(output, files, sys.platform, force=force, notes=notes, environment=described)
        if is_live_root(root):
            raise CaptureError(f"capture packs Linux /proc and /sys files; this system ({sys.platform}) has none: "
                               "export a JSON report instead (cpudoctor report --format json -o FILE)")
        raise CaptureError(f"{root} has neither proc/ nor sys/: not a machine tree")

    wanted: dict[str, None] = {}
    traced: set[str] = set()
    listed: dict[tuple[str, str], list[str]] = {}
    for pattern in STATIC_GLOBS:
        for rel in _glob(root, pattern, listed):
            wanted[rel] = None
    cgroup_files = set(_cgroup_paths(root))
    for rel in cgroup_files:
        wanted[rel] = None
    if trace and is_live_root(root):
        for p in trace_probe_reads():
            rel = p.lstrip("/")
            traced.add(rel)
            wanted[rel] = None

    scrubber = IdentifierScrubber(_dmi_identifiers(root))
    result = CaptureResult(path=output)
    members: dict[str, tarfile.TarInfo] = {}
    blobs: dict[str, bytes] = {}
    scrubbed: dict[str, dict[str, int]] = {}
    now = int(time.time())          # whole seconds: a fractional mtime costs every member a pax header

    def add_dir(rel: str) -> None:
        while rel and f"{TOP}/{rel}" not in members:
            ti = tarfile.TarInfo(f"{TOP}/{rel}")
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, now
            members[ti.name] = ti
            rel = rel.rpartition("/")[0]

    def packed_name(rel: str) -> str:
        """The member name of ``rel``: IDs in folder names (a pod UUID) replaced as in the files."""
        name, changes = scrubber.text(rel, names_only=True)
        if changes:
            scrubbed.setdefault(name, {}).update({f"{k} in the name": v for k, v in changes.items()})
        return name

    folders: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    over = 0
    for rel in wanted:
        real, links = _resolve_cached(root, rel, folders)
        if member_name(real) is None or not (allowed(real) or (rel in cgroup_files and real == rel)):
            continue
        full = under(root, real)
        real = packed_name(real)
        name = member_name(real)
        if name is None:
            continue
        ok_links = [(packed_name(lk), packed_name(tg)) for lk, tg in links
                    if (allowed(lk) or lk.startswith("sys/class/dmi")) and member_name(lk) is not None]
        if full.is_dir():
            add_dir(real)                 # listed by a probe, or the target of a kept link (cpuN/nodeK)
        elif name not in members:
            room = MAX_CAPTURE_BYTES - result.bytes
            # regular files only, size-capped; None when unreadable
            data = read_bytes(full, min(MAX_READ_BYTES, room)) if room > 0 else None
            if data is None:
                if room <= 0 or (room < MAX_READ_BYTES and full.is_file()):
                    over += 1             # past the capture's budget (a file that fit in MAX_READ_BYTES alone)
                continue                  # unreadable (permissions, write-only sysfs attribute, a FIFO): skip
            data, changes = scrubber.data(_filter_content(real, data))
            if changes:
                scrubbed.setdefault(real, {}).update(changes)
            add_dir(real.rpartition("/")[0])
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o444, now
            members[name] = ti
            blobs[name] = data
            result.files += 1
            result.bytes += len(data)
            if rel in traced:
                result.traced += 1
        for lk, tg in ok_links:
            lname = member_name(lk)
            if lname is None or lname in members:
                continue
            if tg.startswith("/"):               # keep the tree relocatable
                tg = os.path.relpath(tg.lstrip("/"), lk.rpartition("/")[0] or ".")
            if not _link_target_ok(lk, tg):
                continue                         # would point outside the capture folder once extracted
            add_dir(lk.rpartition("/")[0])
            ti = tarfile.TarInfo(lname)
            ti.type, ti.linkname, ti.mode, ti.mtime = tarfile.SYMTYPE, tg, 0o777, now
            members[lname] = ti
            result.links += 1

    if over:
        result.skipped.append(f"{over:,} files were not packed: they would have made the capture larger than "
                              f"{MAX_CAPTURE_BYTES >> 20} MiB, more than any machine's /proc and /sys")
    if result.files == 0:
        raise CaptureError(f"nothing to pack: no readable CPU, topology or OS file under {root} "
                           "(run as a user who can read /proc and /sys, or check --root)")
    if environment is not None and is_live_root(root):
        blobs[f"{TOP}/{ENVIRONMENT_FILE}"], result.environment = environment_report(environment)
    result.scrubbed = scrubbed
    meta = json.dumps({"kind": "cpudoctor-capture", "tool_version": __version__, "machine": platform.machine(),
                       "files": result.files, "links": result.links,
                       "root": "/" if is_live_root(root) else "<given --root>",
                       "environment": ENVIRONMENT_FILE if result.environment else None,
                       # What was replaced, never the values: file -> {what: how many}.
                       "scrubbed": scrubbed}, indent=2).encode()
    buf = io.BytesIO()
    # Level 6 (gzip's own default): the text of a machine with thousands of CPUs compresses almost as well
    # and twice as fast as at 9.
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        info = tarfile.TarInfo(f"{TOP}/capture.json")
        info.size, info.mtime = len(meta), now
        tar.addfile(info, io.BytesIO(meta))
        for name in sorted(members, key=lambda n: (members[n].type != tarfile.DIRTYPE, n)):
            ti = members[name]
            tar.addfile(ti, io.BytesIO(blobs[name]) if name in blobs else None)
        env_name = f"{TOP}/{ENVIRONMENT_FILE}"
        if env_name in blobs and env_name not in members:
            info = tarfile.TarInfo(env_name)
            info.size, info.mode, info.mtime = len(blobs[env_name]), 0o444, now
            tar.addfile(info, io.BytesIO(blobs[env_name]))
    try:
        atomic_write(output, buf.getvalue(), overwrite=force)
    except WriteError as exc:
        raise CaptureError(exc.strerror or str(exc), code=exc.exit_code) from None
    return result


def write_native(output: Path | str, files: dict[str, bytes], platform_name: str, *, force: bool = False,
                 notes: list[str] | None = None, environment: tuple[bytes, str] | None = None) -> CaptureResult:
    """Write a capture of a Windows PC or a Mac: ``files`` (docs/capture.md) under the capture folder.

    The same tarball shape as a Linux capture, so ``tar xzf`` and ``cpudoctor report --root
    cpudoctor-capture`` work the same on any OS. ``environment``: :func:`environment_report`'s
    (``environment.json``, words), the software side it carries as a Linux capture does.
    """
    from cpudoctor.fileio import WriteError, atomic_write

    output = Path(output).expanduser()
    try:
        if not force and output.is_file():
            raise CaptureError(f"{output} already exists; choose another name or pass --force to replace it")
    except OSError as exc:
        raise CaptureError(f"cannot write {str(output)[:120]}: {exc.strerror}; choose another name") from None
    wanted = {rel: data for rel, data in files.items() if member_name(rel) is not None and rel != ENVIRONMENT_FILE}
    if not wanted:
        raise CaptureError("nothing to pack: " + ("; ".join(notes or []) or "the system calls gave nothing"))
    result = CaptureResult(path=output, files=len(wanted), bytes=sum(len(d) for d in wanted.values()))
    if environment is not None:
        wanted[ENVIRONMENT_FILE], result.environment = environment
    meta = json.dumps({"kind": "cpudoctor-capture", "tool_version": __version__, "machine": platform.machine(),
                       "platform": platform_name, "files": result.files, "links": 0, "root": "/",
                       "environment": ENVIRONMENT_FILE if result.environment else None,
                       "notes": list(notes or []), "scrubbed": {}}, indent=2).encode()
    now = int(time.time())          # whole seconds: a fractional mtime costs every member a pax header
    buf = io.BytesIO()
    # Level 6 (gzip's own default): the text of a machine with thousands of CPUs compresses almost as well
    # and twice as fast as at 9.
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        folders = sorted({f"{TOP}/{rel.rpartition('/')[0]}" for rel in wanted if "/" in rel} | {TOP})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for rel, data in [("capture.json", meta), *sorted(wanted.items())]:
            info = tarfile.TarInfo(f"{TOP}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o444, now
            tar.addfile(info, io.BytesIO(data))
    try:
        atomic_write(output, buf.getvalue(), overwrite=force)
    except WriteError as exc:
        raise CaptureError(exc.strerror or str(exc), code=exc.exit_code) from None
    return result


if __name__ == "__main__":
    if sys.argv[1:] == ["--trace"]:
        _trace_main()
