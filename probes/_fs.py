"""Reading /proc and /sys under a root, tolerant of what real trees contain.

Real trees have trailing NUL bytes (hwloc-gather-topology artefacts), missing
files on old kernels, and permission errors in containers: every helper here
returns ``None`` (or the given default) instead of raising.
"""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULT_ROOT = Path("/")


def under(root: Path | str | None, rel: str | Path) -> Path:
    """``rel`` (absolute like ``/proc/cpuinfo`` or relative) placed under ``root``."""
    root = Path(root) if root is not None else _DEFAULT_ROOT
    return root / str(rel).lstrip("/")


def read_text(path: Path) -> str | None:
    """File text with NUL bytes and surrounding whitespace stripped, or None."""
    try:
        data = path.read_bytes()
    except (OSError, ValueError):
        return None
    return data.replace(b"\0", b"").decode("utf-8", "replace").strip()


def read_int(path: Path, default: int | None = None) -> int | None:
    text = read_text(path)
    if text is None:
        return default
    try:
        return int(text.split()[0], 0) if text else default
    except (ValueError, IndexError):
        return default


def read_lines(path: Path) -> list[str] | None:
    text = read_text(path)
    return None if text is None else text.splitlines()


def list_dir(path: Path) -> list[str]:
    """Entry names of a directory, sorted; empty when it is missing or unreadable."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def parse_cpulist(text: str | None) -> list[int] | None:
    """Parse a kernel cpulist (``0-3,8-11``, ``0-63:2`` strides, empty) to sorted ints.

    Returns None for None or garbled input, [] for an empty list.
    """
    if text is None:
        return None
    text = text.replace("\0", "").strip()
    if not text:
        return []
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            stride = 1
            if ":" in part:
                part, s = part.split(":", 1)
                stride = int(s.split("/")[0])
            if "-" in part:
                lo, hi = part.split("-", 1)
                cpus.update(range(int(lo), int(hi) + 1, max(stride, 1)))
            else:
                cpus.add(int(part))
    except ValueError:
        return None
    return sorted(cpus)


def parse_cpumask(text: str | None) -> list[int] | None:
    """Parse a kernel hex cpumask (``ffffffff,00000000``) to sorted CPU numbers."""
    if text is None:
        return None
    text = text.replace("\0", "").strip().replace(",", "")
    if not text:
        return []
    try:
        value = int(text, 16)
    except ValueError:
        return None
    return [i for i in range(value.bit_length()) if value >> i & 1]


def format_cpulist(cpus: list[int] | set[int] | tuple[int, ...]) -> str:
    """Inverse of :func:`parse_cpulist`: ``[0,1,2,3,8]`` -> ``"0-3,8"``."""
    ordered = sorted(set(cpus))
    if not ordered:
        return ""
    parts: list[str] = []
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = cpu
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)


def parse_size(text: str | None) -> int | None:
    """Sysfs cache sizes (``32768K``, ``6M``, ``512``) to bytes."""
    if text is None:
        return None
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if text.endswith(suffix):
            text, mult = text[:-1], m
            break
    try:
        return int(float(text) * mult)
    except ValueError:
        return None
