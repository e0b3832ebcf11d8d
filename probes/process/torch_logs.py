"""PyTorch's recompilation log (``TORCH_LOGS=recompiles``) -> which functions recompiled, and why.

A pure parser (records: :mod:`cpudoctor.model.joblogs`). With ``TORCH_LOGS=recompiles`` PyTorch's logging writes, to stderr,
one record per recompilation, every line with the same prefix::

    V1201 15:50:06.136000 16178 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] Recompiling function inner in /x/y.py:67
    V1201 ... [0/1] [__recompiles]     triggered by the following guard failure(s):
    V1201 ... [0/1] [__recompiles]     - 0/0: tensor 'args[0]' size mismatch at index 0. expected 1, actual 2

``[0/1]`` is the frame (0) and its compile count (1: the first recompile). Only the
newest guard failure of each record (the first ``-`` line) says what changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cpudoctor.model.joblogs import Recompile, RecompileLog

MARKERS = ("[__recompiles]", "[__recompiles_verbose]")
_HEAD_RE = re.compile(r"\[(\d+)/(\d+)\] \[__recompiles(?:_verbose)?\] Recompiling function (\S+) in (.+?):(\d+)\s*$")
_FAIL_RE = re.compile(r"\[(\d+)/(\d+)\] \[__recompiles(?:_verbose)?\]\s+- (\d+/\d+): (.*)$")
_SIZE_RE = re.compile(r"tensor '([^']+)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
_LIMIT_RE = re.compile(r"(cache_size_limit|recompile_limit)", re.IGNORECASE)


def is_recompile_line(line: str) -> bool:
    return any(m in line for m in MARKERS)


# The head of every line PyTorch's logging writes (torch/_logging/_internal.py's format): the level and
# date, the time, the process id, the file and line, then the compile id; distributed runs put
# "[rank0]:" in front.
_LOG_HEAD = r"(?:\[rank\d+\]:)?[VIWEDC]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\n]*:\d+\] (?:\[[^\]\n]*\] )*"
_LOGGED_RECOMPILE_RE = re.compile(_LOG_HEAD + r"\[__recompiles(?:_verbose)?\]")
_LOGGED_LIMIT_RE = re.compile(_LOG_HEAD + r".*(?:cache_size_limit|recompile_limit)")


def logged_recompile(line: str) -> bool:
    """``line`` is one PyTorch's logging wrote for ``TORCH_LOGS=recompiles`` (``cpudoctor run`` holds back only
    those: a job's own line that contains ``[__recompiles]`` somewhere is the job's)."""
    return _LOGGED_RECOMPILE_RE.match(line) is not None


def logged_limit(line: str) -> bool:
    """PyTorch's warning that Dynamo hit its recompile limit (the user sees it; CPU Doctor reads it too)."""
    return _LOGGED_LIMIT_RE.match(line) is not None


def parse_recompiles(lines: Iterable[str]) -> RecompileLog:
    """Recompilation records among ``lines`` (other lines are ignored)."""
    log = RecompileLog()
    current: Recompile | None = None
    for line in lines:
        line = line.rstrip("\r\n")
        if _LIMIT_RE.search(line) and "torch._dynamo" in line or "recompile_limit" in line:
            log.limit_hit = True
        if not is_recompile_line(line):
            continue
        head = _HEAD_RE.search(line)
        if head:
            current = Recompile(frame=int(head.group(1)), count=int(head.group(2)), function=head.group(3),
                                file=head.group(4).replace("\\", "/"), line=int(head.group(5)))
            log.recompiles.append(current)
            continue
        fail = _FAIL_RE.search(line)
        if fail and current is not None and not current.guard_failure:
            current.guard_failure = fail.group(4).strip()
            size = _SIZE_RE.search(current.guard_failure)
            if size:
                current.tensor, current.dim = size.group(1), int(size.group(2))
                current.expected, current.actual = int(size.group(3)), int(size.group(4))
    return log
