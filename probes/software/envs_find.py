"""Where Python environments are: candidate folders and interpreters, found from files (and two listings).

* Method 1, conda: ``conda env list --json`` when conda is on PATH (slow, so
  cached, and only for the full listing), ``~/.conda/environments.txt`` and the
  ``envs/`` folders of the usual installs (miniconda, anaconda, miniforge,
  mambaforge, micromamba, /opt/conda);
* Method 2, virtual environments: the active one (``$VIRTUAL_ENV``), a
  ``.venv`` / ``venv`` in the working folder, ``~/.virtualenvs`` (and
  ``$WORKON_HOME``), pipenv's and poetry's folders, pipx's venvs (marked: those
  are tools, not training environments);
* Method 3, interpreters: findpython's providers (PATH, pyenv, asdf, rye, uv,
  the Windows registry, macOS frameworks) and, on Windows, the ``py`` launcher's
  list (``py -0p``).

On Windows the same methods look where Windows installs put things:
``%USERPROFILE%\\.conda\\environments.txt``, ``Anaconda3`` / ``Miniconda3`` /
``miniforge3`` under ``%USERPROFILE%``, ``%LOCALAPPDATA%`` and
``%ProgramData%`` (all-users installs), ``Scripts\\python.exe`` venvs,
virtualenvwrapper-win's ``%USERPROFILE%\\Envs`` and Poetry's and pipx's
``%LOCALAPPDATA%`` folders. Where to look comes from the environment variables
(:class:`Context`), not from the OS this runs on, so a Windows layout is tested
on Linux too. Nothing found here is run, except conda and ``py`` for their
listings (bounded in time and output, cached).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cpudoctor.model import PythonEnv
from cpudoctor.probes.software import pyquery
from cpudoctor.probes.software.envcache import EnvCache
from cpudoctor.probes.software.envs_files import MAX_NAME, access, children, isfile, plausible, stamp
from cpudoctor.probes.software.sitedirs import isdir
from cpudoctor.kits.rooted import read_bytes_checked

CONDA_TIMEOUT_S = 15.0       # conda is a Python program of its own: seconds on a cold disk


CONDA_MAX_OUTPUT = 4 << 20


@dataclass
class Context:
    """Where to look: injectable, so tests build a fake home, working folder and PATH."""

    environ: Mapping[str, str]
    home: Path | None
    cwd: Path | None
    own_prefix: str | None = field(default_factory=lambda: own_prefix())

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None, home: Path | None = None,
                cwd: Path | None = None) -> "Context":
        env = dict(os.environ if environ is None else environ)
        if home is None:
            try:
                home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
            except RuntimeError:          # no home directory (some containers)
                home = None
        if cwd is None:
            try:
                cwd = Path.cwd()
            except OSError:               # the working folder was deleted
                cwd = None
        return cls(env, home, cwd)


def own_prefix() -> str | None:
    """CPU Doctor's own environment; None in the standalone app, whose bundle is no Python to pick."""
    from cpudoctor.kits.child.own import frozen

    return None if frozen() else sys.prefix


@dataclass
class Found:
    """Candidates (path -> how it was found) and the names that could not be candidates, as rows."""

    candidates: dict[Path, str] = field(default_factory=dict)
    skipped: list[PythonEnv] = field(default_factory=list)

    def add(self, path: Path, how: str) -> None:
        self.candidates.setdefault(path, how)


def interpreter_of(prefix: Path) -> Path | None:
    """The python of an environment folder (POSIX bin/, Windows Scripts/ or the root)."""
    for rel in ("bin/python3", "bin/python", "Scripts/python.exe", "python.exe"):
        candidate = prefix / rel
        if isfile(candidate) and access(candidate, os.X_OK):
            return candidate
    return None


def is_env_folder(path: Path) -> bool:
    return isfile(path / "pyvenv.cfg") or isdir(path / "conda-meta")


CONDA_NAMES = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", "miniconda", "anaconda",
               ".conda", "conda", "Anaconda3", "Miniconda3", "Miniforge3")


def conda_roots(ctx: Context) -> list[Path]:
    """Folders of conda installs: known names under home and /opt (Windows: %LOCALAPPDATA%, %ProgramData%),
    plus what conda's variables name."""
    roots: list[Path] = []
    if ctx.home is not None:
        roots += [ctx.home / n for n in CONDA_NAMES]
    roots += [Path("/opt/conda"), Path("/opt/miniconda3"), Path("/opt/anaconda3"), Path("/opt/miniforge3")]
    for var in ("LOCALAPPDATA", "ProgramData", "PROGRAMDATA"):      # per-user and all-users Windows installs
        if ctx.environ.get(var):
            roots += [Path(ctx.environ[var]) / n for n in ("Anaconda3", "Miniconda3", "miniforge3", "anaconda3",
                                                            "miniconda3")]
    for var in ("CONDA_EXE", "MAMBA_EXE"):
        exe = ctx.environ.get(var)
        if plausible(exe):
            roots.append(Path(exe).parent.parent)        # <root>/bin/conda, <root>\\Scripts\\conda.exe
    for var in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT"):
        if plausible(ctx.environ.get(var)):
            roots.append(Path(ctx.environ[var]))
    return list(dict.fromkeys(roots))


def conda_candidates(ctx: Context, found: Found, run_conda: bool, cache: EnvCache | None) -> None:
    if ctx.home is not None:
        listed = ctx.home / ".conda" / "environments.txt"
        for line in listed_lines(listed, found, "~/.conda/environments.txt"):
            found.add(Path(line), "~/.conda/environments.txt")
    for root in conda_roots(ctx):
        if isdir(root / "conda-meta"):
            found.add(root, "conda base")
        for sub in children(root / "envs"):
            if isdir(sub / "conda-meta"):
                found.add(sub, f"{tilde(root, ctx)}/envs")
    if run_conda:
        for prefix in conda_env_list(ctx, cache):
            found.add(Path(prefix), "conda env list")


def conda_env_list(ctx: Context, cache: EnvCache | None) -> list[str]:
    """``conda env list --json``, cached while conda and its environments file are unchanged; bounded in time
    and output (a ``$CONDA_EXE`` that floods or hangs is stopped)."""
    path = ctx.environ.get("PATH")
    exe = ctx.environ.get("CONDA_EXE") or shutil.which("conda", path=path) or shutil.which("mamba", path=path)
    if not plausible(exe):
        return []
    listed = ctx.home / ".conda" / "environments.txt" if ctx.home else None
    key = json.dumps([exe, stamp(Path(exe)), stamp(listed) if listed else None])
    hit = cache.get("conda", key) if cache is not None else None
    if isinstance(hit, list):
        return [e for e in hit if plausible(e)]
    outcome = pyquery.run_all([[exe, "env", "list", "--json"]], time.monotonic() + CONDA_TIMEOUT_S,
                              env=dict(ctx.environ), max_output=CONDA_MAX_OUTPUT)[0]
    envs: list[str] = []
    if outcome.status == "ok":
        try:
            data = json.loads(outcome.stdout.decode("utf-8"))
            listed_envs = data.get("envs", []) if isinstance(data, dict) else []
            envs = [e for e in listed_envs if plausible(e)] if isinstance(listed_envs, list) else []
        except (ValueError, UnicodeDecodeError, RecursionError):
            envs = []
    if cache is not None and outcome.status in ("ok", "failed"):
        cache.put("conda", key, envs)
    return envs


def active_candidates(ctx: Context, found: Found) -> None:
    """The cheapest facts: the activated environments, then the working folder's."""
    for var, how in (("VIRTUAL_ENV", "active ($VIRTUAL_ENV)"), ("CONDA_PREFIX", "active ($CONDA_PREFIX)")):
        if plausible(ctx.environ.get(var)):
            found.add(Path(ctx.environ[var]), how)
    for folder in cwd_env_folders(ctx):
        found.add(folder, "working folder")


def venv_candidates(ctx: Context, found: Found) -> None:
    active_candidates(ctx, found)
    folders: list[tuple[Path, str]] = []
    if plausible(ctx.environ.get("WORKON_HOME")):
        folders.append((Path(ctx.environ["WORKON_HOME"]), "$WORKON_HOME"))
    if ctx.home is not None:
        folders += [
            (ctx.home / ".virtualenvs", "~/.virtualenvs"),
            (ctx.home / ".local" / "share" / "virtualenvs", "pipenv"),
            (ctx.home / ".cache" / "pypoetry" / "virtualenvs", "poetry"),
            (ctx.home / ".local" / "pipx" / "venvs", "pipx"),
            (ctx.home / ".local" / "share" / "pipx" / "venvs", "pipx"),
            (ctx.home / "Envs", "virtualenvwrapper-win (~\\Envs)"),
            (ctx.home / "pipx" / "venvs", "pipx"),
        ]
    local = ctx.environ.get("LOCALAPPDATA")
    if local:                              # Windows: Poetry's and pipx's folders
        folders += [(Path(local) / "pypoetry" / "Cache" / "virtualenvs", "poetry"),
                    (Path(local) / "pipx" / "pipx" / "venvs", "pipx")]
    for folder, how in folders:
        for sub in children(folder):
            if is_env_folder(sub):
                found.add(sub, how)


def cwd_env_folders(ctx: Context) -> list[Path]:
    if ctx.cwd is None:
        return []
    return [ctx.cwd / name for name in (".venv", "venv", ".env", "env") if is_env_folder(ctx.cwd / name)]


PY_LAUNCHER_TIMEOUT_S = 10.0


PY_LAUNCHER_MAX_OUTPUT = 256 * 1024


_PY_LIST_LINE = re.compile(r"^\s*-\S+(?:\s+\*)?\s+(\S.*?\.exe)\s*$", re.IGNORECASE)


def parse_py_list(text: str) -> list[str]:
    """Interpreter paths from the Windows ``py`` launcher's ``py -0p`` listing (paths may hold spaces)."""
    out = []
    for line in (text or "").splitlines()[:200]:
        m = _PY_LIST_LINE.match(line)
        if m and m.group(1) not in out and plausible(m.group(1)):
            out.append(m.group(1))
    return out


def py_launcher_candidates(ctx: Context, found: Found, cache: EnvCache | None) -> None:
    """What the ``py`` launcher knows (PEP 514 registrations and the Store's Pythons), cached per launcher;
    bounded in time and output like ``conda env list`` (a ``py`` that hangs or floods is stopped)."""
    exe = shutil.which("py", path=ctx.environ.get("PATH"))
    if not plausible(exe):
        return
    key = json.dumps([exe, stamp(Path(exe))])
    listed = cache.get("py", key) if cache is not None else None
    if not isinstance(listed, list):
        outcome = pyquery.run_all([[exe, "-0p"]], time.monotonic() + PY_LAUNCHER_TIMEOUT_S, env=dict(ctx.environ),
                                  max_output=PY_LAUNCHER_MAX_OUTPUT)[0]
        listed = parse_py_list(outcome.stdout.decode("utf-8", "replace")) if outcome.status == "ok" else []
        if cache is not None and outcome.status in ("ok", "failed"):
            cache.put("py", key, listed)
    for p in listed:
        if plausible(p):
            found.add(Path(p), "py launcher")


def interpreter_candidates(ctx: Context, found: Found) -> None:
    """Interpreters from findpython's providers (PATH, pyenv, asdf, rye, uv, registry, macOS)."""
    try:
        from findpython.providers import ALL_PROVIDERS
    except ImportError:                    # a broken install: PATH alone still works
        ALL_PROVIDERS = {}
    with _environ(ctx.environ):            # the providers read PATH, PYENV_ROOT, ... from os.environ
        for name, provider_cls in ALL_PROVIDERS.items():
            try:
                provider = provider_cls.create()
                pythons = list(provider.find_pythons()) if provider is not None else []
            except Exception:  # noqa: BLE001 - one broken provider must not hide the others
                continue
            for pv in pythons:
                exe = Path(pv.executable)
                if "shims" in exe.parts or not plausible(str(exe)):   # pyenv/asdf shims name the real ones
                    continue
                found.add(exe, name)


@contextlib.contextmanager
def _environ(environ: Mapping[str, str]):
    """``os.environ`` as ``environ`` for the block; untouched (and thread-safe) when they are equal,
    which is always the case outside tests."""
    if dict(environ) == dict(os.environ):
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def candidates(ctx: Context, *, run_conda: bool, cache: EnvCache | None) -> Found:
    """Every candidate, cheapest facts first (active, working folder, conda, venv folders, interpreters)."""
    found = Found()
    venv_candidates(ctx, found)
    conda_candidates(ctx, found, run_conda, cache)
    interpreter_candidates(ctx, found)
    if run_conda:                          # the listing runs tools (conda env list, Windows' py -0p); decide does not
        py_launcher_candidates(ctx, found, cache)
    if ctx.own_prefix is not None:
        found.add(Path(ctx.own_prefix), "CPU Doctor")
    return found


def listed_lines(path: Path, found: Found, where: str) -> list[str]:
    """The folders a list file names (``~/.conda/environments.txt``); a line that cannot name a folder
    (binary, over-long) is skipped and listed as a row that says so."""
    try:
        text = read_bytes_checked(path).decode("utf-8", "replace")
    except OSError as exc:
        if exc.errno in (errno.EFBIG, errno.EINVAL):
            found.skipped.append(PythonEnv(python=where, prefix="", kind="conda", name=where, found_by=[where],
                                           error=f"{where} was not read ({exc.strerror})"))
        return []
    except ValueError:
        return []
    lines = []
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if plausible(line) and "\ufffd" not in line:
            lines.append(line)
            continue
        what = f"{len(line):,} characters long" if len(line) > MAX_NAME else "binary or control characters"
        found.skipped.append(PythonEnv(
            python=f"{where}:{n}", prefix="", kind="conda", name=f"{where} line {n}", found_by=[where],
            error=f"line {n} of {where} is not a folder's name ({what}): skipped"))
    return lines


def tilde(path: Path, ctx: Context) -> str:
    if ctx.home is not None:
        try:
            return "~/" + str(path.relative_to(ctx.home))
        except ValueError:
            pass
    return str(path)
