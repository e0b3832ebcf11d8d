"""argparse ``type=`` functions for numbers: finite, in range, bounded lists.

``float("nan")`` and ``float("inf")`` parse, and ``0-100000000000`` is a valid
range to a naive parser: without these a ``--seconds nan`` job never ends and
a ``--cpus`` range eats the memory. A bad value is argparse's one line, exit 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(lo: float, hi: float, what: str = "a number") -> Callable[[str], float]:
    """A finite float in [lo, hi]."""
    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number; give {lo:g} to {hi:g}")
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value:g} is out of range; give {lo:g} to {hi:g}")
        return value
    return parse


def integer(lo: int, hi: int, what: str = "a whole number") -> Callable[[str], int]:
    """An int in [lo, hi], ASCII digits only (no 4,300-digit surprises)."""
    def parse(text: str) -> int:
        token = text.strip()
        if not (token.lstrip("+-").isascii() and token.lstrip("+-").isdigit()) or len(token) > 12:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {what} from {lo} to {hi}")
        value = int(token)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range; give {lo} to {hi}")
        return value
    return parse


def int_list(lo: int, hi: int, max_items: int = 64, what: str = "numbers") -> Callable[[str], list[int]]:
    """``1,2,4`` or ``0-7``: at most ``max_items`` values, each in [lo, hi]."""
    def parse(text: str) -> list[int]:
        from cpudoctor.kits.cpulist import GarbledValue, strict_cpulist

        try:
            values = strict_cpulist(text)
        except GarbledValue as exc:
            detail = f" ({exc})" if what == "CPU numbers" else ""
            raise argparse.ArgumentTypeError(f"expected {what} like 1,2,4 or 0-7, not {text[:40]!r}{detail}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected {what} like 1,2,4 or 0-7, not {text[:40]!r}")
        if len(values) > max_items:
            raise argparse.ArgumentTypeError(f"{len(values)} values are too many; give at most {max_items}")
        bad = [v for v in values if not lo <= v <= hi]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad[0]} is out of range; give {lo} to {hi}")
        return values
    return parse


def file_name(what: str = "a file name") -> Callable[[str], str]:
    """A path to write: an empty (or blank) one is refused, never taken as "stdout" or silently ignored."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r} is an empty name; give {what}")
        if "\0" in text:
            raise argparse.ArgumentTypeError(f"{text!r}: a file name cannot hold a NUL character; give {what}")
        return text
    return parse


# ``-o FILE`` of every command that prints.
output_file = file_name("a file name (or - for stdout)")


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000 ** 2, "mib": 1 << 20,
               "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30, "t": 1 << 40, "tb": 1000 ** 4, "tib": 1 << 40}


def byte_size(lo: int = 1, hi: int = 1 << 50, what: str = "a size") -> Callable[[str], int]:
    """A size in bytes: ``16G``, ``512M``, ``1.5GiB``, ``800MB``, ``1073741824`` (K/M/G/T alone are binary, as
    ``free -h`` and docker's ``--memory`` read them)."""
    def parse(text: str) -> int:
        raw = text.strip().replace(" ", "").lower()
        digits = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = raw[len(digits):]
        try:
            value = float(digits) if digits and len(raw) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if unit not in _SIZE_UNITS or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (give e.g. 16G, 512M or 1.5GiB)")
        n = int(value * _SIZE_UNITS[unit])
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range for {what}")
        return n

    return parse


def shape(max_dims: int = 8, what: str = "a shape") -> Callable[[str], list[int]]:
    """One sample's shape: ``3x224x224``, ``3,224,224`` or ``512``."""
    def parse(text: str) -> list[int]:
        parts = [p for p in text.replace(",", "x").replace("*", "x").lower().split("x") if p] if len(text) < 100 else []
        if not parts or len(parts) > max_dims or not all(p.isdigit() and 0 < int(p) < 1 << 24 for p in parts):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (give one sample's sizes, e.g. 3x224x224)")
        return [int(p) for p in parts]

    return parse
