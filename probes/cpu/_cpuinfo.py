"""Parse ``/proc/cpuinfo`` text into processor entries, tolerant of real-world dumps.

Real files are not always clean: the last line may have no newline, single
entry dumps (archspec) carry extra keys such as ``COMMENT``, hybrid CPUs report
slightly different flags per processor, and a damaged file may hold binary
garbage. The parser never raises; it returns what it could read plus notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The key that starts a new processor block (x86 and ARM both use "processor").
_BLOCK_KEY = "processor"
# No kernel numbers more CPUs (probes/_fs.py MAX_CPUS); entries beyond are garbage.
_MAX_PROCESSORS = 65536
# The longest real value is an x86 flags line (~2 kB); a longer one is a damaged file.
_MAX_VALUE = 16384


@dataclass
class CpuinfoText:
    """What /proc/cpuinfo says: one dict per processor plus machine-wide keys."""

    processors: list[dict[str, str]] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)   # keys outside any processor block (ARM "Hardware", COMMENT)
    notes: list[str] = field(default_factory=list)

    def first(self, *keys: str) -> str | None:
        """First non-empty value of any of ``keys`` across processors, then header."""
        for proc in self.processors:
            for key in keys:
                value = proc.get(key)
                if value:
                    return value
        for key in keys:
            value = self.header.get(key)
            if value:
                return value
        return None

    def values(self, key: str) -> list[str]:
        """Distinct values of ``key`` over the processors, in first-seen order."""
        seen: list[str] = []
        for proc in self.processors:
            value = proc.get(key)
            if value and value not in seen:
                seen.append(value)
        if not seen and self.header.get(key):
            seen.append(self.header[key])      # old ARM kernels: identity printed once, after the blocks
        return seen


def parse_cpuinfo(text: str | None) -> CpuinfoText:
    """Split ``text`` into processor blocks of ``key: value`` pairs.

    Lines without a colon are skipped (they are garbage or continuation noise);
    a file with no recognisable ``key : value`` line yields no processors and a
    note, so callers report "unknown" instead of guessing.
    """
    result = CpuinfoText()
    if text is None:
        result.notes.append("/proc/cpuinfo could not be read")
        return result
    if not text.strip():
        result.notes.append("/proc/cpuinfo is empty")
        return result
    current: dict[str, str] | None = None
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            current = None          # a blank line ends a processor block
            continue
        if line.startswith("#"):
            continue                # a comment added by whoever captured the dump
        if ":" not in line:
            skipped += 1
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        value = value.strip()
        if not key or not _plausible_key(key) or len(value) > _MAX_VALUE:
            skipped += 1
            continue
        if key == _BLOCK_KEY:
            if len(result.processors) >= _MAX_PROCESSORS:
                current = None          # a garbled file repeating "processor" a million times
                skipped += 1
                continue
            current = {}
            result.processors.append(current)
            current[key] = value
            continue
        if current is None:
            # Outside a block: machine-wide keys (ARM "Hardware", an archspec COMMENT).
            result.header.setdefault(key, value)
            continue
        current[key] = value
    if skipped:
        result.notes.append(f"/proc/cpuinfo: {skipped} unreadable line(s) ignored")
    if not result.processors and result.header:
        # Some dumps have no "processor" line at all: treat the header as one entry.
        result.processors.append(dict(result.header))
        result.header = {}
    if not result.processors:
        result.notes.append("/proc/cpuinfo has no processor entries (garbled or truncated file)")
    return result


def _plausible_key(key: str) -> bool:
    """cpuinfo keys are short printable words (``cpu family``, ``CPU implementer``)."""
    return len(key) <= 40 and all(ch.isalnum() or ch in " _-()." for ch in key)
