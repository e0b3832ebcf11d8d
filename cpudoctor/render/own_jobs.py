"""Relaunch commands for the user's own jobs only: the Inspector's view of a process finding's snippet.

PROC014 (several PyTorch jobs on the same CPUs) relaunches every job it saw;
only the owner of a process (or root) can restart it. The Inspector shows the
commands for the user's own jobs and, for another user's, one line saying
whose it is. The snippet's blocks are read by their comment lines, so the
rule's wording can change without this module.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

from cpudoctor.model import Finding

# A relaunch block in a process finding's snippet starts with a comment naming the job's PID:
# "# this job (PID 4200):", "# PID 4311:", "# PID 4311 (python train.py):".
_RELAUNCH_HEAD = re.compile(r"^\s*#.*\bPID (\d+)\b.*:\s*$")


def relaunched_pids(snippet: str) -> list[int]:
    """The PIDs a snippet has relaunch blocks for, in order."""
    return [int(m.group(1)) for m in map(_RELAUNCH_HEAD.match, snippet.splitlines()) if m]


def other_users_job(pid: int) -> str:
    return (f"# PID {pid} belongs to another user: only its owner (or root) can restart it; "
            "ask them to use the CPUs left for it")


def own_relaunches(snippet: str, owned: Mapping[int, bool | None]) -> str:
    """``snippet`` with relaunch commands for the user's own jobs only.

    A job that belongs to another user (``owned[pid] is False``) keeps one
    comment line instead of its commands; a job whose owner is unknown (it has
    exited) keeps its block. Lines before the first block stay. When no
    command is left, the snippet is empty.
    """
    out: list[str] = []
    dropping = False
    commands = 0
    for line in snippet.splitlines():
        m = _RELAUNCH_HEAD.match(line)
        if m:
            dropping = owned.get(int(m.group(1))) is False
            out.append(other_users_job(int(m.group(1))) if dropping else line)
            continue
        if dropping:
            continue
        out.append(line)
        commands += bool(line.strip()) and not line.lstrip().startswith("#")
    return "\n".join(out) if commands else ""


def for_this_user(findings: list[Finding], owner: Callable[[int], bool | None]) -> list[Finding]:
    """``findings`` with relaunch commands only for the user's own jobs (``owner(pid)``: True, False or None for
    unknown); a snippet left with no command goes."""
    out = []
    for finding in findings:
        pids = relaunched_pids(finding.snippet) if finding.snippet else []
        if not pids:
            out.append(finding)
            continue
        snippet = own_relaunches(finding.snippet, {pid: owner(pid) for pid in pids})
        out.append(finding if snippet == finding.snippet else dataclasses.replace(finding, snippet=snippet))
    return out
