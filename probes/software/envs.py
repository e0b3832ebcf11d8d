"""The Python environments on this machine, and which one the user most likely trains in.

CPU Doctor runs from its own environment, but a person's training runs in
``conda activate amd_dl`` or a project's ``.venv``: the software facts must be
about *that* one. This module finds environments without importing anything
in them:

* Method 1, conda: ``conda env list --json`` when conda is on PATH (slow, so
  cached), ``~/.conda/environments.txt`` and the ``envs/`` folders of the usual
  installs (miniconda, anaconda, miniforge, mambaforge, micromamba, /opt/conda);
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

Each interpreter is asked once, with ``-I -S`` (no site, so no ``.pth`` file
runs, no package is imported), for its version and site folders; the
packages (torch and its build, numpy) are then read from their metadata and
``torch/version.py`` as files. Answers are cached per interpreter, keyed on the
files that would change them, so a second listing takes milliseconds.

Environments only exist on the live machine: a captured tree has none, which
is why this probe takes the home folder, working folder and environment
variables instead of a ``root``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cpudoctor.probes.software.packages import build_kind, normalize, venv_name

QUERY_TIMEOUT_S = 10.0       # a healthy interpreter answers in ~30 ms; a broken sitecustomize is not run (-S)
CONDA_TIMEOUT_S = 15.0       # conda is a Python program of its own: seconds on a cold disk
CACHE_FORMAT = 1
MIN_PYTHON = (3, 8)          # the oldest Python the child scripts are written for

KINDS = ("conda", "venv", "pyenv", "system", "pipx")

# Run with -I -S: nothing from the environment is imported; sysconfig and site only compute paths.
_QUERY = r"""
import json, os, sys, sysconfig
exe_dir = os.path.dirname(os.path.abspath(sys.executable))
venv = None
for d in (exe_dir, os.path.dirname(exe_dir)):      # where site.venv() looks, which -S skips
    if os.path.isfile(os.path.join(d, "pyvenv.cfg")):
        venv = d
        break
base = getattr(sys, "base_prefix", sys.prefix)
prefix = venv or sys.prefix
paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix}) if venv else sysconfig.get_paths()
out = {"version": "%d.%d.%d" % sys.version_info[:3], "implementation": sys.implementation.name,
       "prefix": prefix, "base_prefix": base, "executable": sys.executable,
       "site": [p for p in (paths.get("purelib"), paths.get("platlib")) if p], "usersite": None}
if venv is None:
    try:
        import site
        out["site"] += [p for p in site.getsitepackages() if p not in out["site"]]
        if site.ENABLE_USER_SITE is not False:
            out["usersite"] = site.getusersitepackages()
    except Exception:
        pass
sys.stdout.write(json.dumps(out))
"""


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


# --- finding candidate prefixes and interpreters -------------------------------------------


def _interpreter_of(prefix: Path) -> Path | None:
    """The python of an environment folder (POSIX bin/, Windows Scripts/ or the root)."""
    for rel in ("bin/python3", "bin/python", "Scripts/python.exe", "python.exe"):
        candidate = prefix / rel
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _is_env_folder(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


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
        if exe:
            roots.append(Path(exe).parent.parent)        # <root>/bin/conda, <root>\\Scripts\\conda.exe
    for var in ("MAMBA_ROOT_PREFIX", "CONDA_ROOT"):
        if ctx.environ.get(var):
            roots.append(Path(ctx.environ[var]))
    return list(dict.fromkeys(roots))


def _conda_candidates(ctx: _Context, run_conda: bool, cache: "_Cache | None") -> dict[Path, str]:
    found: dict[Path, str] = {}
    if ctx.home is not None:
        listed = ctx.home / ".conda" / "environments.txt"
        for line in _read_lines(listed):
            found.setdefault(Path(line), "~/.conda/environments.txt")
    for root in _conda_roots(ctx):
        if (root / "conda-meta").is_dir():
            found.setdefault(root, "conda base")
        for sub in _children(root / "envs"):
            if (sub / "conda-meta").is_dir():
                found.setdefault(sub, f"{_tilde(root, ctx)}/envs")
    if run_conda:
        for prefix in _conda_env_list(ctx, cache):
            found.setdefault(Path(prefix), "conda env list")
    return found


def _conda_env_list(ctx: _Context, cache: "_Cache | None") -> list[str]:
    """``conda env list --json``, cached while conda and its environments file are unchanged."""
    exe = ctx.environ.get("CONDA_EXE") or shutil.which("conda", path=ctx.environ.get("PATH")) \
        or shutil.which("mamba", path=ctx.environ.get("PATH"))
    if not exe:
        return []
    listed = ctx.home / ".conda" / "environments.txt" if ctx.home else None
    key = json.dumps([exe, _stamp(Path(exe)), _stamp(listed) if listed else None])
    if cache is not None and (hit := cache.get("conda", key)) is not None:
        return list(hit)
    try:
        out = subprocess.run([exe, "env", "list", "--json"], capture_output=True, text=True,
                             timeout=CONDA_TIMEOUT_S, stdin=subprocess.DEVNULL, env=dict(ctx.environ))
        envs = json.loads(out.stdout).get("envs", []) if out.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
        envs = []
    envs = [e for e in envs if isinstance(e, str)]
    if cache is not None:
        cache.put("conda", key, envs)
    return envs


def _venv_candidates(ctx: _Context) -> dict[Path, str]:
    found: dict[Path, str] = {}
    for var, how in (("VIRTUAL_ENV", "active ($VIRTUAL_ENV)"), ("CONDA_PREFIX", "active ($CONDA_PREFIX)")):
        if ctx.environ.get(var):
            found.setdefault(Path(ctx.environ[var]), how)
    if ctx.cwd is not None:
        for name in (".venv", "venv", ".env", "env"):
            if _is_env_folder(ctx.cwd / name):
                found.setdefault(ctx.cwd / name, "working folder")
    folders: list[tuple[Path, str]] = []
    if ctx.environ.get("WORKON_HOME"):
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
                found.setdefault(sub, how)
    return found


PY_LAUNCHER_TIMEOUT_S = 10.0
# `py -0p`: " -V:3.12 *        C:\\...\\python.exe" (launcher 3.11+) or " -3.9-64        C:\\...\\python.exe" (older)
_PY_LIST_LINE = re.compile(r"^\s*-\S+(?:\s+\*)?\s+(\S.*?\.exe)\s*$", re.IGNORECASE)


def parse_py_list(text: str) -> list[str]:
    """Interpreter paths from the Windows ``py`` launcher's ``py -0p`` listing (paths may hold spaces)."""
    out = []
    for line in (text or "").splitlines()[:200]:
        m = _PY_LIST_LINE.match(line)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def _py_launcher_candidates(ctx: _Context, cache: "_Cache | None") -> dict[Path, str]:
    """What the ``py`` launcher knows (PEP 514 registrations and the Store's Pythons), cached per launcher."""
    exe = shutil.which("py", path=ctx.environ.get("PATH"))
    if not exe:
        return {}
    key = json.dumps([exe, _stamp(Path(exe))])
    listed = cache.get("py", key) if cache is not None else None
    if listed is None:
        try:
            done = subprocess.run([exe, "-0p"], capture_output=True, text=True, errors="replace", timeout=PY_LAUNCHER_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, env=dict(ctx.environ))
            listed = parse_py_list(done.stdout) if done.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            listed = []
        if cache is not None:
            cache.put("py", key, listed)
    return {Path(p): "py launcher" for p in listed}


def _interpreter_candidates(ctx: _Context) -> dict[Path, str]:
    """Interpreters from findpython's providers (PATH, pyenv, asdf, rye, uv, registry, macOS)."""
    try:
        from findpython.providers import ALL_PROVIDERS
    except ImportError:                    # a broken install: PATH alone still works
        ALL_PROVIDERS = {}
    found: dict[Path, str] = {}
    with _environ(ctx.environ):            # the providers read PATH, PYENV_ROOT, ... from os.environ
        for name, provider_cls in ALL_PROVIDERS.items():
            try:
                provider = provider_cls.create()
                pythons = list(provider.find_pythons()) if provider is not None else []
            except Exception:  # noqa: BLE001 - one broken provider must not hide the others
                continue
            for pv in pythons:
                exe = Path(pv.executable)
                if "shims" in exe.parts:       # pyenv/asdf shims are scripts naming the real ones found too
                    continue
                found.setdefault(exe, name)
    return found


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


# --- describing one environment --------------------------------------------------------------


def _query(python: Path, cache: "_Cache | None") -> dict[str, Any]:
    """Version and site folders from the interpreter itself (``-I -S``: nothing imported)."""
    key = json.dumps([_QUERY, str(python), _stamp(python), _stamp(python.parent.parent / "pyvenv.cfg")])
    if cache is not None and (hit := cache.get("query", key)) is not None:
        return dict(hit)
    try:
        out = subprocess.run([str(python), "-I", "-S", "-c", _QUERY], capture_output=True, text=True,
                             timeout=QUERY_TIMEOUT_S, stdin=subprocess.DEVNULL, env=_clean_env())
    except subprocess.TimeoutExpired:      # not cached: a hang may be load, not the installation
        return {"error": f"did not answer within {QUERY_TIMEOUT_S:g} s at start-up (a broken sitecustomize "
                         "or .pth file?)"}
    except OSError as exc:
        return {"error": f"cannot run it ({exc.strerror or exc})"}
    if out.returncode != 0:
        answer = _old_python(python, out.stderr)
    else:
        try:
            answer = json.loads(out.stdout)
        except ValueError:
            answer = {"error": "it printed something that is not its version (is it a Python?)"}
    if cache is not None:
        cache.put("query", key, answer)
    return answer


def _old_python(python: Path, stderr: str) -> dict[str, Any]:
    """Why ``-I -S`` failed: Python 2 and 3 before 3.4 do not know -I."""
    code = "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.prefix)"
    try:
        out = subprocess.run([str(python), "-E", "-S", "-c", code], capture_output=True, text=True,
                             timeout=QUERY_TIMEOUT_S, stdin=subprocess.DEVNULL, env=_clean_env())
        lines = out.stdout.splitlines() if out.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        lines = []
    if len(lines) == 2 and re.fullmatch(r"\d+\.\d+\.\d+", lines[0]):
        return {"version": lines[0], "prefix": lines[1], "error": _too_old(lines[0]) or "it failed at start-up"}
    last = (stderr or "").strip().splitlines()[-1:] or ["no message"]
    return {"error": f"it failed at start-up: {last[0][:200]}"}


def _too_old(version: str | None) -> str | None:
    try:
        parts = tuple(int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return None
    if len(parts) == 2 and parts < MIN_PYTHON:
        return (f"Python {version} is too old for CPU Doctor's checks (they need Python "
                f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer)")
    return None


def _clean_env() -> dict[str, str]:
    """The query's environment: PATH and locale only (-I ignores PYTHON* anyway)."""
    keep = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT", "HOME", "USERPROFILE")
    return {k: v for k, v in os.environ.items() if k in keep}


def _site_dirs(prefix: Path, answer: dict[str, Any]) -> list[Path]:
    dirs = [Path(p) for p in answer.get("site") or [] if isinstance(p, str)]
    cfg = _pyvenv_cfg(prefix)
    if cfg.get("include-system-site-packages", "").lower() == "true" and answer.get("base_prefix"):
        base = Path(answer["base_prefix"])
        dirs += sorted(base.glob("lib/python3*/site-packages")) + [base / "Lib" / "site-packages"]
    if answer.get("usersite"):
        dirs.append(Path(answer["usersite"]))
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d not in out:
            out.append(d)
            out += [extra for extra in _pth_dirs(d) if extra not in out]
    return out


def _pth_dirs(site_dir: Path) -> list[Path]:
    """Folders that ``.pth`` files in ``site_dir`` add to the import path (their ``import`` lines are
    code and are not run; editable installs and shared site folders are plain paths)."""
    found: list[Path] = []
    try:
        pth_files = sorted(site_dir.glob("*.pth"))[:200]
    except OSError:
        return found
    for pth in pth_files:
        for line in (_read_small(pth, limit=64 * 1024) or "").splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "import ", "import\t")):
                continue
            candidate = Path(line) if Path(line).is_absolute() else site_dir / line
            if candidate.is_dir() and candidate not in found:
                found.append(candidate)
    return found


def _torch_from_files(site_dirs: list[Path]) -> tuple[str | None, str | None, str]:
    """torch's version and build from ``torch/version.py`` (read, never executed) or its dist-info."""
    for d in site_dirs:
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


def _versions(site_dirs: list[Path], names: Iterable[str]) -> dict[str, str]:
    wanted = {normalize(n) for n in names}
    found: dict[str, str] = {}
    try:
        dists = metadata.distributions(path=[str(d) for d in site_dirs])
        for dist in dists:
            try:
                name = normalize(dist.metadata["Name"] or "")
            except (KeyError, TypeError):
                continue
            if name in wanted and name not in found and dist.version:
                found[name] = dist.version
    except OSError:
        pass
    return found


def _kind_and_name(prefix: Path, python: Path, how: str, ctx: _Context) -> tuple[str, str]:
    if how == "pipx" or "pipx" in prefix.parts:
        return "pipx", prefix.name
    if (prefix / "conda-meta").is_dir():
        root_named = ctx.environ.get("CONDA_PREFIX") == str(prefix) and ctx.environ.get("CONDA_DEFAULT_ENV")
        # The root install holds conda itself; every other env is named by its folder.
        is_base = any((prefix / d).exists() for d in ("condabin", "pkgs", "bin/conda", "Scripts/conda.exe"))
        return "conda", root_named or ("base" if is_base else prefix.name)
    if (prefix / "pyvenv.cfg").is_file():
        return "venv", venv_name(str(prefix)) or prefix.name
    if how == "pyenv" or ".pyenv" in prefix.parts:
        return "pyenv", f"pyenv {prefix.name}"
    return "system", python.name


def describe(python_or_prefix: Path, how: str = "given", ctx: _Context | None = None,
             cache: "bool | Path | _Cache" = False) -> PythonEnv:
    """Describe one environment from an interpreter or an environment folder; never raises."""
    ctx = ctx or _Context.current()
    if not isinstance(cache, _Cache):
        store = _Cache.open(cache, ctx)
        env = describe(python_or_prefix, how, ctx, store) if store is not None else \
            _describe(python_or_prefix, how, ctx, None)
        if store is not None:
            store.save()
        return env
    return _describe(python_or_prefix, how, ctx, cache)


def _describe(python_or_prefix: Path, how: str, ctx: _Context, cache: "_Cache | None") -> PythonEnv:
    path = Path(os.path.abspath(os.path.expanduser(str(python_or_prefix))))
    if path.is_dir():
        python = _interpreter_of(path)
        if python is None:
            return PythonEnv(python=str(path), prefix=str(path), kind="venv", name=path.name, found_by=[how],
                             error="no bin/python (or Scripts\\python.exe) in this folder")
    else:
        python = path
    if not python.exists():
        return PythonEnv(python=str(python), prefix=str(python.parent), kind="system", name=python.name,
                         found_by=[how], error="no such file")
    if not os.access(python, os.X_OK) or python.is_dir():
        return PythonEnv(python=str(python), prefix=str(python.parent), kind="system", name=python.name,
                         found_by=[how], error="not an executable program")
    answer = _query(python, cache)
    prefix = Path(answer.get("prefix") or (python.parent.parent if python.parent.name in ("bin", "Scripts")
                                           else python.parent))
    kind, name = _kind_and_name(prefix, python, how, ctx)
    env = PythonEnv(python=str(python), prefix=str(prefix), kind=kind, name=name,
                    version=answer.get("version"), implementation=answer.get("implementation"),
                    found_by=[how], error=answer.get("error"))
    if env.error is None:
        env.error = _too_old(env.version)
    if env.error is not None:
        return env
    site_dirs = _site_dirs(prefix, answer)
    env.site_dirs = [str(d) for d in site_dirs]
    env.torch, env.torch_build, env.torch_detail = _torch_from_files(site_dirs)
    versions = _versions(site_dirs, ("torch", "numpy"))
    env.torch = env.torch or versions.get("torch")
    env.numpy = versions.get("numpy")
    env.active = str(prefix) in (ctx.environ.get("VIRTUAL_ENV"), ctx.environ.get("CONDA_PREFIX"))
    env.in_cwd = ctx.cwd is not None and prefix.parent == ctx.cwd
    env.own = ctx.own_prefix is not None and _same(prefix, Path(ctx.own_prefix))
    return env


# --- the listing -----------------------------------------------------------------------------


def discover(environ: Mapping[str, str] | None = None, home: Path | None = None, cwd: Path | None = None,
             *, run_conda: bool = True, cache: bool | Path = True) -> list[PythonEnv]:
    """Every environment found, the one the user most likely trains in first."""
    ctx = _Context.current(environ, home, cwd)
    store = _Cache.open(cache, ctx)
    candidates: dict[Path, str] = {}
    for source in (_venv_candidates(ctx), _conda_candidates(ctx, run_conda, store), _interpreter_candidates(ctx),
                   _py_launcher_candidates(ctx, store)):
        for path, how in source.items():
            candidates.setdefault(path, how)
    if ctx.own_prefix is not None:
        candidates.setdefault(Path(ctx.own_prefix), "CPU Doctor")
    envs: dict[str, PythonEnv] = {}
    for path, how in candidates.items():
        if not path.exists():
            continue
        env = _describe(path, how, ctx, store)
        key = _key(env)
        if key in envs:
            if how not in envs[key].found_by:
                envs[key].found_by.append(how)
            continue
        envs[key] = env
    if store is not None:
        store.save()
    return rank(list(envs.values()))


def rank(envs: list[PythonEnv]) -> list[PythonEnv]:
    """Most likely training environment first: usable, with torch, active, in the working folder,
    a conda env or venv rather than a system Python; CPU Doctor's own and pipx's last."""
    others_have_torch = any(e.torch and not e.own and e.kind != "pipx" for e in envs)

    def score(e: PythonEnv) -> tuple:
        return (
            e.usable,
            e.kind != "pipx",
            not (e.own and others_have_torch),
            bool(e.torch),
            e.active,
            e.in_cwd,
            e.kind in ("conda", "venv"),
            e.name != "base",
        )

    return sorted(envs, key=score, reverse=True)


def likely_training_env(envs: list[PythonEnv]) -> PythonEnv | None:
    """The default environment to describe: the best-ranked usable one."""
    ranked = rank(envs)
    return next((e for e in ranked if e.usable), None)


def resolve(choice: str, envs: list[PythonEnv] | None = None, **kwargs: Any) -> PythonEnv:
    """``--python PATH|ENV_NAME`` to an environment, or :class:`EnvError` with one clear line."""
    text = (choice or "").strip()
    if not text:
        raise EnvError("--python: give an interpreter path or an environment name (see `cpudoctor envs`)")
    looks_like_path = os.sep in text or text.startswith((".", "~")) or (os.altsep and os.altsep in text)
    if looks_like_path or Path(text).exists():
        env = describe(Path(text), "--python", _Context.current(kwargs.get("environ"), kwargs.get("home"),
                                                                 kwargs.get("cwd")), cache=kwargs.get("cache", True))
        if env.error:
            raise EnvError(f"--python {text}: {env.error}")
        return env
    envs = envs if envs is not None else discover(**kwargs)
    matches = [e for e in envs if text in (e.name, Path(e.prefix).name)]
    if not matches:
        names = ", ".join(sorted({e.name for e in envs if e.usable})) or "none found"
        raise EnvError(f"--python {text}: no environment of that name (known: {names}); "
                       "give the interpreter's path instead")
    env = matches[0]
    if env.error:
        raise EnvError(f"--python {text}: {env.error}")
    return env


PYTHON_VARIABLE = "CPUDOCTOR_PYTHON"
# How the described environment was chosen (PythonInfo.chosen_by); cpudoctor.render words them.
CHOSEN_BY = ("--python", "$" + PYTHON_VARIABLE, "likely", "window", "only-own")


def training_environment(choice: str | None = None, environ: Mapping[str, str] | None = None,
                         **kwargs: Any) -> tuple[PythonEnv | None, str]:
    """The environment to describe and how it was chosen.

    ``choice`` (``--python PATH|ENV_NAME``) first, then ``$CPUDOCTOR_PYTHON``,
    then the most likely training environment found. Raises :class:`EnvError`
    for a choice that cannot be used; (None, reason) when nothing usable was found.
    """
    env_vars = os.environ if environ is None else environ
    if choice:
        return resolve(choice, environ=environ, **kwargs), "--python"
    if env_vars.get(PYTHON_VARIABLE):
        try:
            return resolve(env_vars[PYTHON_VARIABLE], environ=environ, **kwargs), f"${PYTHON_VARIABLE}"
        except EnvError as exc:
            raise EnvError(str(exc).replace("--python", f"${PYTHON_VARIABLE}=", 1).replace("= ", "=", 1)) from None
    found = likely_training_env(discover(environ, **kwargs))
    return found, "likely" if found is not None else "only-own"


def to_data(envs: list[PythonEnv]) -> list[dict[str, Any]]:
    return [asdict(e) for e in envs]


# --- the cache -------------------------------------------------------------------------------


class _Cache:
    """One small JSON file of per-interpreter answers; a missing or unwritable folder just means no cache."""

    FILE = "python-envs.json"

    def __init__(self, path: Path | None):
        self.path = path
        self.data: dict[str, dict[str, Any]] = {}
        self.dirty = False
        if path is not None:
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(loaded, dict) and loaded.get("format") == CACHE_FORMAT:
                    self.data = {k: v for k, v in loaded.items() if isinstance(v, dict)}
            except (OSError, ValueError):
                pass

    @classmethod
    def open(cls, cache: bool | Path, ctx: _Context) -> "_Cache | None":
        if cache is False:
            return None
        if isinstance(cache, Path):
            return cls(cache / cls.FILE)
        from cpudoctor.probes.child.cache import default_dir

        folder = default_dir(ctx.environ)
        return cls(folder / cls.FILE) if folder is not None else None

    def get(self, section: str, key: str) -> Any:
        entry = self.data.get(section, {}).get(hashlib.sha256(key.encode()).hexdigest())
        return entry

    def put(self, section: str, key: str, value: Any) -> None:
        self.data.setdefault(section, {})[hashlib.sha256(key.encode()).hexdigest()] = value
        self.dirty = True

    def save(self) -> None:
        if not self.dirty or self.path is None:
            return
        from cpudoctor.fileio import WriteError, atomic_write

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps({"format": CACHE_FORMAT, **self.data}))
        except (OSError, WriteError):
            pass                            # a read-only home: no cache, same answers


# --- small helpers ---------------------------------------------------------------------------


def _stamp(path: Path | None) -> list[int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _read_lines(path: Path) -> list[str]:
    text = _read_small(path)
    return [line.strip() for line in (text or "").splitlines() if line.strip() and not line.startswith("#")]


def _read_small(path: Path, limit: int = 1 << 20) -> str | None:
    """A small regular text file, or None (a FIFO or device is never opened)."""
    try:
        if not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _pyvenv_cfg(prefix: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (_read_small(prefix / "pyvenv.cfg") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _key(env: PythonEnv) -> str:
    """Two candidates are one environment when they share a prefix (an interpreter that could not
    say its prefix is one of its own)."""
    known_prefix = env.version is not None
    try:
        return str(Path(env.prefix if known_prefix else env.python).resolve())
    except OSError:
        return env.prefix if known_prefix else env.python


def _tilde(path: Path, ctx: _Context) -> str:
    if ctx.home is not None:
        try:
            return "~/" + str(path.relative_to(ctx.home))
        except ValueError:
            pass
    return str(path)
