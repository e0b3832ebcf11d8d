"""One colour scale for CPU load, shared by the topology map and the Monitor's heat strip.

Idle is a neutral near-background grey and busy a burnt orange, so load never
looks like the selection (the palette's highlight, blue in most themes) and
the same colour means the same load on every page. No Qt: the map turns the
stops into QColors, the Monitor into a pyqtgraph lookup table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# (position 0..1, colour); light and dark themes
LIGHT_STOPS: tuple[tuple[float, str], ...] = ((0.0, "#f3f4f6"), (0.5, "#f1cb8e"), (1.0, "#d4692f"))
DARK_STOPS: tuple[tuple[float, str], ...] = ((0.0, "#2f353d"), (0.5, "#8a6430"), (1.0, "#e0843f"))
TICKS_PERCENT: tuple[int, ...] = (0, 50, 100)


def stops(dark: bool) -> tuple[tuple[float, str], ...]:
    return DARK_STOPS if dark else LIGHT_STOPS


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def rgb_at(percent: float | None, dark: bool = False) -> tuple[int, int, int]:
    """The colour of ``percent`` load (0-100, clamped); None or NaN (no sample yet) is the 0 % colour."""
    t = 0.0 if percent is None or math.isnan(percent) else max(0.0, min(100.0, percent)) / 100.0
    s = stops(dark)
    for (t0, c0), (t1, c1) in zip(s, s[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
            a, b = _rgb(c0), _rgb(c1)
            return tuple(round(x + (y - x) * f) for x, y in zip(a, b))  # type: ignore[return-value]
    return _rgb(s[-1][1])


def lookup_table(dark: bool = False, size: int = 256) -> "np.ndarray":
    """(size, 3) uint8 colours from 0 % to 100 %, for an image of loads with levels (0, 100).

    numpy is imported here, not with the module: the topology map shares this scale and is built before
    the window's first paint, which numpy's import would delay (the Monitor, built after, has it anyway)."""
    import numpy as np

    return np.array([rgb_at(100.0 * i / (size - 1), dark) for i in range(size)], dtype=np.uint8)
