"""Writing an output file the way a shell's ``>`` would, without ever leaving half a file.

Every writer (``report -o``, ``doctor -o``, ``compare -o``, ``capture``, the
window's exports and launch scripts) goes through :func:`atomic_write`, which
follows shell redirection semantics:

* a **regular file** (or a new name) is written to a temporary file in the same
  folder and renamed over the target, so a full disk or a crash never leaves
  half a report behind. An existing file keeps its permissions (a 0600 file
  stays 0600); a new one gets what the umask gives (``umask 077`` means 0600),
  exactly like ``>``;
* a **device or FIFO** (``/dev/null``, ``/dev/stdout``, a named pipe a reader
  has open) is written to directly, never replaced: renaming over
  ``/dev/null`` as root would delete the device node;
* a **symlink** is written through to its target (the link stays a link);
* a file with **hard links** is written through too (every name sees the new
  text, as with ``>``): space is reserved first, so a full disk still changes
  nothing;
* a name ending in ``/`` names a folder, never a file.

A file CPU Doctor keeps for itself (the window's settings, its kept lab runs,
caches) is written with ``regular_only=True``: a device, FIFO or socket there
(or a link to one) is refused, neither replaced nor written into.

Problems are :class:`WriteError` with a message saying what to do, and
``exit_code`` 2 for a bad path (missing folder, permissions, name too long)
or 1 for an I/O failure (disk full, I/O error).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

try:
    import fcntl
except ImportError:                               # Windows: no FIFOs to unblock
    fcntl = None  # type: ignore[assignment]

# errno values that mean "the data could not be written", as opposed to "that path is wrong".
_IO_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EPIPE, errno.ENXIO} - {None}


class WriteError(OSError):
    """Writing failed; ``str()`` says what happened and what to do, ``exit_code`` is 2 (path) or 1 (I/O)."""

    @property
    def exit_code(self) -> int:
        return 1 if self.errno in _IO_ERRNOS else 2


def _fail(exc: OSError, path: Path, what: str = "cannot write") -> WriteError:
    code = exc.errno or errno.EIO
    if code == errno.ENAMETOOLONG:
        hint = "choose a shorter name"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        hint = "free some disk space; nothing was changed"
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "choose a folder you can write to"
    elif code == errno.ENOTDIR:
        hint = "a part of the path is a file, not a folder"
    else:
        hint = "nothing was changed"
    return WriteError(code, f"{what} {_short(path)}: {exc.strerror or os.strerror(code)}; {hint}")


def _short(path: Path | str, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else text[: limit // 2] + "…" + text[-limit // 2:]


def atomic_write(path: Path | str, data: bytes | str, overwrite: bool = True, executable: bool = False,
                 regular_only: bool = False) -> Path:
    """Write ``data`` to ``path`` like ``>`` (see the module doc); returns the path written.

    ``overwrite=False`` refuses an existing regular file (like the shell's
    ``noclobber``); devices and FIFOs are always written to, unless
    ``regular_only`` (a file of CPU Doctor's own: nobody asked to write into a
    device, so one found there is left alone and refused). ``executable``: a
    new file is created 0777 through the umask (a launch script), an existing
    one keeps its mode either way.
    """
    text = os.fspath(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if not text:
        raise WriteError(errno.ENOENT, "cannot write an empty file name; give a file name")
    if text.endswith(("/", os.sep)):
        raise WriteError(errno.EISDIR, f"cannot write {_short(text)}: a name ending in / is a folder; "
                                       "give a file name (e.g. report.json inside it)")
    path = Path(text).expanduser()
    try:
        target = Path(os.path.realpath(path))     # a symlink is written through to its target
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        st = None                                 # the folder check below says what is wrong
    except OSError as exc:
        raise _fail(exc, path) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise WriteError(errno.EISDIR, f"cannot write {_short(path)}: it is a folder; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if regular_only:
            raise WriteError(errno.EINVAL, f"cannot write {_short(path)}: it is not a regular file (a device, "
                                           "named pipe or socket, or a link to one); left as it is")
        _write_special(target, payload, path, st)
        return path
    if st is not None and not overwrite:
        raise WriteError(errno.EEXIST, f"{_short(path)} already exists; choose another name or allow overwriting")
    if st is not None and st.st_nlink > 1:
        _write_through(target, payload, path)     # `>` keeps the inode: every hard link sees the new text
        return path
    folder = target.parent
    try:
        if not stat.S_ISDIR(os.stat(folder).st_mode):
            raise WriteError(errno.ENOTDIR, f"cannot write {_short(path)}: the folder {_short(folder)} does not "
                                            "exist (that name is a file); choose another folder")
    except (FileNotFoundError, NotADirectoryError):
        raise WriteError(errno.ENOENT, f"cannot write {_short(path)}: the folder {_short(folder)} does not exist; "
                                       "create it or choose another") from None
    except OSError as exc:
        raise _fail(exc, path) from None
    _replace_regular(target, payload, path, st, 0o777 if executable else 0o666)
    return path


def check_writable(path: Path | str, what: str = "-o", pipes: bool = True) -> Path:
    """Refuse now what :func:`atomic_write` would refuse later: for a writer whose result comes at the end of
    work that cannot be repeated (``run`` writes its diagnosis after the job exited, ``bench --plot`` after
    the measurement). WriteError says what is wrong, named by ``what`` (the option).

    A folder, a name ending in /, a missing or unwritable folder, a read-only file and a socket are
    refused; so is a named pipe when ``pipes`` is False (a picture goes to a file). Nothing is created.
    """
    text = os.fspath(path)
    if not text:
        raise WriteError(errno.ENOENT, f'{what} "": an empty name; give a file name')
    if text.endswith(("/", os.sep)):
        raise WriteError(errno.EISDIR, f"{what} {_short(text)}: a name ending in / is a folder; give a file name")
    target = Path(os.path.realpath(Path(text).expanduser()))
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as exc:
        raise _fail(exc, Path(text), f"{what}: cannot write") from None
    if st is not None:
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a named pipe" if stat.S_ISFIFO(st.st_mode) and not pipes else None)
        if kind:
            raise WriteError(errno.EISDIR if kind == "a folder" else errno.EINVAL,
                             f"{what} {_short(text)}: that is {kind}; give a file name")
        if not os.access(target, os.W_OK):
            raise WriteError(errno.EACCES, f"{what} {_short(text)}: the file is read-only; choose another name")
        if not stat.S_ISREG(st.st_mode):
            return target                         # a device or FIFO: written into, nothing to create
    folder = target.parent
    if not folder.is_dir():
        raise WriteError(errno.ENOENT, f"{what} {_short(text)}: the folder {_short(folder)} does not exist; "
                                       "create it or choose another")
    if st is None and not os.access(folder, os.W_OK | os.X_OK):
        raise WriteError(errno.EACCES, f"{what} {_short(text)}: cannot write in {_short(folder)}; "
                                       "choose a folder you can write to")
    return target


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether two names lead to one file (links resolved, hard links too): ``-o R --into R`` would lose R."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(Path(os.fspath(a)).expanduser()) == os.path.realpath(Path(os.fspath(b)).expanduser())


def _write_special(target: Path, payload: bytes, shown: Path, st: os.stat_result) -> None:
    """Write straight into a device or FIFO (never replace it)."""
    if stat.S_ISSOCK(st.st_mode):
        raise WriteError(errno.EINVAL, f"cannot write {_short(shown)}: it is a socket; give a file name")
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if stat.S_ISFIFO(st.st_mode) and fcntl is not None:
        flags |= os.O_NONBLOCK                    # no reader: ENXIO now, instead of hanging
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(st.st_mode):
            raise WriteError(errno.ENXIO, f"cannot write {_short(shown)}: it is a named pipe and nothing is "
                                          "reading it; start the reader first") from None
        raise _fail(exc, shown) from None
    try:
        if fcntl is not None and flags & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        _write_all(fd, payload)
    except OSError as exc:
        raise _fail(exc, shown) from None
    finally:
        os.close(fd)


def _replace_regular(target: Path, payload: bytes, shown: Path, old: os.stat_result | None, mode: int) -> None:
    """Temporary file in the target's folder, then rename: all or nothing."""
    # A short name of our own: ".<the target's name>.tmp" would break the 255-byte limit first.
    tmp = target.parent / f".cpudoctor-{secrets.token_hex(6)}.tmp"
    try:
        # 0o666 through the umask, like the shell's ">" creating a file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if old is not None and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and os.access(target, os.W_OK):
            _overwrite_in_place(target, payload, shown)  # a writable file in a folder we may not create in
            return
        raise _fail(exc, shown) from None
    try:
        try:
            if old is not None:
                _copy_owner_and_mode(fd, old)
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _fail(exc, shown) from None


def replace_file(path: Path | str, data: bytes | str, old: os.stat_result | None = None) -> None:
    """Write ``data`` as the file ``path`` itself, all or nothing, never following a link at ``path``.

    For a writer that has already checked what ``path`` is (``bench --into``
    re-reads the report under a lock): a symlink swapped in meanwhile is
    replaced, not written through, so no other file is touched. ``old`` (the
    file's stat) keeps its permissions; a file with hard links is written
    through in place, like :func:`atomic_write`.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path = Path(path)
    if old is not None and stat.S_ISREG(old.st_mode) and old.st_nlink > 1:
        _write_through(path, payload, path, follow=False)
        return
    _replace_regular(path, payload, path, old, 0o666)


def _write_through(target: Path, payload: bytes, shown: Path, follow: bool = True) -> None:
    """Overwrite a regular file in place (its inode, so its hard links, stay): reserve, write, cut."""
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        raise _fail(exc, shown) from None
    try:
        if payload and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, len(payload))    # ENOSPC here, before a byte of the old text changes
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        os.lseek(fd, 0, os.SEEK_SET)
        _write_all(fd, payload)
        os.ftruncate(fd, len(payload))
        os.fsync(fd)
    except OSError as exc:
        raise _fail(exc, shown) from None
    finally:
        os.close(fd)


def _copy_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """The replacement keeps the replaced file's permissions (and owner, where we may set it)."""
    if hasattr(os, "fchown") and (old.st_uid != os.geteuid() or old.st_gid != os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except OSError:
            pass                                  # not root: the file becomes ours, like any editor's save
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _overwrite_in_place(target: Path, payload: bytes, shown: Path) -> None:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _fail(exc, shown) from None
    try:
        _write_all(fd, payload)
        os.fsync(fd)
    except OSError as exc:
        raise _fail(exc, shown) from None
    finally:
        os.close(fd)


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]
