"""A running job's command line, as a relaunch command a person can paste into bash.

The inspector shows command lines redacted (``--api-key <redacted>``, a data
path as ``<redacted>``, home folders as ``~``): findings get pasted into bug
trackers. A relaunch line built from that text is not a command: bash reads
``<redacted>`` as a redirection from a file named ``redacted``, and ``'~/x'``
quoted is no path. Here each shown argument is quoted for bash, a home folder
becomes ``"$HOME"``, and each hidden argument becomes a parameter expansion
that names it, ``"${JOB1234_ARG3:?the value of --api-key, hidden by CPU
Doctor}"``: pasted as it is, bash stops before starting anything and says which
argument to supply; with the variable set (``JOB1234_ARG3=... <line>``), the
job runs with exactly its old arguments. The finding lists the hidden
arguments in words (:attr:`JobCommand.hidden`).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from cpudoctor.probes.process.procfs import REDACTED

FALLBACK = "python train.py  # your command"
# Variables a relaunch sets itself: a job started as ``env OMP_NUM_THREADS=8 python ...`` would override them.
_SET_BY_RELAUNCH_PREFIXES = ("OMP_", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMP_", "KMP_AFFINITY")
# A home folder the inspector shortened to "~", at the start of an argument or of a value ("--data=~/x").
_HOME = re.compile(r"(?:^|(?<=[=:,]))~(?=/|$)")
_FLAG_NAME = re.compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.-]{0,40}")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_MAX_ARGS = 64


@dataclass(frozen=True)
class JobCommand:
    """A pasteable command and, in words, the arguments the user must supply."""

    text: str
    hidden: list[str] = field(default_factory=list)       # "the value of --api-key", "argument 3"
    variables: list[str] = field(default_factory=list)    # the shell variables standing for them
    known: bool = True                                    # False: the command was unknown, FALLBACK stands for it

    def note(self, who: str = "the job") -> str:
        """One sentence for a finding's fix: which arguments were hidden and how to supply them; "" when none."""
        if not self.hidden:
            return ""
        pairs = ", ".join(f"{v} = {h}" for v, h in zip(self.variables, self.hidden))
        return (f"{who.capitalize()}'s command line shows {len(self.hidden)} hidden "
                f"argument{'s' if len(self.hidden) != 1 else ''} ({pairs}): set "
                f"{'that variable' if len(self.hidden) == 1 else 'those variables'} to the real "
                f"value{'s' if len(self.hidden) != 1 else ''} before pasting, or bash stops and names "
                f"{'it' if len(self.hidden) == 1 else 'them'}.")


def _quote(text: str) -> str:
    """``text`` quoted for bash, with a home folder shortened to ``~`` written as ``"$HOME"``."""
    if not text:
        return "''"
    parts = _HOME.split(text)
    return '"$HOME"'.join(shlex.quote(p) if p else "" for p in parts) or '"$HOME"'


def _hidden(pid: int, number: int, what: str) -> tuple[str, str]:
    """(shell word, variable name) for a hidden argument."""
    name = f"JOB{pid}_ARG{number}"
    return f'"${{{name}:?{what}, hidden by CPU Doctor}}"', name


def _drop_own_env(argv: list[str]) -> list[str]:
    """``env OMP_NUM_THREADS=8 python x.py`` -> ``python x.py``: the relaunch's own settings must win."""
    if not argv or os.path.basename(argv[0]) != "env":
        return argv
    rest = argv[1:]
    kept = [argv[0]]
    while rest and "=" in rest[0] and not rest[0].startswith("-"):
        name = rest[0].split("=", 1)[0]
        if not name.startswith(_SET_BY_RELAUNCH_PREFIXES):
            kept.append(rest[0])
        rest = rest[1:]
    return (kept if len(kept) > 1 else []) + rest


def job_command(pid: int, argv: list[str] | None, cmdline: str | None = None) -> JobCommand:
    """The relaunch form of a job's (redacted) ``argv``; FALLBACK when it is unknown or too long to be useful.

    ``cmdline`` (the joined text) is used only when ``argv`` is missing, as in
    inspections saved by older versions: then it is split on blanks.
    """
    args = list(argv or [])
    if not args and cmdline and cmdline.strip() and "\n" not in cmdline and "…" not in cmdline:
        args = cmdline.split()
    args = _drop_own_env(args)
    if not args or len(args) > _MAX_ARGS or sum(len(a) for a in args) > 2000:
        return JobCommand(FALLBACK, known=False)
    words: list[str] = []
    hidden: list[str] = []
    names: list[str] = []
    previous = ""
    for number, arg in enumerate(args, start=1):
        if REDACTED not in arg:
            words.append(_quote(arg))
            previous = arg
            continue
        head, _, tail = arg.partition(REDACTED)
        if head.endswith("=") and (_FLAG_NAME.fullmatch(head[:-1]) or _VAR_NAME.fullmatch(head[:-1])):
            what = f"the value of {head[:-1]}"
        elif head and _FLAG_NAME.fullmatch(head):
            what = f"the value of {head}"            # -pPASSWORD: the value glued to the flag
        elif not head and _FLAG_NAME.fullmatch(previous) and previous not in ("--",):
            what = f"the value of {previous}"
        else:
            what = f"argument {number - 1}" if number > 1 else "the program"
        word, name = _hidden(pid, number - 1, what)
        words.append((_quote(head) if head else "") + word + (_quote(tail) if tail and REDACTED not in tail else ""))
        hidden.append(what)
        names.append(name)
        previous = arg
    return JobCommand(" ".join(words), hidden, names)
