"""Which environment to describe: the ranking, the default decided from cheap facts, and ``--python``.

**The default** (:func:`training_environment`) is decided from cheap facts first,
running at most the chosen interpreter: ``--python``, then
``$CPUDOCTOR_PYTHON``, then the active environment, the working folder's
``.venv`` when it has torch, else the best candidate judged from its files
(PyTorch's ``torch/version.py`` and the dist-info folders, read, never
imported): among usable environments one with torch wins over one without, CPU
Doctor's own included (it is the default only when it is the one with torch, or
nothing else usable was found); activated environments come first whatever
they hold. :func:`why_chosen` names the fact that decided (``PythonInfo.chosen_by``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cpudoctor.model import PythonEnv
from cpudoctor.probes.software.envcache import EnvCache
from cpudoctor.probes.software.envs_describe import (QUERY_TIMEOUT_S, describe, describe_many, describe_quietly,
                                                     identity_key, kind_and_name, prefix_of)
from cpudoctor.probes.software.envs_files import absolute, exists, shown_name
from cpudoctor.probes.software.envs_find import Context, Found, active_candidates, candidates
from cpudoctor.probes.software.sitedirs import isdir

DECIDE_DEADLINE_S = 5.0      # the default's decision: the few candidates it asks, together


DECIDE_TRY_S = 3.0           # ... and each of them (a healthy interpreter answers in 30 ms, a busy one in 1 s)


MAX_DECIDE_TRIES = 6


class EnvError(ValueError):
    """The environment asked for cannot be used; the message says why and what to do."""


def deliberate(e: PythonEnv) -> bool:
    """Activated by the user (a conda base that shells activate by themselves does not count)."""
    return e.active and not (e.kind == "conda" and e.name == "base")


def score(e: PythonEnv) -> tuple:
    """How likely the user trains in ``e``: usable; not a pipx tool; activated by the user; with torch (an
    environment without it is rarely where one trains: CPU Doctor's own with torch wins over one without);
    not CPU Doctor's own; its Python version known (a folder judged from its files whose version nothing
    tells is suspect); the working folder's; a conda env or venv rather than a bare interpreter; not
    conda's base."""
    chosen = deliberate(e)
    return (e.usable, e.kind != "pipx", chosen, bool(e.torch), not e.own or chosen, e.version is not None, e.in_cwd,
            e.kind in ("conda", "venv"), e.name != "base")


def rank(envs: list[PythonEnv]) -> list[PythonEnv]:
    """Most likely training environment first (see :func:`score`); CPU Doctor's own and pipx's last."""
    return sorted(envs, key=score, reverse=True)


def likely_training_env(envs: list[PythonEnv]) -> PythonEnv | None:
    """The default environment to describe: the best-ranked usable one."""
    return next((e for e in rank(envs) if e.usable), None)


def why_chosen(env: PythonEnv | None, others: Iterable[PythonEnv] = ()) -> str:
    """How the default was chosen among ``others`` (the rest of what was found): a :data:`CHOSEN_BY` code."""
    if env is not None and deliberate(env):
        return "active"
    if env is None or env.own:
        usable = any(o.usable and not o.own for o in others)
        return "own-torch" if env is not None and env.torch and usable else "only-own"
    if env.in_cwd:
        return "working-folder"
    return "likely"


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

    Every candidate is first judged from its files (:func:`.envs_describe.describe_quietly`: no interpreter runs); the best
    is then asked (``ask``) and kept while its real description still ranks first; else the next is
    tried, all within ``deadline``. ``ask=False`` (``--fast``) runs nothing: a remembered answer or the
    files decide. ``run_conda`` is off: ``conda env list`` is for the listing."""
    ctx = Context.current(environ, home, cwd)
    store = EnvCache.open(cache, ctx.environ)
    chosen = _by_cheap_facts(ctx, store, ask, DECIDE_DEADLINE_S if deadline is None else deadline)
    hints: list[PythonEnv] = []
    if chosen is None:
        found = candidates(ctx, run_conda=run_conda, cache=store)
        for path, how in found.candidates.items():
            if exists(path):
                hints.append(describe_quietly(absolute(path), how, ctx, store))
        if ask:
            chosen = _verify(rank(_unique(hints)), ctx, store, DECIDE_DEADLINE_S if deadline is None else deadline)
        else:
            chosen = likely_training_env(hints)
    if store is not None:
        store.save()
    return chosen, why_chosen(chosen, hints)


def _by_cheap_facts(ctx: Context, store: EnvCache | None, ask: bool, deadline_s: float) -> PythonEnv | None:
    """The activated environment (not a conda base a shell activates by itself), else the working folder's
    when it has torch, when it is usable: it ranks first whatever else is there (:func:`score`), so nothing
    else is looked at."""
    found = Found()
    active_candidates(ctx, found)
    for path, how in found.candidates.items():
        if not exists(path):
            continue
        hint = describe_quietly(absolute(path), how, ctx, store)
        if not hint.usable or hint.version is None or not (
                deliberate(hint) or (hint.in_cwd and not hint.own and hint.torch)):
            continue
        if not ask or not hint.from_files:
            return hint
        real = describe_many([(Path(hint.python), how)], ctx, store, min(DECIDE_TRY_S, deadline_s))[0]
        if real.usable:
            return real
    return None


def _verify(ranked: list[PythonEnv], ctx: Context, store: EnvCache | None, deadline_s: float) -> PythonEnv | None:
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
        real = describe_many([(Path(best.python), best.found_by[0] if best.found_by else "found")], ctx, store,
                              budget)[0]
        if not real.usable:
            continue
        if not pending or score(real) >= score(pending[0]):
            return real
        pending = rank([real, *pending])
    return next((e for e in pending if e.usable and not e.from_files), None)


def _unique(envs: Iterable[PythonEnv]) -> list[PythonEnv]:
    out: dict[str, PythonEnv] = {}
    for env in envs:
        out.setdefault(identity_key(env), env)
    return list(out.values())


def resolve(choice: str, envs: list[PythonEnv] | None = None, **kwargs: Any) -> PythonEnv:
    """``--python PATH|ENV_NAME`` to an environment, or :class:`EnvError` with one clear line."""
    text = (choice or "").strip()
    if not text:
        raise EnvError("--python: give an interpreter path or an environment name (see `cpudoctor envs`)")
    shown = shown_name(text)
    ctx = Context.current(kwargs.get("environ"), kwargs.get("home"), kwargs.get("cwd"))
    looks_like_path = os.sep in text or text.startswith((".", "~")) or bool(os.altsep and os.altsep in text)
    if looks_like_path or exists(Path(text)):
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
        raise EnvError(f"--python {shown}: no environment of that name (known: {shown_name(names, 400)}); "
                       "give the interpreter's path instead")
    env = matches[0]
    if env.error:
        raise EnvError(f"--python {shown}: {env.error}")
    return env


def _resolve_name(text: str, shown: str, ctx: Context, store: EnvCache | None,
                  run_conda: bool) -> PythonEnv | list[PythonEnv]:
    """The environment named ``text``, found from files and asked alone (conda's own list only when the
    files do not name it); else every candidate described from its files, for the error's list of names."""
    try:
        for conda in (False, True) if run_conda else (False,):
            found = candidates(ctx, run_conda=conda, cache=store)
            named = [(p, how) for p, how in found.candidates.items()
                     if exists(p) and text in (p.name, _quick_name(p, how, ctx))]
            if named:
                env = describe_many(named[:1], ctx, store, QUERY_TIMEOUT_S)[0]
                if env.error:
                    raise EnvError(f"--python {shown}: {env.error}")
                return env
        return [describe_quietly(absolute(p), how, ctx, store) for p, how in found.candidates.items() if exists(p)]
    finally:
        if store is not None:
            store.save()


def _quick_name(path: Path, how: str, ctx: Context) -> str:
    prefix = path if isdir(path) else prefix_of(path)
    return kind_and_name(prefix, path, how, ctx)[1]


PYTHON_VARIABLE = "CPUDOCTOR_PYTHON"


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
