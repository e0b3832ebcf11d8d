"""Quote a child process's message inside a finding without cutting a sentence in half.

A rule used to write ``message[:160]`` into its "why" and close a parenthesis
after it; when the message was longer, the reader got "…; fix: pip)" or
"…without AVX, or )". Messages are quoted whole; only a pathological one (a
traceback squeezed into one line) is shortened, at a sentence or word boundary,
with the brackets it opened dropped and an ellipsis saying so.
"""

from __future__ import annotations

import re

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_DANGLING = re.compile(r"(?:[\s,;:(\[{-]|\b(?:or|and|the|a|an|of|to|with|for|fix|try))+$", re.IGNORECASE)


def quote_message(text: str | None, limit: int = 400) -> str:
    """``text`` on one line, whole when it fits in ``limit`` characters, else cut cleanly and marked "[…]"."""
    one_line = " ".join((text or "").split())
    if len(one_line) <= limit:
        return one_line
    head = one_line[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] > limit // 2:
        head = head[:ends[-1]]
    else:
        head = head.rsplit(" ", 1)[0]
    head = _balanced_prefix(head)
    head = _DANGLING.sub("", head).rstrip()
    return f"{head} […]"


def _balanced_prefix(text: str) -> str:
    """The longest prefix of ``text`` in which every bracket and backtick opened is also closed."""
    stack: list[int] = []
    ticks: list[int] = []
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            stack.append(i)
        elif ch in _OPENERS.values() and stack:
            stack.pop()
        elif ch == "`":
            if ticks:
                ticks.pop()
            else:
                ticks.append(i)
    cut = min(stack + ticks, default=len(text))
    return text[:cut]
