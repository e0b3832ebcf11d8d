"""The X11 libraries Qt's xcb plugin needs: which are missing, and the apt line that installs them.

Standard library only, on purpose: ``make run`` runs this file by path with the
system Python *before* it installs anything (``python3 gui/x11_libs.py``), so
a desktop without these libraries learns it in a second instead of after the
minute-long install; the launcher (:mod:`cpudoctor.gui.app`) asks the same
question again before Qt is touched.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping

# Libraries Qt 6's xcb platform plugin loads that minimal installs lack, with the
# Debian/Ubuntu package that provides each.
XCB_LIBS: tuple[tuple[str, str], ...] = (
    ("libxcb-cursor.so.0", "libxcb-cursor0"),
    ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxcb-image.so.0", "libxcb-image0"),
    ("libxcb-render-util.so.0", "libxcb-render-util0"),
    ("libxcb-xkb.so.1", "libxcb-xkb1"),
    ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libxcb-shape.so.0", "libxcb-shape0"),
)
APT_PACKAGES = ("xvfb",) + tuple(pkg for _, pkg in XCB_LIBS)
APT_LINE = f"sudo apt-get install -y {' '.join(APT_PACKAGES)}"


def uses_xcb(env: Mapping[str, str] | None = None, platform: str | None = None) -> bool:
    """True when Qt will load its xcb (X11) plugin."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return False
    qpa = env.get("QT_QPA_PLATFORM", "")
    if qpa:
        return qpa.split(":")[0].split(";")[0] == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def missing_xcb_libs(load: Callable[[str], object] = ctypes.CDLL) -> list[tuple[str, str]]:
    """(library, Debian package) for each xcb library the dynamic loader cannot open.

    dlopen is the very test Qt's plugin loader will do, so it is exact where
    ``ctypes.util.find_library`` (ldconfig's cache) can miss LD_LIBRARY_PATH.
    """
    missing = []
    for lib, pkg in XCB_LIBS:
        try:
            load(lib)
        except OSError:
            missing.append((lib, pkg))
    return missing


def missing_text(missing: list[tuple[str, str]]) -> str:
    """"the window needs X11 libraries that are not installed: …" with each library's package."""
    names = ", ".join(f"{lib} (package {pkg})" for lib, pkg in missing)
    return f"the window needs X11 libraries that are not installed: {names}."


def main(env: Mapping[str, str] | None = None, load: Callable[[str], object] = ctypes.CDLL) -> int:
    """``make run``'s check before its install: 1 (and the apt line) when the window would need missing
    libraries; 0 when it would not (no display: the app prints its report in the terminal)."""
    if not uses_xcb(env):
        return 0
    missing = missing_xcb_libs(load)
    if not missing:
        return 0
    print(f"CPU Doctor: {missing_text(missing)}", file=sys.stderr)
    print("Install them (Debian/Ubuntu), then run `make run` again:", file=sys.stderr)
    print(f"    {APT_LINE}", file=sys.stderr)
    print("(`make run X11_CHECK=no` installs without them; the app then prints its report in the terminal.)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
