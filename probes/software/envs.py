"""The Python environments on this machine, and which one the user most likely trains in.

CPU Doctor runs from its own environment, but a person's training runs in
``conda activate amd_dl`` or a project's ``.venv``: the software facts must be
about *that* one. This module finds environments without importing anything
in them:

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
``%LOCALAPPDATA%`` folders. Where to look comes from the environment variables,
not from the OS this runs on, so a Windows layout is tested on Linux too.

**Which one to describe** (:func:`training_environment`) is decided from cheap
facts first, running at most the chosen interpreter: ``--python``, then
``$CPUDOCTOR_PYTHON``, then the active environment, the working folder's
``.venv``, else the best candidate judged from its files (PyTorch's
``torch/version.py`` and the dist-info folders, read, never imported): among
usable environments one with torch wins over one without, CPU Doctor's own
included (it is the default only when it is the one with torch, or nothing else
usable was found); activated environments come first whatever they hold.
**The listing** (:func:`discover`: ``cpudoctor envs``, the window's picker)
asks every interpreter, all at once under one deadline
(:mod:`cpudoctor.probes.software.pyquery`).

Each interpreter is asked with ``-I -S`` (no site, so no ``.pth`` file runs,
no package is imported) for its version and site folders; the packages (torch
and its build, numpy) are then read from their metadata and ``torch/version.py``
as files (:mod:`.dists`, :mod:`.sitedirs`). Answers **and failures** are cached
per interpreter, keyed on the files that would change them
(:mod:`.envcache`), so a second look takes milliseconds and an interpreter
that hangs costs its deadline once. Whatever a file, folder name or
interpreter holds, the answer is an environment with an ``error``, never an
exception.

Environments only exist on the live machine: a captured tree has none, which
is why this probe takes the home folder, working folder and environment
variables instead of a ``root``.
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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cpudoctor.probes.software import pyquery
from cpudoctor.probes.software.dists import versions as dist_versions
from cpudoctor.probes.software.envcache import TIMEOUT_TTL_S, EnvCache
from cpudoctor.probes.software.packages import build_kind, venv_name
from cpudoctor.probes.software.sitedirs import guess_site_dirs, isdir, site_dirs
from cpudoctor.kits.rooted import read_bytes_checked

QUERY_TIMEOUT_S = 10.0       # one interpreter asked on its own (--python): ~30 ms when healthy
LIST_DEADLINE_S = 8.0        # every interpreter of the listing together (`envs`, the picker)
DECIDE_DEADLINE_S = 5.0      # the default's decision: the few candidates it asks, together
DECIDE_TRY_S = 3.0           # ... and each of them (a healthy interpreter answers in 30 ms, a busy one in 1 s)
CONDA_TIMEOUT_S = 15.0       # conda is a Python program of its own: seconds on a cold disk
CONDA_MAX_OUTPUT = 4 << 20
FAILURE_TTL_S = TIMEOUT_TTL_S
MIN_TIMEOUT_TO_CACHE_S = 2.0  # a timeout is remembered only when the interpreter had this long to answer
MAX_DECIDE_TRIES = 6
MAX_NAME = 4096              # a path longer than this is no environment's (the kernel's PATH_MAX)
MAX_CHILDREN = 2000          # folders looked at in one envs/ or ~/.virtualenvs folder
MIN_PYTHON = (3, 8)          # the oldest Python the child scripts are written for
CACHE_FORMAT = 2

KINDS = ("conda", "venv", "pyenv", "system", "pipx")
QUERY = pyquery.QUERY


@dataclass
class PythonEnv:
    """One Python environment, described from its files (nothing in it was imported)."""

    python: str                            # the interpreter to run, absolute
    prefix: str                            # the environment's folder
    kind: str                              # conda | venv | pyenv | system | pipx
    name: str                              # what people call it: conda env name, venv folder, "python3.11"
    version: str | None = None             # Python version, e.g. "3.11.7"
    implementation: str | None = None      # cpython, pypy
    torch: str | None = None               # e.g. "2.13.0+cpu"; None = not installed
    torch_build: str | None = None         # cpu | cuda | rocm | xpu | unknown
    torch_detail: str = ""                 # e.g. "+cu121 (CUDA 12.1)"
    numpy: str | None = None
    active: bool = False                   # $VIRTUAL_ENV / $CONDA_PREFIX
    in_cwd: bool = False                   # a .venv in the working folder
    own: bool = False                      # CPU Doctor's own environment
    found_by: list[str] = field(default_factory=list)
    site_dirs: list[str] = field(default_factory=list)
    error: str | None = None               # why it cannot be used (not a Python, Python 2, hangs...)
    from_files: bool = False               # described from its files alone: its interpreter was not asked

    @property
    def usable(self) -> bool:
        return self.error is None

    def label(self) -> str:
        """One short line for a picker: name, kind, Python and torch."""
        parts = [self.name, f"({self.kind}"]
        parts[-1] += f", Python {self.version})" if self.version else ")"
        if self.torch:
            parts.append(f"torch {self.torch}")
        elif self.usable:
            parts.append("no torch")
        if self.own:
            parts.append("— CPU Doctor's own")
        if self.error:
            parts.append(f"— {self.error}")
        return " ".join(parts)


class EnvError(ValueError):
    """The environment asked for cannot be used; the message says why and what to do."""


@dataclass
class _Context:
    """Where to look: injectable, so tests build a fake home, working folder and PATH."""

    environ: Mapping[str, str]
    home: Path | None
    cwd: Path | None
    own_prefix: str | None = field(default_factory=lambda: _own_prefix())

    @classmethod
    def current(cls, environ: Mapping[str, str] | None = None, home: Path | None = None,
                cwd: Path | None = None) -> "_Context":
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


def _own_prefix() -> str | None:
    """CPU Doctor's own environment; None in the standalone app, whose bundle is no Python to pick."""
    from cpudoctor.kits.child.own import frozen

    return None if frozen() else sys.prefix


# --- finding candidate prefixes and interpreters (files only: nothing is run) -----------------


@dataclass
class _Found:
    """Candidates (path -> how it was found) and the names that could not be candidates, as rows."""

    candidates: dict[Path, str] = field(default_factory=dict)
    skipped: list[PythonEnv] = field(default_factory=list)

    def add(self, path: Path, how: str) -> None:
        self.candidates.setdefault(path, how)


def _interpreter_of(prefix: Path) -> Path | None:
    """The python of an environment folder (POSIX bin/, Windows Scripts/ or the root)."""
    for rel in ("bin/python3", "bin/python", "Scripts/python.exe", "python.exe"):
        candidate = prefix / rel
        if _isfile(candidate) and _access(candidate, os.X_OK):
            return candidate
    return None


def _is_env_folder(path: Path) -> bool:
    return _isfile(path / "pyvenv.cfg") or isdir(path / "conda-meta")


CONDA_NAMES = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba", "miniconda", "anaconda",
               ".conda", "conda", "Anaconda3", "Miniconda3", "Miniforge3")


def _conda_roots(ctx: _Context) -> list[Path]:
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
        if _plausible(exe):
            roots.append(Path(exe).parent.parent)        # <root>/bin/conda, <root>\\Scripts\\conda.exe
    for var in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT"):
        if _plausible(ctx.environ.get(var)):
            roots.append(Path(ctx.environ[var]))
    return list(dict.fromkeys(roots))


def _conda_candidates(ctx: _Context, found: _Found, run_conda: bool, cache: EnvCache | None) -> None:
    if ctx.home is not None:
        listed = ctx.home / ".conda" / "environments.txt"
        for line in _listed_lines(listed, found, "~/.conda/environments.txt"):
            found.add(Path(line), "~/.conda/environments.txt")
    for root in _conda_roots(ctx):
        if isdir(root / "conda-meta"):
            found.add(root, "conda base")
        for sub in _children(root / "envs"):
            if isdir(sub / "conda-meta"):
                found.add(sub, f"{_tilde(root, ctx)}/envs")
    if run_conda:
        for prefix in _conda_env_list(ctx, cache):
            found.add(Path(prefix), "conda env list")


def _conda_env_list(ctx: _Context, cache: EnvCache | None) -> list[str]:
    """``conda env list --json``, cached while conda and its environments file are unchanged; bounded in time
    and output (a ``$CONDA_EXE`` that floods or hangs is stopped)."""
    path = ctx.environ.get("PATH")
    exe = ctx.environ.get("CONDA_EXE") or shutil.which("conda", path=path) or shutil.which("mamba", path=path)
    if not _plausible(exe):
        return []
    listed = ctx.home / ".conda" / "environments.txt" if ctx.home else None
    key = json.dumps([exe, _stamp(Path(exe)), _stamp(listed) if listed else None])
    hit = cache.get("conda", key) if cache is not None else None
    if isinstance(hit, list):
        return [e for e in hit if _plausible(e)]
    outcome = pyquery.run_all([[exe, "env", "list", "--json"]], time.monotonic() + CONDA_TIMEOUT_S,
                              env=dict(ctx.environ), max_output=CONDA_MAX_OUTPUT)[0]
    envs: list[str] = []
    if outcome.status == "ok":
        try:
            data = json.loads(outcome.stdout.decode("utf-8"))
            listed_envs = data.get("envs", []) if isinstance(data, dict) else []
            envs = [e for e in listed_envs if _plausible(e)] if isinstance(listed_envs, list) else []
        except (ValueError, UnicodeDecodeError, RecursionError):
            envs = []
    if cache is not None and outcome.status in ("ok", "failed"):
        cache.put("conda", key, envs)
    return envs


def _active_candidates(ctx: _Context, found: _Found) -> None:
    """The cheapest facts: the activated environments, then the working folder's."""
    for var, how in (("VIRTUAL_ENV", "active ($VIRTUAL_ENV)"), ("CONDA_PREFIX", "active ($CONDA_PREFIX)")):
        if _plausible(ctx.environ.get(var)):
            found.add(Path(ctx.environ[var]), how)
    for folder in _cwd_env_folders(ctx):
        found.add(folder, "working folder")


def _venv_candidates(ctx: _Context, found: _Found) -> None:
    _active_candidates(ctx, found)
    folders: list[tuple[Path, str]] = []
    if _plausible(ctx.environ.get("WORKON_HOME")):
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
        for sub in _children(folder):
            if _is_env_folder(sub):
                found.add(sub, how)


def _cwd_env_folders(ctx: _Context) -> list[Path]:
    if ctx.cwd is None:
        return []
    return [ctx.cwd / name for name in (".venv", "venv", ".env", "env") if _is_env_folder(ctx.cwd / name)]


PY_LAUNCHER_TIMEOUT_S = 10.0
PY_LAUNCHER_MAX_OUTPUT = 256 * 1024
# `py -0p`: " -V:3.12 *        C:\\...\\python.exe" (launcher 3.11+) or " -3.9-64        C:\\...\\python.exe" (older)
_PY_LIST_LINE = re.compile(r"^\s*-\S+(?:\s+\*)?\s+(\S.*?\.exe)\s*$", re.IGNORECASE)


def parse_py_list(text: str) -> list[str]:
    """Interpreter paths from the Windows ``py`` launcher's ``py -0p`` listing (paths may hold spaces)."""
    out = []
    for line in (text or "").splitlines()[:200]:
        m = _PY_LIST_LINE.match(line)
        if m and m.group(1) not in out and _plausible(m.group(1)):
            out.append(m.group(1))
    return out


def _py_launcher_candidates(ctx: _Context, found: _Found, cache: EnvCache | None) -> None:
    """What the ``py`` launcher knows (PEP 514 registrations and the Store's Pythons), cached per launcher;
    bounded in time and output like ``conda env list`` (a ``py`` that hangs or floods is stopped)."""
    exe = shutil.which("py", path=ctx.environ.get("PATH"))
    if not _plausible(exe):
        return
    key = json.dumps([exe, _stamp(Path(exe))])
    listed = cache.get("py", key) if cache is not None else None
    if not isinstance(listed, list):
        outcome = pyquery.run_all([[exe, "-0p"]], time.monotonic() + PY_LAUNCHER_TIMEOUT_S, env=dict(ctx.environ),
                                  max_output=PY_LAUNCHER_MAX_OUTPUT)[0]
        listed = parse_py_list(outcome.stdout.decode("utf-8", "replace")) if outcome.status == "ok" else []
        if cache is not None and outcome.status in ("ok", "failed"):
            cache.put("py", key, listed)
    for p in listed:
        if _plausible(p):
            found.add(Path(p), "py launcher")


def _interpreter_candidates(ctx: _Context, found: _Found) -> None:
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
                if "shims" in exe.parts or not _plausible(str(exe)):   # pyenv/asdf shims name the real ones
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


def _candidates(ctx: _Context, *, run_conda: bool, cache: EnvCache | None) -> _Found:
    """Every candidate, cheapest facts first (active, working folder, conda, venv folders, interpreters)."""
    found = _Found()
    _venv_candidates(ctx, found)
    _conda_candidates(ctx, found, run_conda, cache)
    _interpreter_candidates(ctx, found)
    if run_conda:                          # the listing runs tools (conda env list, Windows' py -0p); decide does not
        _py_launcher_candidates(ctx, found, cache)
    if ctx.own_prefix is not None:
        found.add(Path(ctx.own_prefix), "CPU Doctor")
    return found


# --- describing environments -----------------------------------------------------------------


@dataclass
class _Target:
    """One candidate on its way to a description: its interpreter once found, or the error."""

    path: Path
    how: str
    python: Path | None = None
    env: PythonEnv | None = None           # final already (an error found from files)


def _target(path: Path, how: str) -> _Target:
    """Find the interpreter of ``path`` (an interpreter or an environment folder) from files alone."""
    t = _Target(path, how)
    problem = _file_problem(path)
    if problem is not None:
        t.env = _error_env(path, how, problem)
        return t
    if isdir(path):
        t.python = _interpreter_of(path)
        if t.python is None:
            t.env = PythonEnv(python=str(path), prefix=str(path), kind="venv", name=_shown_name(path.name),
                              found_by=[how], error="no bin/python (or Scripts\\python.exe) in this folder")
        return t
    if not _access(path, os.X_OK):
        t.env = _error_env(path, how, "not an executable program")
        return t
    t.python = path
    return t


def _query_key(python: Path) -> str:
    return json.dumps([pyquery.QUERY, str(python), _stamp(python), _stamp(python.parent.parent / "pyvenv.cfg")])


def _cached_answer(cache: EnvCache | None, key: str) -> dict[str, Any] | None:
    """A remembered answer, checked again (the cache is a file anyone could have edited), or a remembered failure."""
    hit = cache.get("query", key) if cache is not None else None
    if not isinstance(hit, dict):
        return None
    if isinstance(hit.get("error"), str) and set(hit) <= {"error", "version", "prefix"}:
        return {k: v for k, v in hit.items() if isinstance(v, str)}
    try:
        return pyquery.checked(hit)
    except pyquery.BadAnswer:
        return None


def _ask(pythons: list[Path], deadline_s: float, cache: EnvCache | None) -> dict[Path, dict[str, Any]]:
    """The answers of ``pythons`` (cached ones first, the rest asked all at once), each checked, or its error."""
    answers: dict[Path, dict[str, Any]] = {}
    keys = {p: _query_key(p) for p in pythons}
    for p in pythons:
        hit = _cached_answer(cache, keys[p])
        if hit is not None:
            answers[p] = hit
    todo = [p for p in pythons if p not in answers]
    deadline = time.monotonic() + deadline_s
    outcomes = pyquery.run_all([[str(p), "-I", "-S", "-c", pyquery.QUERY] for p in todo], deadline)
    failed = [p for p, o in zip(todo, outcomes) if o.status == "failed"]
    # Python 2 and 3 before 3.4 refuse -I: ask those again the old way, within the same deadline.
    old = dict(zip(failed, pyquery.run_all([[str(p), "-E", "-S", "-c", pyquery.OLD_QUERY] for p in failed],
                                           deadline)))
    for p, outcome in zip(todo, outcomes):
        answer, ttl = _answer_of(p, outcome, old.get(p), deadline_s)
        answers[p] = answer
        if cache is not None and ttl is not False:
            cache.put("query", keys[p], answer, ttl=ttl)
    return answers


def _answer_of(python: Path, outcome: pyquery.Outcome, old: pyquery.Outcome | None,
               deadline_s: float) -> tuple[dict[str, Any], float | None | bool]:
    """(answer or error, how long to remember it: None for as long as its files stay, a TTL, False: not at all)."""
    if outcome.status == "ok":
        answer = pyquery.parse_query(outcome)
        return answer, (None if "error" not in answer else FAILURE_TTL_S)
    if outcome.status == "failed" and old is not None:
        legacy = pyquery.parse_old(old)
        if legacy is not None:
            return {**legacy, "error": _too_old(legacy["version"]) or "it failed at start-up"}, None
    error = {"error": pyquery.failure_text(outcome, deadline_s)}
    if outcome.status == "not-run" or (outcome.status == "timeout" and outcome.seconds < MIN_TIMEOUT_TO_CACHE_S):
        return error, False                 # it never had its chance: ask again next time
    return error, FAILURE_TTL_S


def _describe_many(items: list[tuple[Path, str]], ctx: _Context, cache: EnvCache | None,
                   deadline_s: float) -> list[PythonEnv]:
    """Describe every (path, how) in order: the interpreters that need asking are asked together."""
    targets = [_target(path, how) for path, how in items]
    pythons = list(dict.fromkeys(t.python for t in targets if t.env is None and t.python is not None))
    answers = _ask(pythons, deadline_s, cache)
    out = []
    for t in targets:
        if t.env is None:
            assert t.python is not None
            t.env = _from_answer(t.python, t.how, answers[t.python], ctx)
        out.append(t.env)
    return out


def _from_answer(python: Path, how: str, answer: dict[str, Any], ctx: _Context) -> PythonEnv:
    prefix = Path(answer.get("prefix") or _prefix_of(python))
    kind, name = _kind_and_name(prefix, python, how, ctx)
    env = PythonEnv(python=str(python), prefix=str(prefix), kind=kind, name=name,
                    version=answer.get("version"), implementation=answer.get("implementation"),
                    found_by=[how], error=answer.get("error"))
    if env.error is None:
        env.error = _too_old(env.version)
    if env.error is not None:
        return env
    _fill_from_files(env, site_dirs(prefix, answer, _pyvenv_cfg(prefix)), ctx)
    return env


def _fill_from_files(env: PythonEnv, dirs: list[Path], ctx: _Context) -> None:
    """torch, numpy and the flags that rank an environment, from its files."""
    prefix = Path(env.prefix)
    env.site_dirs = [str(d) for d in dirs]
    env.torch, env.torch_build, env.torch_detail = _torch_from_files(dirs)
    versions = dist_versions(dirs, ("torch", "numpy"))
    env.torch = env.torch or versions.get("torch")
    env.numpy = versions.get("numpy")
    env.active = str(prefix) in (ctx.environ.get("VIRTUAL_ENV"), ctx.environ.get("CONDA_PREFIX"))
    env.in_cwd = ctx.cwd is not None and prefix.parent == ctx.cwd and prefix.name in (".venv", "venv", ".env", "env")
    env.own = ctx.own_prefix is not None and _same(prefix, Path(ctx.own_prefix))


def _from_files(python: Path, how: str, ctx: _Context) -> PythonEnv:
    """A description without asking the interpreter: prefix, version and site folders from the layout
    (``pyvenv.cfg``, ``conda-meta``, ``lib/python3.X``). Good enough to rank candidates and for ``--fast``."""
    prefix = _prefix_of(python)
    kind, name = _kind_and_name(prefix, python, how, ctx)
    cfg = _pyvenv_cfg(prefix)
    version = _version_from_files(prefix, python, cfg)
    env = PythonEnv(python=str(python), prefix=str(prefix), kind=kind, name=name, version=version,
                    implementation=None, found_by=[how], from_files=True)
    env.error = _too_old(version)
    _fill_from_files(env, guess_site_dirs(prefix, version=version, home=ctx.home,
                                          user_site=kind in ("system", "pyenv"), cfg=cfg), ctx)
    return env


def describe(python_or_prefix: Path, how: str = "given", ctx: _Context | None = None,
             cache: "bool | Path | EnvCache" = False, *, ask: bool = True,
             timeout: float | None = None) -> PythonEnv:
    """Describe one environment from an interpreter or an environment folder; never raises.

    ``ask=False``: never run the interpreter; a remembered answer is used, else the environment is
    described from its files (``from_files``)."""
    ctx = ctx or _Context.current()
    store = EnvCache.open(cache, ctx.environ)
    path = _absolute(python_or_prefix)
    if ask:
        env = _describe_many([(path, how)], ctx, store, QUERY_TIMEOUT_S if timeout is None else timeout)[0]
    else:
        env = _describe_quietly(path, how, ctx, store)
    if store is not None and not isinstance(cache, EnvCache):
        store.save()
    return env


def _describe_quietly(path: Path, how: str, ctx: _Context, store: EnvCache | None) -> PythonEnv:
    t = _target(path, how)
    if t.env is not None:
        return t.env
    assert t.python is not None
    hit = _cached_answer(store, _query_key(t.python))
    return _from_answer(t.python, how, hit, ctx) if hit is not None else _from_files(t.python, how, ctx)


# --- the listing -----------------------------------------------------------------------------


def discover(environ: Mapping[str, str] | None = None, home: Path | None = None, cwd: Path | None = None,
             *, run_conda: bool = True, cache: bool | Path = True,
             deadline: float | None = None) -> list[PythonEnv]:
    """Every environment found, the one the user most likely trains in first.

    Every interpreter is asked at once; together they have ``deadline`` seconds (one that did not answer
    by then is listed with that reason, and remembered for a while)."""
    ctx = _Context.current(environ, home, cwd)
    store = EnvCache.open(cache, ctx.environ)
    found = _candidates(ctx, run_conda=run_conda, cache=store)
    items = [(path, how) for path, how in found.candidates.items() if _exists(path)]
    envs: dict[str, PythonEnv] = {}
    described = _describe_many(items, ctx, store, LIST_DEADLINE_S if deadline is None else deadline)
    for (_path, how), env in zip(items, described):
        key = _key(env)
        if key in envs:
            if how not in envs[key].found_by:
                envs[key].found_by.append(how)
            continue
        envs[key] = env
    if store is not None:
        store.save()
    return rank(list(envs.values())) + found.skipped


def _deliberate(e: PythonEnv) -> bool:
    """Activated by the user (a conda base that shells activate by themselves does not count)."""
    return e.active and not (e.kind == "conda" and e.name == "base")


def _score(e: PythonEnv) -> tuple:
    """How likely the user trains in ``e``: usable; not a pipx tool; activated by the user; with torch (an
    environment without it is rarely where one trains: CPU Doctor's own with torch wins over one without);
    not CPU Doctor's own; its Python version known (a folder judged from its files whose version nothing
    tells is suspect); the working folder's; a conda env or venv rather than a bare interpreter; not
    conda's base."""
    chosen = _deliberate(e)
    return (e.usable, e.kind != "pipx", chosen, bool(e.torch), not e.own or chosen, e.version is not None, e.in_cwd,
            e.kind in ("conda", "venv"), e.name != "base")


def rank(envs: list[PythonEnv]) -> list[PythonEnv]:
    """Most likely training environment first (see :func:`_score`); CPU Doctor's own and pipx's last."""
    return sorted(envs, key=_score, reverse=True)


def likely_training_env(envs: list[PythonEnv]) -> PythonEnv | None:
    """The default environment to describe: the best-ranked usable one."""
    return next((e for e in rank(envs) if e.usable), None)


def why_chosen(env: PythonEnv | None, others: Iterable[PythonEnv] = ()) -> str:
    """How the default was chosen among ``others`` (the rest of what was found): a :data:`CHOSEN_BY` code."""
    if env is not None and _deliberate(env):
        return "active"
    if env is None or env.own:
        usable = any(o.usable and not o.own for o in others)
        return "own-torch" if env is not None and env.torch and usable else "only-own"
    if env.in_cwd:
        return "working-folder"
    return "likely"


# --- the default, from cheap facts ---------------------------------------------------------------


def decide(environ: Mapping[str, str] | None = None, home: Path | None = None, cwd: Path | None = None,
           *, cache: bool | Path = True, ask: bool = True, deadline: float | None = None,
           run_conda: bool = False) -> PythonEnv | None:
    """The environment to describe by default (:func:`decide_why` without the why)."""
    return decide_why(environ, home, cwd, cache=cache, ask=ask, deadline=deadline, run_conda=run_conda)[0]


def decide_why(environ: Mapping[str, str] | None = None, home: Path | None = None, cwd: Path | None = None,
               *, cache: bool | Path = True, ask: bool = True, deadline: float | None = None,
               run_conda: bool = False) -> tuple[PythonEnv | None, str]:
    """The environment to describe by default and how it was chosen (:func:`why_chosen`), running at most
    the few interpreters it needs.

    Every candidate is first judged from its files (:func:`_from_files`: no interpreter runs); the best
    is then asked (``ask``) and kept while its real description still ranks first; else the next is
    tried, all within ``deadline``. ``ask=False`` (``--fast``) runs nothing: a remembered answer or the
    files decide. ``run_conda`` is off: ``conda env list`` is for the listing."""
    ctx = _Context.current(environ, home, cwd)
    store = EnvCache.open(cache, ctx.environ)
    chosen = _by_cheap_facts(ctx, store, ask, DECIDE_DEADLINE_S if deadline is None else deadline)
    hints: list[PythonEnv] = []
    if chosen is None:
        found = _candidates(ctx, run_conda=run_conda, cache=store)
        for path, how in found.candidates.items():
            if _exists(path):
                hints.append(_describe_quietly(_absolute(path), how, ctx, store))
        if ask:
            chosen = _verify(rank(_unique(hints)), ctx, store, DECIDE_DEADLINE_S if deadline is None else deadline)
        else:
            chosen = likely_training_env(hints)
    if store is not None:
        store.save()
    return chosen, why_chosen(chosen, hints)


def _by_cheap_facts(ctx: _Context, store: EnvCache | None, ask: bool, deadline_s: float) -> PythonEnv | None:
    """The activated environment (not a conda base a shell activates by itself), else the working folder's
    when it has torch, when it is usable: it ranks first whatever else is there (:func:`_score`), so nothing
    else is looked at."""
    found = _Found()
    _active_candidates(ctx, found)
    for path, how in found.candidates.items():
        if not _exists(path):
            continue
        hint = _describe_quietly(_absolute(path), how, ctx, store)
        if not hint.usable or hint.version is None or not (
                _deliberate(hint) or (hint.in_cwd and not hint.own and hint.torch)):
            continue
        if not ask or not hint.from_files:
            return hint
        real = _describe_many([(Path(hint.python), how)], ctx, store, min(DECIDE_TRY_S, deadline_s))[0]
        if real.usable:
            return real
    return None


def _verify(ranked: list[PythonEnv], ctx: _Context, store: EnvCache | None, deadline_s: float) -> PythonEnv | None:
    """Ask the best-ranked candidates one by one until one's real description still ranks first (each try
    has at most :data:`DECIDE_TRY_S` of the deadline, so one that hangs leaves time for the next)."""
    end = time.monotonic() + deadline_s
    pending = [e for e in ranked if e.usable or e.from_files]
    tries = 0
    while pending and tries < MAX_DECIDE_TRIES and time.monotonic() < end:
        best = pending.pop(0)
        if not best.from_files:
            return best                       # a remembered answer: nothing to ask
        tries += 1
        budget = max(0.1, min(DECIDE_TRY_S, end - time.monotonic()))
        real = _describe_many([(Path(best.python), best.found_by[0] if best.found_by else "found")], ctx, store,
                              budget)[0]
        if not real.usable:
            continue
        if not pending or _score(real) >= _score(pending[0]):
            return real
        pending = rank([real, *pending])
    return next((e for e in pending if e.usable and not e.from_files), None)


def _unique(envs: Iterable[PythonEnv]) -> list[PythonEnv]:
    out: dict[str, PythonEnv] = {}
    for env in envs:
        out.setdefault(_key(env), env)
    return list(out.values())


def resolve(choice: str, envs: list[PythonEnv] | None = None, **kwargs: Any) -> PythonEnv:
    """``--python PATH|ENV_NAME`` to an environment, or :class:`EnvError` with one clear line."""
    text = (choice or "").strip()
    if not text:
        raise EnvError("--python: give an interpreter path or an environment name (see `cpudoctor envs`)")
    shown = _shown_name(text)
    ctx = _Context.current(kwargs.get("environ"), kwargs.get("home"), kwargs.get("cwd"))
    looks_like_path = os.sep in text or text.startswith((".", "~")) or bool(os.altsep and os.altsep in text)
    if looks_like_path or _exists(Path(text)):
        env = describe(Path(text), "--python", ctx, cache=kwargs.get("cache", True))
        if env.error:
            raise EnvError(f"--python {shown}: {env.error}")
        return env
    if envs is None:
        envs = _resolve_name(text, shown, ctx, EnvCache.open(kwargs.get("cache", True), ctx.environ),
                             kwargs.get("run_conda", True))
        if isinstance(envs, PythonEnv):
            return envs
    matches = [e for e in envs if text in (e.name, Path(e.prefix).name)]
    if not matches:
        names = ", ".join(sorted({e.name for e in envs if e.usable})) or "none found"
        raise EnvError(f"--python {shown}: no environment of that name (known: {_shown_name(names, 400)}); "
                       "give the interpreter's path instead")
    env = matches[0]
    if env.error:
        raise EnvError(f"--python {shown}: {env.error}")
    return env


def _resolve_name(text: str, shown: str, ctx: _Context, store: EnvCache | None,
                  run_conda: bool) -> PythonEnv | list[PythonEnv]:
    """The environment named ``text``, found from files and asked alone (conda's own list only when the
    files do not name it); else every candidate described from its files, for the error's list of names."""
    try:
        for conda in (False, True) if run_conda else (False,):
            found = _candidates(ctx, run_conda=conda, cache=store)
            named = [(p, how) for p, how in found.candidates.items()
                     if _exists(p) and text in (p.name, _quick_name(p, how, ctx))]
            if named:
                env = _describe_many(named[:1], ctx, store, QUERY_TIMEOUT_S)[0]
                if env.error:
                    raise EnvError(f"--python {shown}: {env.error}")
                return env
        return [_describe_quietly(_absolute(p), how, ctx, store) for p, how in found.candidates.items() if _exists(p)]
    finally:
        if store is not None:
            store.save()


def _quick_name(path: Path, how: str, ctx: _Context) -> str:
    prefix = path if isdir(path) else _prefix_of(path)
    return _kind_and_name(prefix, path, how, ctx)[1]


PYTHON_VARIABLE = "CPUDOCTOR_PYTHON"
# How the described environment was chosen (PythonInfo.chosen_by); cpudoctor.render words them.
CHOSEN_BY = ("--python", "$" + PYTHON_VARIABLE, "active", "working-folder", "likely", "window", "own-torch",
             "only-own")


def training_environment(choice: str | None = None, environ: Mapping[str, str] | None = None,
                         *, fast: bool = False, **kwargs: Any) -> tuple[PythonEnv | None, str]:
    """The environment to describe and how it was chosen (a :data:`CHOSEN_BY` code).

    ``choice`` (``--python PATH|ENV_NAME``) first, then ``$CPUDOCTOR_PYTHON``, then
    :func:`decide` (the active environment, the working folder's, the likely one; ``fast``: without
    running any interpreter). Raises :class:`EnvError` for a choice that cannot be used; (None,
    "only-own") when nothing else usable was found.
    """
    env_vars = os.environ if environ is None else environ
    if choice:
        return resolve(choice, environ=environ, **kwargs), "--python"
    if env_vars.get(PYTHON_VARIABLE):
        try:
            return resolve(env_vars[PYTHON_VARIABLE], environ=environ, **kwargs), f"${PYTHON_VARIABLE}"
        except EnvError as exc:
            raise EnvError(str(exc).replace("--python", f"${PYTHON_VARIABLE}=", 1).replace("= ", "=", 1)) from None
    kwargs.pop("run_conda", None)
    return decide_why(environ, kwargs.get("home"), kwargs.get("cwd"), cache=kwargs.get("cache", True), ask=not fast)


def to_data(envs: list[PythonEnv]) -> list[dict[str, Any]]:
    return [asdict(e) for e in envs]


# --- what a description is made of -------------------------------------------------------------


def _too_old(version: str | None) -> str | None:
    try:
        parts = tuple(int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return None
    if len(parts) == 2 and parts < MIN_PYTHON:
        return (f"Python {version} is too old for CPU Doctor's checks (they need Python "
                f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer)")
    return None


def _prefix_of(python: Path) -> Path:
    return python.parent.parent if python.parent.name in ("bin", "Scripts") else python.parent


def _version_from_files(prefix: Path, python: Path, cfg: dict[str, str]) -> str | None:
    """The Python version of an environment from its files: pyvenv.cfg, conda-meta's python package, the
    interpreter's name (python3.11), its ``lib/python3.X`` folder."""
    for key in ("version", "version_info"):
        m = re.match(r"(\d+\.\d+(?:\.\d+)?)", cfg.get(key, ""))
        if m:
            return m.group(1)
    try:
        metas = sorted(n for n in os.listdir(prefix / "conda-meta") if n.startswith("python-"))
    except (OSError, ValueError):
        metas = []
    for name in metas:
        m = re.match(r"python-(\d+\.\d+\.\d+)-", name)
        if m:
            return m.group(1)
    for candidate in (python, _realpath(python)):
        m = re.fullmatch(r"python(\d+\.\d+)", candidate.name)
        if m:
            return m.group(1)
    try:
        libs = sorted(n for n in os.listdir(prefix / "lib") if re.fullmatch(r"python\d+\.\d+", n))
    except (OSError, ValueError):
        libs = []
    return libs[-1][len("python"):] if len(libs) == 1 else None


def _torch_from_files(dirs: list[Path]) -> tuple[str | None, str | None, str]:
    """torch's version and build from ``torch/version.py`` (read, never executed) or its dist-info."""
    for d in dirs:
        text = _read_small(d / "torch" / "version.py")
        if text is None:
            continue
        m = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.M)
        version = m.group(1) if m else None
        cuda = re.search(r"""^cuda\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]""", text, re.M)
        hip = re.search(r"""^hip\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]""", text, re.M)
        if cuda:
            return version, "cuda", f"CUDA {cuda.group(1)}"
        if hip:
            return version, "rocm", f"ROCm {hip.group(1)}"
        if version:
            build, detail = build_kind("torch", version)
            return version, ("cpu" if build == "unknown" else build), detail or "no CUDA/ROCm in torch/version.py"
    return None, None, ""


def _kind_and_name(prefix: Path, python: Path, how: str, ctx: _Context) -> tuple[str, str]:
    if how == "pipx" or "pipx" in prefix.parts:
        return "pipx", _shown_name(prefix.name)
    if isdir(prefix / "conda-meta"):
        root_named = ctx.environ.get("CONDA_PREFIX") == str(prefix) and ctx.environ.get("CONDA_DEFAULT_ENV")
        # The root install holds conda itself; every other env is named by its folder.
        is_base = any(_exists(prefix / d) for d in ("condabin", "pkgs", "bin/conda", "Scripts/conda.exe"))
        return "conda", _shown_name(root_named or ("base" if is_base else prefix.name))
    if _isfile(prefix / "pyvenv.cfg"):
        return "venv", _shown_name(venv_name(str(prefix)) or prefix.name)
    if how == "pyenv" or ".pyenv" in prefix.parts:
        return "pyenv", _shown_name(f"pyenv {prefix.name}")
    return "system", _shown_name(python.name)


def _error_env(path: Path, how: str, error: str) -> PythonEnv:
    return PythonEnv(python=str(path), prefix=str(path.parent), kind="system", name=_shown_name(path.name),
                     found_by=[how], error=error)


# --- small helpers (none of them raises for a name, a file or a folder) -----------------------


def _file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an interpreter or environment folder, from one ``stat``; None when it can."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except PermissionError:
        return "permission denied: it cannot be read (run CPU Doctor as its owner, or give another)"
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return "the name is too long for a file name"
        return f"cannot look at it ({exc.strerror or exc})"
    except ValueError:
        return "the name holds a NUL byte: not a file name"
    return None


def _exists(path: Path) -> bool:
    try:
        return os.path.exists(path)
    except (OSError, ValueError):
        return False


def _isfile(path: Path) -> bool:
    try:
        return os.path.isfile(path)
    except (OSError, ValueError):
        return False


def _access(path: Path, mode: int) -> bool:
    try:
        return os.access(path, mode)
    except (OSError, ValueError):
        return False


def _realpath(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def _absolute(path: Path | str) -> Path:
    try:
        return Path(os.path.abspath(os.path.expanduser(str(path))))
    except (OSError, ValueError, RuntimeError):
        return Path(str(path))


def _plausible(value: str | None) -> bool:
    """A variable or listed line that could name a file: not empty, not too long, no NUL or control character."""
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and not re.search(r"[\x00-\x1f\x7f]", value)


def _shown_name(text: str, limit: int = 120) -> str:
    """A name for a message or a table: clipped (a 100,000-character name is one line, not a page)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stamp(path: Path | None) -> list[int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_size]


def _listed_lines(path: Path, found: _Found, where: str) -> list[str]:
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
        if _plausible(line) and "\ufffd" not in line:
            lines.append(line)
            continue
        what = f"{len(line):,} characters long" if len(line) > MAX_NAME else "binary or control characters"
        found.skipped.append(PythonEnv(
            python=f"{where}:{n}", prefix="", kind="conda", name=f"{where} line {n}", found_by=[where],
            error=f"line {n} of {where} is not a folder's name ({what}): skipped"))
    return lines


def _read_small(path: Path, limit: int = 1 << 20) -> str | None:
    """A small regular text file, or None (a FIFO or device is never opened; nothing raises)."""
    try:
        return read_bytes_checked(path, limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _pyvenv_cfg(prefix: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (_read_small(prefix / "pyvenv.cfg", 64 << 10) or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _children(folder: Path) -> list[Path]:
    """The folders in ``folder`` (at most :data:`MAX_CHILDREN`), sorted; none when it cannot be read."""
    out: list[Path] = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if len(out) >= MAX_CHILDREN:
                    break
                try:
                    if entry.is_dir():
                        out.append(Path(entry.path))
                except OSError:
                    continue
    except (OSError, ValueError):
        return []
    return sorted(out)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return a == b


def _key(env: PythonEnv) -> str:
    """Two candidates are one environment when they share a prefix (an interpreter that could not
    say its prefix is one of its own)."""
    known_prefix = env.version is not None
    try:
        return os.path.realpath(env.prefix if known_prefix else env.python)
    except (OSError, ValueError):
        return env.prefix if known_prefix else env.python


def _tilde(path: Path, ctx: _Context) -> str:
    if ctx.home is not None:
        try:
            return "~/" + str(path.relative_to(ctx.home))
        except ValueError:
            pass
    return str(path)
