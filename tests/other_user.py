"""Running CPU Doctor as another user (``nobody``) from any checkout, a 0700 home folder included.

Some tests need the kernel's own "permission denied": a tree whose ``sys/`` is
mode 000, another user's ``/proc/PID/environ``. Root ignores file modes, so
those tests run CPU Doctor as ``nobody`` with ``setpriv``. But ``nobody`` must
then reach the interpreter and the code, and a checkout in a folder others
cannot enter (``mktemp -d``, a 0700 home) or an interpreter under ``/root``
is out of its reach.

:func:`as_user` makes them reachable without touching anyone's permissions:
in a private mount namespace (``unshare -m``, gone with the command), every
folder on the way that others may not enter is covered by an empty tmpfs of
mode 0755 in which only the paths the command needs (the checkout, the
interpreter's installation) are bind-mounted back, at the same absolute
paths. Nothing else of those folders is visible to the other user, and
nothing changes outside the command. Where that cannot be arranged (not
root, no ``setpriv`` or ``unshare``, mounts refused), :func:`skip_reason`
says why and the tests skip with it.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534


def _needed(reach: tuple[Path, ...] = ()) -> list[Path]:
    """What the other user must reach: the checkout (code and venv), the interpreter's installation, and
    ``reach`` (a test's own folders)."""
    paths = {REPO, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent,
             Path(sysconfig.get_paths()["stdlib"]).resolve(), *(Path(p).resolve() for p in reach)}
    return sorted(paths)


def _closed_ancestor(path: Path) -> Path | None:
    """The topmost folder above (or at) ``path`` that others may not enter, or None."""
    for folder in [*reversed(path.parents), path]:
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            return None
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return folder
    return None


def _covers(reach: tuple[Path, ...] = ()) -> dict[Path, list[Path]]:
    """Closed folder -> the needed paths below it."""
    out: dict[Path, list[Path]] = {}
    for path in _needed(reach):
        closed = _closed_ancestor(path)
        if closed is not None:
            out.setdefault(closed, []).append(path)
    # a closed folder inside another one's cover is handled by the outer one (its needed paths are kept)
    for outer in list(out):
        for inner in list(out):
            if inner != outer and outer in inner.parents and inner in out:
                out[outer] += out.pop(inner)
    return out


def _script(covers: dict[Path, list[Path]], stage: Path) -> str:
    """The mounts, then ``exec "$@"``: run by ``sh -c`` inside ``unshare -m``."""
    q = shlex.quote
    lines = ["set -e", "umask 022"]
    for n, (closed, keep) in enumerate(sorted(covers.items())):
        held = stage / str(n)
        lines += [f"mkdir -p {q(str(held))}", f"mount --rbind {q(str(closed))} {q(str(held))}",
                  f"mount -t tmpfs -o mode=0755,size=1m cpudoctor-other-user {q(str(closed))}"]
        for path in sorted(set(keep)):
            inside = held / path.relative_to(closed)
            lines += [f"mkdir -p {q(str(path))}", f"mount --rbind {q(str(inside))} {q(str(path))}"]
    lines.append('exec "$@"')
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _stage() -> Path:
    return Path(tempfile.mkdtemp(prefix="cpudoctor-other-user-"))


def as_user(argv: list[str], uid: int = NOBODY, gid: int | None = None, reach: list[Path] | None = None) -> list[str]:
    """The argv that runs ``argv`` as ``uid`` (with ``setpriv``), the checkout, the interpreter and the
    folders in ``reach`` reachable."""
    gid = uid if gid is None else gid
    command = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv]
    covers = _covers(tuple(reach or ()))
    if not covers:
        return command
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", _script(covers, _stage()), "sh", *command]


@functools.lru_cache(maxsize=None)
def skip_reason() -> str | None:
    """Why CPU Doctor cannot be run as another user here (None: it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to act as another user (the suite runs as root in CI)"
    if not shutil.which("setpriv"):
        return "needs setpriv (util-linux) to act as another user"
    if _covers() and not shutil.which("unshare"):
        return "the checkout is in a folder other users cannot enter, and unshare (util-linux) is missing"
    try:
        probe = subprocess.run(as_user([sys.executable, "-c", "import cpudoctor"]), capture_output=True, text=True,
                               timeout=120, cwd="/", stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run CPU Doctor as user {NOBODY}: {exc}"
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no reason given"])[-1]
        return (f"cannot run CPU Doctor as user {NOBODY} from this checkout ({last}); run the suite from a "
                "checkout other users can read to include this test")
    return None


def require() -> None:
    """Skip the calling test, saying why, where CPU Doctor cannot be run as another user."""
    import pytest

    reason = skip_reason()
    if reason:
        pytest.skip(reason)


def runs_as_another_user(test):
    """Decorator: the test runs CPU Doctor as another user, or skips saying why (:func:`skip_reason`)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        require()
        return test(*args, **kwargs)
    return run
