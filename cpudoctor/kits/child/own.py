"""How CPU Doctor starts a child of its *own* code: from a Python install, or from the frozen app.

Some children run CPU Doctor's own modules (the CPUID cross-check, the probe
trace of ``capture``, lab jobs in CPU Doctor's own environment). Installed
with pip, that is ``python -m cpudoctor.probes.cpu.cpuid_check``. In the
standalone app built by ``make dist`` (PyInstaller), ``sys.executable`` is the
app itself and there is no ``-m``: the app understands two hidden arguments
instead, handled before anything else is imported:

``cpudoctor --run-module MODULE [ARGS...]``
    runs ``MODULE`` as ``__main__`` (what ``python -m MODULE ARGS`` does);
``cpudoctor --run-script FILE.py [ARGS...]``
    runs the file as ``__main__`` with its folder first on ``sys.path`` (what
    ``python FILE.py ARGS`` does), for the standalone child scripts when no
    other interpreter was chosen.

Every place that starts CPU Doctor's own code goes through :func:`own_command`
or :func:`own_script_command`, so both ways of running stay one code path.

Programs that are *not* CPU Doctor (the user's Python, conda, ``xdg-open``)
must not inherit the frozen app's private library path: PyInstaller's
bootloader prepends its folder to ``LD_LIBRARY_PATH`` and keeps the user's
value in ``LD_LIBRARY_PATH_ORIG``. :func:`restore_library_path` puts the
user's value back in this process's environment at start-up (the app's own
libraries are already loaded, and the bootloader sets the path again for
each child of the app itself), so every later child sees the user's
environment.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path

RUN_MODULE = "--run-module"
RUN_SCRIPT = "--run-script"
# Variables PyInstaller's bootloader changes, with the name it keeps the user's value under.
_SAVED_BY_BOOTLOADER = {"LD_LIBRARY_PATH": "LD_LIBRARY_PATH_ORIG", "LIBPATH": "LIBPATH_ORIG"}


def frozen() -> bool:
    """True inside the standalone app (PyInstaller sets ``sys.frozen``)."""
    return bool(getattr(sys, "frozen", False))


def bundle_dir() -> Path | None:
    """The folder the frozen app unpacked its files to (``sys._MEIPASS``); None when not frozen."""
    folder = getattr(sys, "_MEIPASS", None)
    return Path(folder) if frozen() and folder else None


def app_executable() -> str:
    """The frozen app's executable for children: on Windows the console one, never ``cpudoctor-gui.exe``.

    The windowed .exe has no standard output (``sys.stdout`` is None there), and
    children talk to CPU Doctor through theirs.
    """
    exe = Path(sys.executable)
    if exe.stem.endswith("-gui"):
        console = exe.with_name(exe.stem[: -len("-gui")] + exe.suffix)
        if console.is_file():
            return str(console)
    return sys.executable


def own_command(module: str, *args: str) -> list[str]:
    """The argv that runs CPU Doctor's module ``module`` as a program, in this installation."""
    if frozen():
        return [app_executable(), RUN_MODULE, module, *args]
    return [sys.executable, "-m", module, *args]


def own_script_command(script: Path | str, *args: str) -> list[str]:
    """The argv that runs a standalone script with CPU Doctor's own interpreter."""
    if frozen():
        return [app_executable(), RUN_SCRIPT, str(script), *args]
    return [sys.executable, str(script), *args]


def restore_library_path(environ: MutableMapping[str, str] | None = None) -> None:
    """Give children the user's library path back (frozen app only; see the module docstring)."""
    if not frozen():
        return
    env = os.environ if environ is None else environ
    for name, saved in _SAVED_BY_BOOTLOADER.items():
        if saved in env:
            env[name] = env.pop(saved)
        elif name in env and bundle_dir() is not None:
            # The bootloader had nothing to save: the whole value is the bundle's folder (plus
            # anything added after it), and the user had no such variable.
            ours = str(bundle_dir())
            rest = [p for p in env[name].split(os.pathsep) if p and os.path.realpath(p) != os.path.realpath(ours)]
            if rest:
                env[name] = os.pathsep.join(rest)
            else:
                del env[name]


def run_hidden_entry(argv: Sequence[str]) -> int | None:
    """Handle ``--run-module`` / ``--run-script``; None when ``argv`` is neither (a normal start).

    Works the same from a Python install (``cpudoctor --run-module ...``), so the
    frozen path is tested without building the app.
    """
    if not argv or argv[0] not in (RUN_MODULE, RUN_SCRIPT):
        return None
    if len(argv) < 2:
        print(f"cpudoctor: {argv[0]} needs a {'module' if argv[0] == RUN_MODULE else 'file'} to run",
              file=sys.stderr)
        return 2
    target, args = argv[1], list(argv[2:])
    try:
        if argv[0] == RUN_MODULE:
            if _find_spec(target) is None:
                print(f"cpudoctor: {RUN_MODULE}: no module {target!r} in this installation", file=sys.stderr)
                return 2
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            script = Path(target)
            if not script.is_file():
                print(f"cpudoctor: {RUN_SCRIPT}: no such file {script}", file=sys.stderr)
                return 2
            sys.argv = [str(script), *args]
            sys.path.insert(0, str(script.resolve().parent))
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0


def _find_spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):         # a parent package is missing, or an empty name
        return None
