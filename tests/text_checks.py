"""Checks that a finding's sentences were not cut off mid-way ("fix: pip)", "…without AVX, or )").

Used by the advisor tests over every rule's output on every corpus tree and scenario fixture.
"""

from __future__ import annotations

import re

_PAIRS = {")": "(", "]": "[", "}": "{"}
# A sentence cut in the middle ends on a connective or a separator.
_DANGLING_END = re.compile(r"(?:\b(?:or|and|a|an|the|of|to|with|for|e\.g\.|fix|try)|[,;:(\[{-])\s*$", re.IGNORECASE)
# An empty pair left where a clause was dropped: "( )", "(, ...", "(; ...", "( ...)" with a blank first.
_EMPTY_PAIR = re.compile(r"\(\s+\)|(?<![\w\]>])\(\)|\(\s*[,;:]|[,;:]\s*\)")
# A closing bracket right after a connective: "..., or )".
_DANGLING_CLOSE = re.compile(r"\b(?:or|and|fix:|try:)\s*\)", re.IGNORECASE)


def unbalanced(text: str) -> str | None:
    """The first bracket or backtick that is not matched in ``text``; None when all pair up."""
    stack: list[str] = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if not stack or stack[-1] != _PAIRS[ch]:
                return ch
            stack.pop()
    if stack:
        return stack[-1]
    if text.count("`") % 2:
        return "`"
    return None


def cut_mid_sentence(text: str) -> str | None:
    """Why ``text`` reads as cut off (a short reason), or None when it reads as whole sentences."""
    text = text.strip()
    if not text:
        return None
    bad = unbalanced(text)
    if bad:
        return f"unbalanced {bad!r}"
    m = _EMPTY_PAIR.search(text)
    if m:
        return f"empty or half-empty brackets {m.group(0)!r}"
    m = _DANGLING_CLOSE.search(text)
    if m:
        return f"a clause cut before its bracket closes: {m.group(0)!r}"
    m = _DANGLING_END.search(text)
    if m:
        return f"ends on {m.group(0).strip()!r}"
    return None


def finding_text_problems(findings) -> list[str]:
    """One line per cut-off title/why/fix among ``findings``."""
    out = []
    for f in findings:
        for part in ("title", "why", "fix"):
            reason = cut_mid_sentence(getattr(f, part) or "")
            if reason:
                out.append(f"{f.code} {part}: {reason}: {getattr(f, part)!r}")
    return out
