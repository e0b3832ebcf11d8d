"""Number formats for people: sizes, clocks, durations, percentages, measured values, wrapped text.

One function per kind of number, used by the terminal, the window, the
exports and the advisor's sentences, so 23.5 GiB of memory never reads
"24 GiB" on another page. Each takes the text for "unknown" as an argument:
running text says ``unknown`` (:data:`UNKNOWN`), a window's form shows a
dash (:data:`DASH`).
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

# An unknown value, in running text and table cells of the exports and the terminal.
UNKNOWN = "unknown"
# An unknown value in a window's form or table cell, where a word would read as data (the
# tooltip or a note says why it is unknown).
DASH = "—"

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(n: int | float | None, unknown: str = UNKNOWN, digits: int = 1) -> str:
    """Bytes in binary units with at most ``digits`` decimals, no trailing zeros: 23.5 GiB, 8 GiB, 1.5 KiB.

    Memory, swap and files. Cache sizes are quoted exactly instead (:func:`cache_size`).
    """
    if n is None:
        return unknown
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            if unit == "B":
                return f"{int(value)} B"
            text = f"{value:.{digits}f}"
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            return f"{text} {unit}"
        value /= 1024
    raise AssertionError("unreachable: the last unit takes every value")


def cache_size(n: int | None, unknown: str = UNKNOWN) -> str:
    """A cache size exactly, like lstopo: 32 MiB, 27.5 MiB, 5118 KiB (Magny-Cours' real L3), never rounded."""
    if n is None:
        return unknown
    mib = n / (1 << 20)
    if mib >= 1 and round(mib, 1) * (1 << 20) == n:
        return f"{mib:g} MiB"
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def clock(mhz: float | None, unknown: str = UNKNOWN) -> str:
    """A clock: 2.45 GHz from 1 GHz up, 800 MHz below; unknown for None or a non-positive value."""
    if mhz is None or mhz <= 0 or not math.isfinite(mhz):
        return unknown
    return f"{mhz / 1000:.2f} GHz" if mhz >= 1000 else f"{mhz:.0f} MHz"


def seconds(s: float | None, unknown: str = UNKNOWN, digits: int = 1) -> str:
    """A duration: 0.25 s, 3.1 s, 2 min 5 s, 1 h 4 min."""
    if s is None or not math.isfinite(s):
        return unknown
    if s < 60:
        return f"{s:.{digits}f} s"
    minutes, secs = divmod(round(s), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def percent(value: float | None, unknown: str = UNKNOWN, digits: int = 0, symbol: bool = True, *,
            fraction: bool = False) -> str:
    """A percentage: ``48 %``, ``250 %`` (CPU load: 100 % = one CPU), ``31.2 %`` with ``digits=1``.

    The one percent format of CPU Doctor, on every surface (a space before the sign, as the render
    layer mostly wrote it). ``value`` is already scaled to 0-100, or a share of 1 with ``fraction``
    (0.48 -> ``48 %``). ``symbol=False`` for a table column whose heading carries the unit ("CPU %").
    """
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return unknown
    shown = value * 100 if fraction else value
    if not math.isfinite(shown):
        return unknown
    return f"{shown:.{digits}f}" + (" %" if symbol else "")


def number(v: Any) -> str:
    """A measured value without scientific notation: 258,912 / 487.8 / 0.3537; bools as yes/no."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, (int, float)):
        return "" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a == 0 or a >= 0.001:
        return f"{v:.4g}"
    return f"{v:.2e}"


def or_unknown(value: Any, unknown: str = UNKNOWN) -> str:
    """``value`` as text, or ``unknown`` for None and the empty string."""
    return unknown if value is None or value == "" else str(value)


def wrap(text: str, width: int = 100, indent: int = 0, hang: int = 0, prefix: str | None = None) -> list[str]:
    """``text`` wrapped to ``width`` columns, indented by ``indent`` spaces (``prefix`` on the first line
    instead, e.g. ``"  - "``); continuation lines indented ``hang`` more. Words and hyphenated
    names (``OMP_NUM_THREADS``, ``x86-64-v3``, paths) are never broken. [] for empty text.
    """
    if not text:
        return []
    pad = " " * indent
    return textwrap.wrap(text, width=width, initial_indent=pad if prefix is None else prefix,
                         subsequent_indent=pad + " " * hang, break_on_hyphens=False, break_long_words=False)


# Metrics that are a fraction of something (GEMM: measured / computed peak FLOP/s; the CPU share other programs
# took; an accuracy): shown as percentages, never as a raw 0.8984.
PERCENT_KEYS = frozenset({"utilisation", "utilization", "efficiency", "other_share", "steal_share", "accuracy",
                          "train_accuracy", "eval_accuracy", "top1_agreement", "of_roof", "of_nominal", "share",
                          "below_share", "emulated_share", "measured_vs_nominal", "best_operator_vs_roof"})


def metric(key: str, value: Any) -> str:
    """A benchmark metric as a reader expects it: ``utilisation`` 0.3115 -> ``31.2 %``, else :func:`number`."""
    if str(key) in PERCENT_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value):
        return percent(value, digits=1, fraction=True)
    return number(value)
