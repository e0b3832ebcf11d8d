"""Describing one environment: its interpreter asked who it is (or its files read), its packages read as files.

Each interpreter is asked with ``-I -S`` (no site, so no ``.pth`` file runs, no
package is imported) for its version and site folders
(:mod:`cpudoctor.probes.software.pyquery`: many at once, one deadline); the
packages (torch and its build, numpy) are then read from their metadata and
``torch/version.py`` as files (:mod:`.dists`, :mod:`.sitedirs`). Answers **and
failures** are cached per interpreter, keyed on the files that would change them
(:mod:`.envcache`), so a second look takes milliseconds and an interpreter that
hangs costs its deadline once. Without asking (``--fast``, ranking candidates)
an environment is described from its layout alone (``from_files``). Whatever a
file, folder name or interpreter holds, the answer is a
:class:`~cpudoctor.model.PythonEnv` with an ``error``, never an exception.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpudoctor.model import PythonEnv
from cpudoctor.probes.software import pyquery
from cpudoctor.probes.software.dists import versions as dist_versions
from cpudoctor.probes.software.envcache import TIMEOUT_TTL_S, EnvCache
from cpudoctor.probes.software.envs_files import (absolute, access, exists, file_problem, isfile, pyvenv_cfg,
                                                  read_small, realpath, same_path, shown_name, stamp)
from cpudoctor.probes.software.envs_find import Context, interpreter_of
from cpudoctor.probes.software.packages import build_kind, venv_name
from cpudoctor.probes.software.sitedirs import guess_site_dirs, isdir, site_dirs

QUERY_TIMEOUT_S = 10.0       # one interpreter asked on its own (--python): ~30 ms when healthy


FAILURE_TTL_S = TIMEOUT_TTL_S


MIN_TIMEOUT_TO_CACHE_S = 2.0  # a timeout is remembered only when the interpreter had this long to answer


MIN_PYTHON = (3, 8)          # the oldest Python the child scripts are written for


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
    problem = file_problem(path)
    if problem is not None:
        t.env = _error_env(path, how, problem)
        return t
    if isdir(path):
        t.python = interpreter_of(path)
        if t.python is None:
            t.env = PythonEnv(python=str(path), prefix=str(path), kind="venv", name=shown_name(path.name),
                              found_by=[how], error="no bin/python (or Scripts\\python.exe) in this folder")
        return t
    if not access(path, os.X_OK):
        t.env = _error_env(path, how, "not an executable program")
        return t
    t.python = path
    return t


def query_key(python: Path) -> str:
    return json.dumps([pyquery.QUERY, str(python), stamp(python), stamp(python.parent.parent / "pyvenv.cfg")])


def cached_answer(cache: EnvCache | None, key: str) -> dict[str, Any] | None:
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
    keys = {p: query_key(p) for p in pythons}
    for p in pythons:
        hit = cached_answer(cache, keys[p])
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


def describe_many(items: list[tuple[Path, str]], ctx: Context, cache: EnvCache | None,
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


def _from_answer(python: Path, how: str, answer: dict[str, Any], ctx: Context) -> PythonEnv:
    prefix = Path(answer.get("prefix") or prefix_of(python))
    kind, name = kind_and_name(prefix, python, how, ctx)
    env = PythonEnv(python=str(python), prefix=str(prefix), kind=kind, name=name,
                    version=answer.get("version"), implementation=answer.get("implementation"),
                    found_by=[how], error=answer.get("error"))
    if env.error is None:
        env.error = _too_old(env.version)
    if env.error is not None:
        return env
    _fill_from_files(env, site_dirs(prefix, answer, pyvenv_cfg(prefix)), ctx)
    return env


def _fill_from_files(env: PythonEnv, dirs: list[Path], ctx: Context) -> None:
    """torch, numpy and the flags that rank an environment, from its files."""
    prefix = Path(env.prefix)
    env.site_dirs = [str(d) for d in dirs]
    env.torch, env.torch_build, env.torch_detail = _torch_from_files(dirs)
    versions = dist_versions(dirs, ("torch", "numpy"))
    env.torch = env.torch or versions.get("torch")
    env.numpy = versions.get("numpy")
    env.active = str(prefix) in (ctx.environ.get("VIRTUAL_ENV"), ctx.environ.get("CONDA_PREFIX"))
    env.in_cwd = ctx.cwd is not None and prefix.parent == ctx.cwd and prefix.name in (".venv", "venv", ".env", "env")
    env.own = ctx.own_prefix is not None and same_path(prefix, Path(ctx.own_prefix))


def _from_files(python: Path, how: str, ctx: Context) -> PythonEnv:
    """A description without asking the interpreter: prefix, version and site folders from the layout
    (``pyvenv.cfg``, ``conda-meta``, ``lib/python3.X``). Good enough to rank candidates and for ``--fast``."""
    prefix = prefix_of(python)
    kind, name = kind_and_name(prefix, python, how, ctx)
    cfg = pyvenv_cfg(prefix)
    version = _version_from_files(prefix, python, cfg)
    env = PythonEnv(python=str(python), prefix=str(prefix), kind=kind, name=name, version=version,
                    implementation=None, found_by=[how], from_files=True)
    env.error = _too_old(version)
    _fill_from_files(env, guess_site_dirs(prefix, version=version, home=ctx.home,
                                          user_site=kind in ("system", "pyenv"), cfg=cfg), ctx)
    return env


def describe(python_or_prefix: Path, how: str = "given", ctx: Context | None = None,
             cache: "bool | Path | EnvCache" = False, *, ask: bool = True,
             timeout: float | None = None) -> PythonEnv:
    """Describe one environment from an interpreter or an environment folder; never raises.

    ``ask=False``: never run the interpreter; a remembered answer is used, else the environment is
    described from its files (``from_files``)."""
    ctx = ctx or Context.current()
    store = EnvCache.open(cache, ctx.environ)
    path = absolute(python_or_prefix)
    if ask:
        env = describe_many([(path, how)], ctx, store, QUERY_TIMEOUT_S if timeout is None else timeout)[0]
    else:
        env = describe_quietly(path, how, ctx, store)
    if store is not None and not isinstance(cache, EnvCache):
        store.save()
    return env


def describe_quietly(path: Path, how: str, ctx: Context, store: EnvCache | None) -> PythonEnv:
    t = _target(path, how)
    if t.env is not None:
        return t.env
    assert t.python is not None
    hit = cached_answer(store, query_key(t.python))
    return _from_answer(t.python, how, hit, ctx) if hit is not None else _from_files(t.python, how, ctx)


def _too_old(version: str | None) -> str | None:
    try:
        parts = tuple(int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return None
    if len(parts) == 2 and parts < MIN_PYTHON:
        return (f"Python {version} is too old for CPU Doctor's checks (they need Python "
                f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer)")
    return None


def prefix_of(python: Path) -> Path:
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
    for candidate in (python, realpath(python)):
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
        text = read_small(d / "torch" / "version.py")
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


def kind_and_name(prefix: Path, python: Path, how: str, ctx: Context) -> tuple[str, str]:
    if how == "pipx" or "pipx" in prefix.parts:
        return "pipx", shown_name(prefix.name)
    if isdir(prefix / "conda-meta"):
        root_named = ctx.environ.get("CONDA_PREFIX") == str(prefix) and ctx.environ.get("CONDA_DEFAULT_ENV")
        # The root install holds conda itself; every other env is named by its folder.
        is_base = any(exists(prefix / d) for d in ("condabin", "pkgs", "bin/conda", "Scripts/conda.exe"))
        return "conda", shown_name(root_named or ("base" if is_base else prefix.name))
    if isfile(prefix / "pyvenv.cfg"):
        return "venv", shown_name(venv_name(str(prefix)) or prefix.name)
    if how == "pyenv" or ".pyenv" in prefix.parts:
        return "pyenv", shown_name(f"pyenv {prefix.name}")
    return "system", shown_name(python.name)


def _error_env(path: Path, how: str, error: str) -> PythonEnv:
    return PythonEnv(python=str(path), prefix=str(path.parent), kind="system", name=shown_name(path.name),
                     found_by=[how], error=error)


def identity_key(env: PythonEnv) -> str:
    """Two candidates are one environment when they share a prefix (an interpreter that could not
    say its prefix is one of its own)."""
    known_prefix = env.version is not None
    try:
        return os.path.realpath(env.prefix if known_prefix else env.python)
    except (OSError, ValueError):
        return env.prefix if known_prefix else env.python
