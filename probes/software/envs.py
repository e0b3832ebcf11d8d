"""The Python environments on this machine, and which one the user most likely trains in.

CPU Doctor runs from its own environment, but a person's training runs in
``conda activate amd_dl`` or a project's ``.venv``: the software facts must be
about *that* one. This is the facade of four modules, one job each:

=======================  ====================================================
:mod:`.envs_find`        where environments are (conda, venvs, interpreters),
                         from files and two bounded listings
:mod:`.envs_describe`    one environment described: its interpreter asked
                         (``-I -S``), its packages read as files, cached
:mod:`.envs_choice`      the ranking, the default from cheap facts, ``--python``
:mod:`.envs_files`       never-raising helpers for hostile names and files
=======================  ====================================================

**The listing** (:func:`discover`: ``cpudoctor envs``, the window's picker)
asks every interpreter, all at once under one deadline
(:mod:`cpudoctor.probes.software.pyquery`); **the default**
(:func:`training_environment`) runs at most the few it needs. The result type,
:class:`~cpudoctor.model.PythonEnv`, is the model's.

Environments only exist on the live machine: a captured tree has none, which
is why this probe takes the home folder, working folder and environment
variables instead of a ``root``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cpudoctor.model import PythonEnv
from cpudoctor.probes.software.envcache import EnvCache
from cpudoctor.probes.software.envs_choice import (CHOSEN_BY, PYTHON_VARIABLE, EnvError, decide, decide_why,
                                                   likely_training_env, rank, resolve, training_environment,
                                                   why_chosen)
from cpudoctor.probes.software.envs_describe import describe, describe_many, identity_key
from cpudoctor.probes.software.envs_files import exists
from cpudoctor.probes.software.envs_find import Context, candidates, parse_py_list

__all__ = ["CHOSEN_BY", "LIST_DEADLINE_S", "PYTHON_VARIABLE", "Context", "EnvError", "PythonEnv", "decide",
           "decide_why", "describe", "discover", "likely_training_env", "parse_py_list", "rank", "resolve",
           "training_environment", "why_chosen"]

LIST_DEADLINE_S = 8.0        # every interpreter of the listing together (`envs`, the picker)


def discover(environ: Mapping[str, str] | None = None, home: Path | None = None, cwd: Path | None = None,
             *, run_conda: bool = True, cache: bool | Path = True,
             deadline: float | None = None) -> list[PythonEnv]:
    """Every environment found, the one the user most likely trains in first.

    Every interpreter is asked at once; together they have ``deadline`` seconds (one that did not answer
    by then is listed with that reason, and remembered for a while)."""
    ctx = Context.current(environ, home, cwd)
    store = EnvCache.open(cache, ctx.environ)
    found = candidates(ctx, run_conda=run_conda, cache=store)
    items = [(path, how) for path, how in found.candidates.items() if exists(path)]
    envs: dict[str, PythonEnv] = {}
    described = describe_many(items, ctx, store, LIST_DEADLINE_S if deadline is None else deadline)
    for (_path, how), env in zip(items, described):
        key = identity_key(env)
        if key in envs:
            if how not in envs[key].found_by:
                envs[key].found_by.append(how)
            continue
        envs[key] = env
    if store is not None:
        store.save()
    return rank(list(envs.values())) + found.skipped
