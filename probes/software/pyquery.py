"""Asking Python interpreters who they are: many at once, one deadline, bounded output, checked answers.

An interpreter found on a machine may be anything: a healthy Python (it
answers in ~30 ms), a Python 2, a script named ``python`` that sleeps for
ever, one that prints ``yes`` until memory runs out, or one whose answer is
JSON of the wrong shape. Each is run with ``-I -S`` (no site, so no ``.pth``
file or sitecustomize runs, nothing is imported); all of them start at once
(at most :data:`MAX_PARALLEL` at a time) and share **one deadline**, so twelve
that never answer cost the deadline once, not ten seconds each. What one prints
is read up to :data:`MAX_OUTPUT` bytes (then it is stopped: the kit's
:mod:`cpudoctor.kits.child.captured` runs them), and its answer is
accepted only when it has the shape a Python's answer has (:func:`checked`):
anything else is a one-line reason, never an exception later.

No Qt, no torch; the children get a clean environment (PATH, locale, home).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cpudoctor.kits.child.captured import MAX_OUTPUT, MAX_PARALLEL, MAX_STDERR, Captured, run_all_captured

MAX_TEXT = 4096                # a path or name in an answer
MAX_SITE_DIRS = 64
__all__ = ["MAX_OUTPUT", "MAX_PARALLEL", "MAX_STDERR", "OLD_QUERY", "QUERY", "BadAnswer", "Outcome", "checked",
           "clean_env", "failure_text", "parse_old", "parse_query", "run_all"]

# Run with -I -S: nothing from the environment is imported; sysconfig and site only compute paths.
QUERY = r"""
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
# For interpreters that refuse -I (Python 2, 3 before 3.4): version and prefix, one per line.
OLD_QUERY = "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.prefix)"

_VERSION = re.compile(r"\d{1,4}\.\d{1,4}\.\d{1,6}")


# How one interpreter's run ended (status ok | failed | timeout | flood | cannot-run | not-run), what it printed.
Outcome = Captured


def clean_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The children's environment: PATH, locale and home only (-I ignores PYTHON* anyway)."""
    keep = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT", "HOME", "USERPROFILE")
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k in keep}


def run_all(argvs: Sequence[Sequence[str]], deadline: float, *, env: Mapping[str, str] | None = None,
            max_output: int = MAX_OUTPUT) -> list[Outcome]:
    """Run every argv on the kit's runner, at most :data:`MAX_PARALLEL` at a time, all ended by ``deadline``
    (``time.monotonic()`` clock); the outcomes in the order of ``argvs``. Never raises for a child's sake."""
    return run_all_captured(argvs, deadline, env=clean_env() if env is None else env, max_output=max_output)


# --------------------------------------------------------------------------- the answers


class BadAnswer(ValueError):
    """An interpreter's answer that is not what a Python prints; the message is one line."""


def checked(answer: Any) -> dict[str, Any]:
    """A query's answer with the shape a Python's has, reduced to the known fields; BadAnswer otherwise.

    Used on every answer, fresh or from the cache, so that nothing of the wrong type (``"version": 5``,
    ``"site": 5``, a list instead of an object) reaches the code that builds the description.
    """
    if not isinstance(answer, dict):
        raise BadAnswer(f"it answered with JSON that is not a Python's answer ({type(answer).__name__}, "
                        "not an object): is it a Python?")
    version = answer.get("version")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise BadAnswer("its answer has no Python version: is it a Python?")
    out: dict[str, Any] = {"version": version}
    for key, required in (("prefix", True), ("implementation", False), ("base_prefix", False),
                          ("executable", False), ("usersite", False)):
        value = answer.get(key)
        if value is None and not required:
            out[key] = None
            continue
        if not _is_text(value):
            raise BadAnswer(f"its answer's {key!r} is not a path: is it a Python?")
        out[key] = value
    site = answer.get("site", [])
    if not isinstance(site, list) or len(site) > MAX_SITE_DIRS or not all(_is_text(p) for p in site):
        raise BadAnswer("its answer's 'site' is not a list of folders: is it a Python?")
    out["site"] = list(site)
    return out


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT and "\0" not in value


def parse_query(outcome: Outcome) -> dict[str, Any]:
    """The checked answer of a :data:`QUERY` run that ended well, or ``{"error": one line}``."""
    try:
        data = json.loads(outcome.stdout.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {"error": "it printed something that is not its version (is it a Python?)"}
    try:
        return checked(data)
    except BadAnswer as exc:
        return {"error": str(exc)}


def parse_old(outcome: Outcome) -> dict[str, Any] | None:
    """Version and prefix from an :data:`OLD_QUERY` run, or None when it did not print them."""
    if outcome.status != "ok":
        return None
    lines = outcome.stdout.decode("utf-8", "replace").splitlines()
    if len(lines) == 2 and _VERSION.fullmatch(lines[0]) and _is_text(lines[1]):
        return {"version": lines[0], "prefix": lines[1]}
    return None


def failure_text(outcome: Outcome, deadline_s: float) -> str:
    """One line for a run that did not end with an answer."""
    if outcome.status == "timeout":
        return (f"did not answer within {deadline_s:g} s at start-up (a hanging program, or a broken Python?)")
    if outcome.status == "flood":
        return f"it printed more than {MAX_OUTPUT >> 10} KiB instead of its version (is it a Python?)"
    if outcome.status == "cannot-run":
        error = "its name cannot be run (a NUL byte in it)" if "null byte" in outcome.error else outcome.error
        return f"cannot run it ({error})"
    if outcome.status == "not-run":
        return "not asked: the time for finding environments ran out first (Look again, or `cpudoctor envs`)"
    last = outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
    return f"it failed at start-up: {last[0][:200]}"
