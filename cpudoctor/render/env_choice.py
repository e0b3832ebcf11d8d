"""The window's words for the Python environment it describes: the toolbar picker and the pages' lines.

The report's own words (``environment_words``: name, kind, Python and why it
was chosen) come from :mod:`cpudoctor.render.software`; this module adds the
picker's entries, the lines that say where the lab's jobs run, and the
messages of choosing (an interpreter that cannot be used is one line).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cpudoctor.model import PythonEnv, PythonInfo
from cpudoctor.render.envs import home_short, no_official_build
from cpudoctor.render.software import environment_words
from cpudoctor.render.words import NO_REASON, reason_of
from cpudoctor.kits.escape import one_line

LABEL = "Environment:"
LOOKING = "Finding Python environments…"
OTHER = "Other interpreter…"
LOOK_AGAIN = "Look again"
OWN_FALLBACK = "CPU Doctor's own Python"
ABOUT = "The software facts, the findings and the Training page's jobs are about this environment."
SAVED_TIP = ("A saved report describes the environment it was made in; "
             "choose Back to this machine to pick one here.")
DIAGNOSE = "Diagnose this environment"        # the Inspector's button under a Python process
DIAGNOSE_TIP = ("Describe this process's Python environment everywhere in the window "
                "(its packages, PyTorch build and findings) and run the Training jobs in it")
DIAGNOSE_SAVED_TIP = "A saved report is shown: go back to this machine first"
# How the Inspector found a process's interpreter (cpudoctor.probes.process.interpreter's found_by).
FOUND_BY = {
    "maps": "where its libraries were loaded from",
    "VIRTUAL_ENV": "its $VIRTUAL_ENV",
    "CONDA_PREFIX": "its $CONDA_PREFIX",
    "argv[0]": "its command line",
    "exe": "its executable",
}


def python_info(env: PythonEnv | None, chosen_by: str | None) -> PythonInfo:
    """The report's record of ``env`` (what the pipeline writes into ``software.python``)."""
    if env is None:
        return PythonInfo(env_name=OWN_FALLBACK, own=True, chosen_by=chosen_by)
    return env.record(chosen_by)


def short_words(p: PythonInfo) -> str:
    """``amd_dl (conda, Python 3.10.13)``: the environment alone, without why it was chosen."""
    return environment_words(dataclasses.replace(p, chosen_by=None, own=None, error=None))


def label(env: PythonEnv) -> str:
    """One short line for a picker: name, kind, Python and torch."""
    parts = [env.name, f"({env.kind}"]
    parts[-1] += f", Python {env.version})" if env.version else ")"
    if env.torch:
        parts.append(f"torch {env.torch}")
    elif env.usable:
        parts.append("no torch")
    if env.own:
        parts.append("— CPU Doctor's own")
    if env.error:
        parts.append(f"— {env.error}")
    return " ".join(parts)


def entry_text(env: PythonEnv) -> str:
    """One line of the picker: name, kind, Python, torch (or "no torch"), numpy, CPU Doctor's own marked."""
    if env.usable:
        numpy = f" · numpy {env.numpy}" if env.numpy else ""
        return label(env) + numpy + (" — active" if env.active and not env.own else "")
    kind = f"{env.kind}, Python {env.version}" if env.version else env.kind
    return f"{env.name} ({kind}) — cannot be used"


# Kinds whose entries are interpreters of one kind by version (pyenv's 3.8 ... 3.13): listed newest first.
BY_VERSION = frozenset({"pyenv", "system", "asdf", "uv", "python.org", "homebrew"})


def _version_key(env: PythonEnv) -> tuple[int, ...]:
    parts = []
    for piece in (env.version or "").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def menu_order(envs: list[PythonEnv]) -> list[PythonEnv]:
    """The picker's order: the likely training environment first (discovery's first), then the usable ones
    grouped by kind in the order discovery met them, interpreters of one kind newest first; every one
    that cannot be used last (one chosen by hand is usable, so it never lands below a greyed row)."""
    usable = [e for e in envs if e.usable]
    unusable = [e for e in envs if not e.usable]
    if not usable:
        return unusable
    first, rest = usable[0], usable[1:]
    kinds = list(dict.fromkeys(e.kind for e in usable))
    ordered = [first]
    for kind in kinds:
        group = [e for e in rest if e.kind == kind]
        if kind in BY_VERSION:
            group.sort(key=_version_key, reverse=True)
        ordered += group
    return ordered + unusable


def entry_tip(env: PythonEnv) -> str:
    """The entry's tooltip: the reason it cannot be used, or its interpreter and where it was found."""
    if not env.usable:
        return f"{home_short(env.python)}: {env.error}"
    found = f" (found by {', '.join(env.found_by)})" if env.found_by else ""
    return home_short(env.python) + found


def picker_text(env: PythonEnv | None) -> str:
    """The picker's button: the chosen environment in a line (the widget elides it)."""
    return entry_text(env) if env is not None else OWN_FALLBACK


def picker_tip(env: PythonEnv | None, chosen_by: str | None) -> str:
    lines = [environment_words(python_info(env, chosen_by))]
    if env is not None:
        lines.append(f"Interpreter: {home_short(env.python)}")
    lines.append(ABOUT)
    return "\n".join(lines)


def saved_text(p: PythonInfo | None) -> str:
    """The disabled picker while a saved report is shown: which environment that report describes."""
    if p is None or (p.version is None and p.executable is None):
        return "Saved report: no Python environment described"
    return f"Saved report: {short_words(p)}"


def source_text(source_label: str, p: PythonInfo | None) -> str:
    """The status bar's source: ``This machine · Python: amd_dl (conda, Python 3.10.13)``."""
    if p is None or (p.version is None and p.executable is None):
        return source_label
    return f"{source_label} · Python: {short_words(p)}"


def jobs_text(env: PythonEnv | None, read_only: bool = False) -> str:
    """The Training page's line: which environment the jobs run in (one short line; the page's tooltip gives
    the interpreter's path)."""
    if env is None:
        where = f"{OWN_FALLBACK} (no other usable environment was found)"
    else:
        torch = f", torch {env.torch}" if env.torch else ", no torch"
        kind = f"{env.kind}, Python {env.version}" if env.version else env.kind
        where = f"{env.name} ({kind}{torch})"
    prefix = "Jobs run on this machine, in" if read_only else "Jobs run in"
    return f"{prefix} {where} — the toolbar's Environment picker changes it"


def _said(error: str | BaseException | None) -> str:
    """A reason as words: an exception through :func:`reason_of`, an empty one said to be empty."""
    if isinstance(error, BaseException):
        return reason_of(error)
    text = one_line(error or "").strip()
    return text or NO_REASON


def rejected_text(python: str, error: str | BaseException) -> str:
    """One line for an interpreter given by hand that cannot be used."""
    return f"{home_short(python)} cannot be used: {_said(error)}"


def forgotten_text(python: str, error: str | BaseException) -> str:
    return (f"The environment chosen last time ({home_short(python)}) cannot be used now ({_said(error)}); "
            "describing the default one instead")


def fallback_text(error: str | BaseException, found: PythonEnv | None) -> str:
    return f"{_said(error)}; describing {found.name if found is not None else OWN_FALLBACK} instead"


def failed_text(exc: BaseException) -> str:
    return f"Finding the Python environments failed ({reason_of(exc)}); describing {OWN_FALLBACK}"


def list_failed_text(exc: BaseException) -> str:
    return f"Listing the Python environments failed: {reason_of(exc)}"


def checking_text(python: str) -> str:
    return f"Checking {home_short(python)}…"


def switching_text(env: PythonEnv | None) -> str:
    return f"Describing {env.name if env is not None else OWN_FALLBACK}…"


def inspector_text(python: str, found_by: str | None) -> str:
    """The Inspector's line under a Python process: its interpreter and how it was found."""
    how = f" (found from {FOUND_BY.get(found_by, found_by)})" if found_by else ""
    return f"Its Python: {home_short(python)}{how}"


def torch_missing_in(env: PythonEnv, setup: Any, others: list[PythonEnv]) -> tuple[str, str]:
    """The Training page's words when the chosen environment has no PyTorch: a headline and what to do.

    ``setup`` is a :class:`cpudoctor.advisor.torch_setup.TorchSetup` judged for ``env`` alone (its
    command installs into ``env`` when pip may, else into a new environment); ``others`` are the
    environments found that have torch.
    """
    headline = f"{short_words(python_info(env, None))} has no PyTorch: the Training page's jobs run in it."
    choose = ""
    if others:
        names = ", ".join(e.name for e in others[:3]) + (", …" if len(others) > 3 else "")
        choose = f"Choose an environment that has it in the toolbar ({names}), or install it. "
    if not setup.supported:
        return headline, choose + no_official_build(setup)
    if setup.target is not None:
        into = "into this environment"
    else:
        into = (f"into a new environment in your home folder, ~/{setup.new_env} ({_not_here(env)}), "
                "then choose it in the toolbar")
    note = f" {setup.note}." if setup.note else ""
    return headline, f"{choose}This installs PyTorch's CPU build for this CPU {into}; then choose Look again.{note}"


def _not_here(env: PythonEnv) -> str:
    """Why the install command does not install into the chosen environment (advisor.torch_setup.install_target)."""
    if env.own:
        return "CPU Doctor's own environment is not one to train in"
    if env.kind == "pipx":
        return "a pipx tool's environment is not one to train in"
    return "pip refuses to install into a system Python"
