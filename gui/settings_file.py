"""The window's settings file, read and written by CPU Doctor, never by Qt in place.

Qt's QSettings reads its file when it is made and saves by writing a new file
and renaming it over the file's *target*: a settings file that was a link to a
device lost the device (``CPU Doctor.conf -> zero``, a node made with
``mknod zero c 1 5``, became a 457-byte file after one start), a FIFO there
kept the window from ever opening, a link to ``/dev/zero`` read until memory
ran out, and a 3 GB sparse file ended in ``std::bad_alloc``.

So Qt gets a private copy: :func:`window_settings` reads the real file itself
(a regular file of at most :data:`MAX_BYTES`, read without blocking, see
:func:`cpudoctor.kits.rooted.read_bytes_checked`; anything else is ignored
with a log line), gives Qt a copy in a private temporary folder, and
:meth:`WindowSettings.sync` writes Qt's copy back through
:func:`cpudoctor.fileio.atomic_write` with ``regular_only``: a regular file
(or a link to one) is replaced atomically, a device, FIFO or socket is left as
it is and the settings are simply not kept; a file that was not read (too
large, not a regular file) is never written. The format is Qt's INI (what
QSettings writes on Linux), so an existing settings file reads as before.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

log = logging.getLogger(__name__)

ORGANIZATION = "CPU Doctor"
APPLICATION = "CPU Doctor"
# Window geometry, state, the page, the sampling rate and an interpreter's path: a few kB. A settings file
# 256 times that is not one CPU Doctor wrote.
MAX_BYTES = 1 << 20


def settings_path() -> Path:
    """Where the window keeps its settings: ``$XDG_CONFIG_HOME/CPU Doctor/CPU Doctor.conf`` on Linux (the file
    QSettings() used there), the platform's configuration folder elsewhere."""
    folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    return Path(folder or Path.home() / ".config") / ORGANIZATION / f"{APPLICATION}.conf"


class WindowSettings(QSettings):
    """QSettings on a private copy of ``path``; :meth:`sync` writes the copy back to ``path`` safely.

    ``fileName()`` answers the real file (the window keeps its lab runs beside it); ``problem`` says why
    the real file was not read or not written ("" when it was).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.problem = ""
        self._keep = True                  # False: the file there was not read, so it is not written either
        self._saved = self._read()
        try:
            folder = tempfile.mkdtemp(prefix="cpudoctor-settings-")     # private: 0700
            copy = Path(folder) / "settings.conf"
            copy.write_bytes(self._saved)
        except OSError as exc:             # no temporary folder: the window runs, its settings are not kept
            self._note(f"the window's settings are not kept: no temporary folder ({exc.strerror or exc})")
            folder, copy = None, Path(tempfile.gettempdir()) / "cpudoctor-no-such-folder" / "settings.conf"
        super().__init__(str(copy), QSettings.Format.IniFormat)
        self._copy = copy
        if folder is not None:
            weakref.finalize(self, shutil.rmtree, folder, True)

    def _read(self) -> bytes:
        from cpudoctor.kits.rooted import read_bytes_checked

        try:
            return read_bytes_checked(self.path, MAX_BYTES)
        except FileNotFoundError:
            return b""
        except (OSError, ValueError) as exc:
            self._keep = False
            self._note(f"the window's settings in {self.path} were not read ({getattr(exc, 'strerror', None) or exc})"
                       "; the window starts with its defaults and leaves that file as it is")
            return b""

    def _note(self, text: str) -> None:
        if text != self.problem:           # once per change, not at every save
            self.problem = text
            log.warning("%s", text)

    def fileName(self) -> str:  # noqa: N802 - Qt API
        return str(self.path)

    def sync(self) -> None:
        """Qt writes its private copy; the copy's bytes go to the real file when they changed."""
        super().sync()
        try:
            data = self._copy.read_bytes()
        except OSError:
            return
        if data == self._saved or not self._keep:
            return
        from cpudoctor.fileio import WriteError, atomic_write

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, data, regular_only=True)
        except (OSError, WriteError) as exc:
            self._note(f"the window's settings were not saved: {getattr(exc, 'strerror', None) or exc}")
            return
        self._saved = data


def window_settings(path: Path | None = None) -> WindowSettings:
    """The window's settings, from ``path`` (default :func:`settings_path`)."""
    return WindowSettings(settings_path() if path is None else path)
