"""Counted nouns: "1 thread", "2 threads", "1,024 samples" — one helper instead of ``'s' if n != 1``.

Hand-written plurals drift ("1 threads", "Best: 1 thread — 1 threads"); every
count shown to a person goes through :func:`plural`.
"""

from __future__ import annotations

# Nouns whose plural is not noun + "s".
IRREGULAR = {"process": "processes", "CCX": "CCXs", "batch": "batches", "matrix": "matrices", "is": "are",
             "was": "were", "has": "have"}


def noun(count: float, singular: str, plural_form: str | None = None) -> str:
    """The noun alone, singular for exactly 1 (and -1), plural otherwise (0 threads, 1.5 threads)."""
    if abs(count) == 1:
        return singular
    return plural_form or IRREGULAR.get(singular) or singular + "s"


def plural(count: float, singular: str, plural_form: str | None = None, fmt: str = ",") -> str:
    """``count`` and its noun: ``plural(1, "thread")`` -> "1 thread", ``plural(1024, "sample")`` -> "1,024 samples"."""
    if isinstance(count, float) and count.is_integer():
        count = int(count)
    number = format(count, fmt) if isinstance(count, int) else f"{count:g}"
    return f"{number} {noun(count, singular, plural_form)}"
