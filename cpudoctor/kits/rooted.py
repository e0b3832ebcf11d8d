"""Reading /proc and /sys under a root: contained, bounded, tolerant of what real trees contain.

Real trees have trailing NUL bytes (hwloc-gather-topology artefacts), missing
files on old kernels, and permission errors in containers: every helper here
returns ``None`` (or the given default) instead of raising.

A tree given with ``--root`` may also be hostile (a tarball from a stranger):

* **Containment, in one place.** :func:`under` returns a :class:`RootedPath`
  for any root but the system's own ``/``. Every operating-system access
  through such a path (``open``, ``stat``, ``listdir``, ``exists()``, and
  anything else that goes through ``os.fspath``) first resolves it like a
  ``chroot`` would: ``..`` stops at the root and absolute symlinks start again
  at the root, so ``proc/self/cgroup`` saying ``0::/../../..`` or a link to
  ``/etc/passwd`` can never reach a file outside the tree. Paths built from it
  (``path / "name"``, ``path.parent``) stay rooted, so a probe cannot forget.
* **Only regular files are read, with a size cap.** A FIFO (which would block
  forever), ``/dev/zero`` (which would eat memory) or a 10 GB file give
  ``None``; :func:`refusal_notes` says which files were refused and why.
* **Parsers are bounded** (:mod:`cpudoctor.kits.cpulist`): a garbled value is a
  note, not a MemoryError.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from cpudoctor.kits.cpulist import GarbledValue, cpu_number, parse_int, strict_cpulist, strict_cpumask, strict_size

_DEFAULT_ROOT = Path("/")

# /proc/cpuinfo of an 8192-CPU machine is about 12 MB; nothing the probes read is larger.
MAX_READ_BYTES = 16 << 20
_MAX_LINKS = 40                 # like the kernel's MAXSYMLINKS: more hops is a loop
_MAX_NOTES = 8                  # refused files named per root; the rest are counted
_MAX_CACHED = 65536             # resolved folders remembered per root
# No kernel makes more CPUs than this (NR_CPUS is at most 8192: x86 MAXSMP, arm64, powerpc) nor more NUMA
# nodes (1 << NODES_SHIFT, at most 1024). A tree with more cpuN or nodeN folders is damaged or hostile, and
# reading every one of 100,000 took minutes (issue 29): only the first ones are read, and a note says so.
MAX_NUMBERED_DIRS = 8192

_O_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


# ---------------------------------------------------------------------------
# Containment

_BasePath = type(Path())


class RootedPath(_BasePath):  # type: ignore[valid-type,misc]
    """A path inside a captured tree whose every access stays inside the tree.

    ``str()`` is the path as built (for messages); ``os.fspath()`` (what
    ``open``/``stat``/``listdir`` use) is the same path resolved inside the
    root. Each root gets its own subclass (:func:`_rooted_class`) so the root
    travels with every path derived from it, on every Python version.
    """

    _prefixes: tuple[str, ...] = ()     # the root as given, absolute, and real (symlinks resolved)
    _jail: str = "/"                    # the root's real path: where resolution starts
    _refused: list[str]
    _folders: dict[str, tuple[str, ...]]
    _lock: threading.Lock

    def inside(self) -> str:
        """The path as seen from inside the tree (``/sys/...``), ``..`` folded at the root."""
        parts: list[str] = []
        for part in self._relative().split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
            else:
                parts.append(part)
        return "/" + "/".join(parts)

    def _relative(self) -> str:
        text = str(self).replace(os.sep, "/")
        for prefix in self._prefixes:
            if text == prefix:
                return ""
            if text.startswith(prefix.rstrip("/") + "/"):
                return text[len(prefix.rstrip("/")):]
        # Not spelled under the root (``path.parent`` past it, or an absolute join):
        # like a chroot, an absolute path means that path inside the tree.
        return text

    def __fspath__(self) -> str:
        # The folder part is resolved once per tree and folder (a topology probe reads
        # thousands of files in a few hundred folders); only the last step is walked here.
        # Every cached entry is itself a resolution inside the root, so it can never leak.
        folder, _, last = self._relative().rstrip("/").rpartition("/")
        done = self._folders.get(folder)
        if done is None:
            done = tuple(_walk(self._jail, [], _split(folder)))
            if len(self._folders) > _MAX_CACHED:
                self._folders.clear()
            if os.path.isdir(os.path.join(self._jail, *done)):
                self._folders[folder] = done
        return os.path.join(self._jail, *_walk(self._jail, list(done), _split(last)))

    # pathlib's predicates raise on EACCES (sys/ unreadable for this user); a probe asking
    # "is there a topology/ folder?" wants False there, like for a missing one.
    def exists(self, *args, **kwargs) -> bool:  # noqa: D102
        try:
            os.stat(self)
        except (OSError, ValueError):
            return False
        return True

    def is_dir(self, *args, **kwargs) -> bool:  # noqa: D102
        try:
            return stat.S_ISDIR(os.stat(self).st_mode)
        except (OSError, ValueError):
            return False

    def is_file(self, *args, **kwargs) -> bool:  # noqa: D102
        try:
            return stat.S_ISREG(os.stat(self).st_mode)
        except (OSError, ValueError):
            return False

    def iterdir(self):  # noqa: D102 - Python 3.13 lists str(self), not os.fspath(self)
        for name in os.listdir(os.fspath(self)):
            yield self / name


_classes: dict[str, type[RootedPath]] = {}
_classes_lock = threading.Lock()


def is_live_root(root: Path | str) -> bool:
    """Whether ``root`` is this machine's own ``/`` however it is spelled (``/``, ``//``, ``/proc/..``, a link to
    it): then the live machine is read, and children, the CPUID check and py-spy describe it too. The one
    answer to "is this root the live machine?" (a captured tree, or a root that cannot be looked at, is not)."""
    try:
        return os.path.realpath(os.path.abspath(os.fspath(root))) == os.path.realpath(os.sep)
    except (OSError, ValueError, TypeError):
        return False


def _rooted_class(root: Path) -> type[RootedPath] | None:
    """The RootedPath subclass of ``root``; None when ``root`` is the system root itself."""
    given = str(root)
    absolute = os.path.abspath(given)
    with _classes_lock:
        cls = _classes.get(absolute)
        if cls is not None:
            return cls
        if is_live_root(absolute):
            return None
        real = os.path.realpath(absolute)
        prefixes = tuple(dict.fromkeys(p.replace(os.sep, "/") for p in (given, absolute, real)))
        cls = type("RootedPath", (RootedPath,), {"_prefixes": prefixes, "_jail": real, "_refused": [],
                                                 "_folders": {}, "_lock": threading.Lock()})
        _classes[absolute] = cls
        return cls


def resolve_inside(jail: str, rel: str) -> str:
    """``rel`` resolved inside the folder ``jail`` the way ``chroot(jail)`` would see it.

    ``..`` at the top stays at the top, an absolute symlink target starts again
    at ``jail``, and more than 40 links is a loop (OSError ELOOP). Components
    that do not exist (or cannot be searched) are kept as they are: the open
    that follows fails on them. Linux's ``openat2(RESOLVE_IN_ROOT)`` does the
    same in the kernel, but not on every kernel, libc or OS CPU Doctor runs on.
    """
    return os.path.join(jail, *_walk(jail, [], _split(rel)))


def _split(rel: str) -> list[str]:
    return [p for p in rel.replace(os.sep, "/").split("/") if p not in ("", ".")]


def _walk(jail: str, done: list[str], parts: list[str]) -> list[str]:
    """Resolve ``parts`` one by one after the already resolved folders ``done`` (see resolve_inside)."""
    pending = list(reversed(parts))
    hops = 0
    base = os.path.join(jail, *done)
    while pending:
        part = pending.pop()
        if part == "..":
            if done:
                done.pop()
                base = os.path.join(jail, *done)
            continue
        here = base + os.sep + part if base[-1:] != os.sep else base + part
        try:
            is_link = stat.S_ISLNK(os.lstat(here).st_mode)
            target = os.readlink(here) if is_link else ""
        except (OSError, ValueError):
            is_link = False
        if not is_link:
            done.append(part)
            base = here
            continue
        hops += 1
        if hops > _MAX_LINKS:
            raise OSError(errno.ELOOP, "too many levels of symbolic links", here)
        if target.startswith(("/", os.sep)):
            done = []
            base = jail
        pending.extend(reversed(_split(target)))
    return done


def under(root: Path | str | None, rel: str | Path) -> Path:
    """``rel`` (absolute like ``/proc/cpuinfo`` or relative) placed under ``root``, contained in it.

    For the system root ``/`` this is a plain Path; for any other root a
    :class:`RootedPath` whose accesses cannot leave ``root``.
    """
    root = Path(root) if root is not None else _DEFAULT_ROOT
    rel = str(rel).lstrip("/" + os.sep)
    if isinstance(root, RootedPath):
        return root / rel if rel else root
    cls = _rooted_class(root)
    if cls is None:
        return root / rel if rel else root
    return cls(root, rel) if rel else cls(root)


def shown(path: Path) -> str:
    """How a path is named in a note: ``/sys/...`` inside a tree, else as it is."""
    return path.inside() if isinstance(path, RootedPath) else str(path)


def _refuse(path: Path, why: str) -> None:
    if not isinstance(path, RootedPath):
        return
    with path._lock:
        path._refused.append(f"{shown(path)}: {why}")


def refusal_notes(root: Path | str) -> list[str]:
    """Notes on the files under ``root`` that were refused since the last call (and forgets them).

    Called at the end of each collection, which also forgets the resolved
    folders: a tree unpacked again into the same folder is resolved afresh.
    """
    cls = _rooted_class(Path(root))
    if cls is None:
        return []
    with cls._lock:
        refused = list(dict.fromkeys(cls._refused))
        cls._refused.clear()
        cls._folders.clear()
    notes = refused[:_MAX_NOTES]
    if len(refused) > _MAX_NOTES:
        notes.append(f"{len(refused) - _MAX_NOTES} more files of the tree were refused the same way")
    return notes


# ---------------------------------------------------------------------------
# Reading

def read_bytes_checked(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; OSError otherwise.

    Devices, FIFOs and sockets are refused before they are opened (opening a
    FIFO blocks, some devices act when opened); the file is opened
    non-blocking and checked again, so a swap in between changes nothing.
    """
    real = os.fspath(path)
    if "\0" in str(real):                  # os.stat would raise ValueError ("embedded null byte"), not OSError
        raise OSError(errno.EINVAL, "a file name cannot hold a NUL character: not read", str(path))
    if not stat.S_ISREG(os.stat(real).st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket): not read", str(path))
    fd = os.open(real, _O_READ)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket): not read", str(path))
        if st.st_size > limit:         # known without reading (sysfs says 4096, procfs 0: those are read)
            raise OSError(errno.EFBIG, f"larger than {_mib(limit)}: not read", str(path))
        return read_fd(fd, limit, str(path))
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int, name: str = "") -> bytes:
    """What an open file holds from where it stands, at most ``limit`` bytes (OSError EFBIG beyond)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise OSError(errno.EFBIG, f"larger than {_mib(limit)}: not read", name)


def _mib(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit:,} bytes"


def read_bytes(path: Path, limit: int = MAX_READ_BYTES) -> bytes | None:
    """:func:`read_bytes_checked`, or None (a refused special or oversized file is remembered as a note)."""
    try:
        return read_bytes_checked(path, limit)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EFBIG, errno.ELOOP):
            _refuse(path, exc.strerror or str(exc))
        return None
    except ValueError:          # a NUL byte in a name built from tree content
        return None


# One value in a sysfs or procfs file (a number, a size, a word) is a few bytes; a CPU list or mask of 65,536
# CPUs is under 200 kB. Larger files of that kind are refused unread (sparse 15 MB files in every cpuN folder
# of a tree would otherwise be read whole, 8,192 times).
MAX_VALUE_BYTES = 4096
MAX_LIST_BYTES = 1 << 20


def read_text(path: Path, limit: int = MAX_READ_BYTES) -> str | None:
    """File text with NUL bytes and surrounding whitespace stripped, or None."""
    data = read_bytes(path, limit)
    if data is None:
        return None
    return data.replace(b"\0", b"").decode("utf-8", "replace").strip()


def read_int(path: Path, default: int | None = None) -> int | None:
    """The first word of a file as an integer (decimal, or ``0x`` hex), else ``default``."""
    text = read_text(path, MAX_VALUE_BYTES)
    if not text:
        return default
    try:
        return parse_int(text.split()[0])
    except GarbledValue:
        return default


def read_lines(path: Path) -> list[str] | None:
    text = read_text(path)
    return None if text is None else text.splitlines()


def list_dir(path: Path) -> list[str]:
    """Entry names of a directory, sorted; empty when it is missing or unreadable."""
    try:
        return sorted(os.listdir(path))
    except (OSError, ValueError):
        return []


def numbered_dirs(folder: Path, prefix: str, notes: list[str] | None = None,
                  limit: int = MAX_NUMBERED_DIRS) -> list[int]:
    """The numbers N of the ``<prefix>N`` entries of ``folder`` (``cpu12``: ASCII digits, below MAX_CPUS),
    sorted, at most the ``limit`` smallest: a bounded walk whatever the folder holds (a note says what was left)."""
    cut = len(prefix)
    names = [name for name in list_dir(folder) if name.startswith(prefix)]
    found = sorted(n for n in (cpu_number(name[cut:]) for name in names) if n is not None)
    if len(found) > limit:
        if notes is not None:
            count = sum(1 for name in names if name[cut:].isascii() and name[cut:].isdigit())
            notes.append(f"{shown(folder)} holds {count:,} {prefix}N folders, more than any kernel makes: "
                         f"only the first {limit:,} were read")
        del found[limit:]
    return found


def read_cpulist(path: Path, notes: list[str] | None = None, most: int | None = None) -> list[int] | None:
    """A cpulist file parsed; None when missing, or garbled (then a note in ``notes``); more than ``most``
    CPUs is garbled too."""
    return _read_parsed(path, lambda text: strict_cpulist(text, most), "a CPU list", notes)


def read_cpumask(path: Path, notes: list[str] | None = None, most: int | None = None) -> list[int] | None:
    """A hex cpumask file parsed; None when missing, or garbled (then a note in ``notes``); more than ``most``
    CPUs is garbled too."""
    return _read_parsed(path, lambda text: strict_cpumask(text, most), "a CPU mask", notes)


def read_size(path: Path, notes: list[str] | None = None) -> int | None:
    """A cache size file (``32768K``) in bytes; None when missing, or garbled (then a note)."""
    return _read_parsed(path, strict_size, "a size", notes)


def cap_notes(notes: list[str], limit: int = _MAX_NOTES) -> list[str]:
    """``notes`` without repeats, and at most ``limit`` of the "garbled file" kind (one per CPU adds nothing)."""
    out: list[str] = []
    garbled = 0
    for note in dict.fromkeys(notes):
        if note.endswith(": ignored"):
            garbled += 1
            if garbled > limit:
                continue
        out.append(note)
    if garbled > limit:
        out.append(f"{garbled - limit} more files were garbled the same way and ignored")
    return out


def _read_parsed(path: Path, parse, what: str, notes: list[str] | None):
    text = read_text(path, MAX_LIST_BYTES)
    if text is None:
        return None
    try:
        return parse(text)
    except GarbledValue as exc:
        if notes is not None:
            notes.append(f"{shown(path)} is not {what} ({exc}): ignored")
        return None
