"""The kernel's notations for CPUs and numbers, parsed with bounds: cpulists, cpumasks, integers, sizes.

Every layer speaks these: the probes read ``0-3,8-11`` from sysfs, the
advisor and the pinning panel write it back into ``taskset -c`` commands,
the CLI takes it as an argument. Parsers are bounded: CPU ids are below
:data:`MAX_CPUS`, numbers are ASCII digits of bounded length, sizes are
finite, so ``0-100000000`` or a two-million-digit mask is garbled input (a
:class:`GarbledValue`, or None from the lenient ``parse_*`` forms), never a
MemoryError.
"""

from __future__ import annotations

import math
import re

# Linux caps NR_CPUS at 8192 (x86 MAXSMP) and a few architectures go higher; no kernel
# numbers a CPU at 65536 or above. A list or mask beyond that is garbled, not a machine.
MAX_CPUS = 65536
# NUMA nodes: MAX_NUMNODES is 1 << NODES_SHIFT, and NODES_SHIFT is at most 10 on every architecture.
MAX_NUMA_NODES = 1024
# 19 digits hold any 64-bit value the kernel prints; longer is not a sysfs number.
_MAX_DIGITS = 19


class GarbledValue(ValueError):
    """A sysfs/procfs value that is not what the kernel writes; ``str()`` says how."""


_DEC_RE = re.compile(r"[+-]?[0-9]{1,%d}" % _MAX_DIGITS)
_HEX_RE = re.compile(r"[+-]?0[xX][0-9a-fA-F]{1,16}")
_CPU_ID_RE = re.compile(r"[0-9]{1,%d}" % len(str(MAX_CPUS)))


def parse_int(text: str, lo: int | None = None, hi: int | None = None) -> int:
    """A kernel number: ASCII decimal (leading zeros allowed) or ``0x`` hex, bounded; GarbledValue otherwise."""
    token = text.strip()
    if _DEC_RE.fullmatch(token):
        value = int(token, 10)
    elif _HEX_RE.fullmatch(token):
        value = int(token, 16)
    else:
        raise GarbledValue(f"{_clip(token)!r} is not a number")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise GarbledValue(f"{value} is outside {lo}..{hi}")
    return value


def cpu_number(text: str) -> int | None:
    """``"12"`` -> 12 for a CPU or node number in a file or folder name (``cpu12``), else None."""
    if not _CPU_ID_RE.fullmatch(text):
        return None
    value = int(text)
    return value if value < MAX_CPUS else None


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _cpu_id(text: str) -> int:
    value = cpu_number(text.strip())
    if value is None:
        raise GarbledValue(f"{_clip(text.strip())!r} is not a CPU number below {MAX_CPUS}")
    return value


def _too_many(count: int, most: int | None) -> None:
    if most is not None and count > most:
        raise GarbledValue(f"it names {count:,} CPUs, more than the {most:,} it can hold")


def strict_cpulist(text: str, most: int | None = None) -> list[int]:
    """:func:`parse_cpulist` raising GarbledValue; ``most``: more CPUs than that is garbled too, found before
    the list is expanded (a core's sibling list of ``0-65535`` on each of 8,192 CPUs took a minute)."""
    text = text.replace("\0", "").strip()
    if not text:
        return []
    cpus: set[int] = set()
    count = 0
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        stride = 1
        if ":" in part:
            part, _, s = part.partition(":")
            stride = _cpu_id(s.split("/")[0]) or 1
        if "-" in part:
            lo_text, _, hi_text = part.partition("-")
            lo, hi = _cpu_id(lo_text), _cpu_id(hi_text)
            if hi < lo:
                raise GarbledValue(f"the range {lo}-{hi} runs backwards")
            span = range(lo, hi + 1, stride)
            count += len(span)
            _too_many(count, most)
            cpus.update(span)
        else:
            count += 1
            _too_many(count, most)
            cpus.add(_cpu_id(part))
    return sorted(cpus)


def parse_cpulist(text: str | None) -> list[int] | None:
    """Parse a kernel cpulist (``0-3,8-11``, ``0-63:2`` strides, empty) to sorted ints.

    Returns None for None or garbled input (a range backwards, a CPU number
    of :data:`MAX_CPUS` or more, anything but ASCII digits), [] for an empty list.
    """
    if text is None:
        return None
    try:
        return strict_cpulist(text)
    except GarbledValue:
        return None


def strict_cpumask(text: str, most: int | None = None) -> list[int]:
    """:func:`parse_cpumask` raising GarbledValue; ``most`` as in :func:`strict_cpulist`."""
    digits = text.replace("\0", "").strip().replace(",", "")
    if not digits:
        return []
    if not re.fullmatch(r"[0-9a-fA-F]+", digits):
        raise GarbledValue(f"{_clip(digits)!r} has characters that are not hex digits")
    significant = digits.lstrip("0")
    if len(significant) * 4 > MAX_CPUS:
        raise GarbledValue(f"it names CPUs beyond {MAX_CPUS} ({len(digits)} hex digits)")
    if not significant:
        return []
    value = int(significant, 16)
    _too_many(bin(value).count("1"), most)
    bits = bin(value)[2:]
    top = len(bits) - 1
    return [top - i for i in range(top, -1, -1) if bits[i] == "1"]


def parse_cpumask(text: str | None) -> list[int] | None:
    """Parse a kernel hex cpumask (``ffffffff,00000000``) to sorted CPU numbers; None when garbled."""
    if text is None:
        return None
    try:
        return strict_cpumask(text)
    except GarbledValue:
        return None


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


_SIZE_RE = re.compile(r"([0-9]{1,15})(?:\.([0-9]{1,6}))?\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def strict_size(text: str) -> int:
    m = _SIZE_RE.fullmatch(text.strip())
    if not m:
        raise GarbledValue(f"{_clip(text.strip())!r} is not a positive size like 32768K")
    whole, frac, unit = m.groups()
    value = (int(whole) + (int(frac) / 10 ** len(frac) if frac else 0)) * _SIZE_UNITS[unit.upper()]
    if not math.isfinite(value) or value >= 1 << 50:
        raise GarbledValue(f"{_clip(text.strip())!r} is larger than any cache")
    return int(value)


def parse_size(text: str | None) -> int | None:
    """Sysfs cache sizes (``32768K``, ``6M``, ``512``) to bytes; None when missing or garbled."""
    if text is None:
        return None
    try:
        return strict_size(text)
    except GarbledValue:
        return None
