"""A double-clickable launcher on Linux desktops: an XDG ``.desktop`` entry and its icon.

``install`` writes exactly two files (the entry in ``$XDG_DATA_HOME/applications``
and the scalable icon in ``$XDG_DATA_HOME/icons/hicolor/scalable/apps``), is
idempotent, and ``uninstall`` removes exactly those two, and only when they are
ours (the entry carries an ``X-CPUDoctor-Installed`` marker), so a file the
user wrote by hand is never deleted. On Windows the ``cpudoctor-gui``
gui-script that pip creates is the windowed launcher; nothing to install.
From the standalone app (``make dist``), the entry starts the app's own
executable, and the icon comes from the app's bundled resources.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from cpudoctor.fileio import WriteError, atomic_write

APP_ID = "cpudoctor"
ENTRY_NAME = f"{APP_ID}.desktop"
ICON_NAME = f"{APP_ID}.svg"
MARKER = "X-CPUDoctor-Installed=true"


class DesktopError(Exception):
    """Installing or removing the launcher failed; the message says what to do."""


@dataclass
class DesktopPaths:
    entry: Path
    icon: Path


def data_home(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    value = env.get("XDG_DATA_HOME", "")
    # The XDG spec: a relative path is invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path(env.get("HOME") or Path.home()) / ".local" / "share"


def paths(env: dict[str, str] | None = None) -> DesktopPaths:
    base = data_home(env)
    return DesktopPaths(entry=base / "applications" / ENTRY_NAME,
                        icon=base / "icons" / "hicolor" / "scalable" / "apps" / ICON_NAME)


def gui_command() -> list[str]:
    """How to start the window: the standalone app itself, the installed ``cpudoctor-gui`` script,
    else this Python."""
    from cpudoctor.kits.child.own import frozen, own_command

    if frozen():
        # The app built by `make dist`: with no arguments it opens the window. Resolved, so the
        # entry keeps working from any folder; moving the app's folder needs install-desktop again.
        return [str(Path(sys.executable).resolve())]
    exe = shutil.which("cpudoctor-gui")
    if exe is None:
        candidate = Path(sys.executable).with_name("cpudoctor-gui")
        exe = str(candidate) if candidate.is_file() else None
    if exe is not None:
        return [str(Path(exe).resolve()) if Path(exe).is_file() else exe]
    command = own_command("cpudoctor.gui.app")
    return [str(Path(command[0]).resolve()), *command[1:]]


def _exec_quote(arg: str) -> str:
    """Quote one Exec argument per the Desktop Entry spec (double quotes, escaped specials, %% for %)."""
    arg = arg.replace("%", "%%")
    if not any(c in arg for c in ' \t\n"\'\\><~|&;$*?#()`='):
        return arg
    return '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'


def entry_text(command: list[str], icon: Path) -> str:
    # %f: a file opened with CPU Doctor (a saved report from the file manager's "Open with") is passed on;
    # the window opens it read-only. Nothing when the menu entry is clicked.
    exec_line = " ".join(_exec_quote(a) for a in command) + " %f"
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.0",
        "Name=CPU Doctor",
        "GenericName=CPU checkup for deep learning",
        "Comment=Is this CPU set up well for deep learning? Shows why and how to fix it",
        f"Exec={exec_line}",
        f"TryExec={command[0]}",
        f"Icon={icon}",
        "Terminal=false",
        "Categories=System;Monitor;Development;",
        "Keywords=CPU;AMD;Ryzen;EPYC;Threadripper;PyTorch;topology;benchmark;",
        "StartupNotify=true",
        f"StartupWMClass={APP_ID}",
        MARKER,
        "",
    ])


def _icon_bytes() -> bytes:
    from cpudoctor import resources

    return resources.path(ICON_NAME).read_bytes()


def install(env: dict[str, str] | None = None, command: list[str] | None = None) -> DesktopPaths:
    """Write (or refresh) the entry and the icon; returns where they are."""
    p = paths(env)
    if p.entry.exists() and MARKER not in _read(p.entry):
        raise DesktopError(f"{p.entry} exists and was not written by CPU Doctor; move it away and run again")
    text = entry_text(command or gui_command(), p.icon)
    try:
        for folder in (p.entry.parent, p.icon.parent):
            folder.mkdir(parents=True, exist_ok=True)
        atomic_write(p.icon, _icon_bytes(), regular_only=True)     # our own files: never written into a device
        atomic_write(p.entry, text, regular_only=True)
    except (OSError, WriteError) as exc:
        where = getattr(exc, "filename", None) or p.entry.parent
        raise DesktopError(f"cannot install the launcher in {where}: {getattr(exc, 'strerror', None) or exc}; "
                           f"check that folder, or set XDG_DATA_HOME to a folder you can write") from None
    # No update-desktop-database: the entry declares no MimeType, and menus pick up
    # new files in applications/ by themselves; running it would write a cache we do not own.
    return p


def uninstall(env: dict[str, str] | None = None) -> list[Path]:
    """Remove what :func:`install` wrote; returns the files removed (empty when nothing was installed)."""
    p = paths(env)
    removed: list[Path] = []
    if p.entry.exists():
        if MARKER not in _read(p.entry):
            raise DesktopError(f"{p.entry} was not written by CPU Doctor; leaving it alone")
        p.entry.unlink()
        removed.append(p.entry)
        if p.icon.is_symlink() or p.icon.is_file():        # a device or FIFO named like the icon is not ours
            p.icon.unlink()
            removed.append(p.icon)
    return removed


def _read(path: Path) -> str:
    """The entry's text: a regular file, bounded (a FIFO or a link to /dev/zero there reads as "not ours")."""
    from cpudoctor.kits.rooted import read_bytes_checked

    try:
        return read_bytes_checked(path, 1 << 20).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def describe(command: list[str]) -> str:
    return shlex.join(command)
