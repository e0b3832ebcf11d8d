"""The x86-64 psABI micro-architecture levels (``resources/x86_64_levels.json``) and what a set of flags meets.

Each level requires every flag of the levels below it. The ISA verdict names the
level a CPU meets (:meth:`PsabiLevels.x86_64_level`, ``cpu.isa.x86_64_level``);
the ISA-floor table names needs as levels (``x86-64-v2``), which
:meth:`PsabiLevels.expand` and :meth:`PsabiLevels.missing_for` turn into flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cpudoctor.knowledge.datafile import DataFile

_NEED_LEVEL = re.compile(r"^x86-64-v([1-4])$")


def level_of_need(need: str) -> int | None:
    """``x86-64-v3`` -> 3; None for a need that is a flag name."""
    m = _NEED_LEVEL.match(need)
    return int(m.group(1)) if m else None


class PsabiLevels(DataFile):
    """x86_64_levels.json: the four levels, each with the flags it adds."""

    @property
    def rows(self) -> list[dict]:
        return self.data["levels"]

    def flags_up_to(self, level: int) -> list[str]:
        """Every cpuinfo flag x86-64-v``level`` implies (its own and those of the levels below), in order."""
        flags: list[str] = []
        for row in self.rows:
            if row["level"] <= level:
                flags.extend(f for f in row["flags"] if f not in flags)
        return flags

    def x86_64_level(self, flags: Iterable[str]) -> int | None:
        """The highest level all of whose flags, and all lower levels' flags, are present; None below v1.

        This is ``cpu.isa.x86_64_level``: a CPU that lacks one baseline flag
        (``lm`` on a 32-bit CPU, ``syscall`` hidden by a VM) meets no level.
        """
        have = set(flags)
        reached = None
        for row in self.rows:
            if not set(row["flags"]) <= have:
                break
            reached = row["level"]
        return reached

    def level_counting_sse2_as_v1(self, flags: Iterable[str]) -> int | None:
        """Like :meth:`x86_64_level`, but any CPU with SSE2 counts as v1 even when a baseline flag is missing.

        For words about an instruction a build needs when the report has no
        ``cpu.isa.x86_64_level`` ("this CPU is x86-64-v1"); None without SSE2.
        """
        have = set(flags)
        if "sse2" not in have:
            return None
        level = 1
        for n in (2, 3, 4):
            if not all(f in have for f in self.flags_up_to(n)):
                break
            level = n
        return level

    def expand(self, needs: Iterable[str]) -> list[str]:
        """The flags behind each need; ``x86-64-v2`` becomes the flags it adds above v1 (the baseline is assumed)."""
        out: list[str] = []
        for need in needs:
            level = level_of_need(need)
            flags = self.flags_up_to(level) if level else [need]
            if level and level > 1:
                baseline = self.flags_up_to(1)
                flags = [f for f in flags if f not in baseline]
            out.extend(f for f in flags if f not in out)
        return out

    def missing_for(self, needs: Iterable[str], flags: Iterable[str]) -> list[str]:
        """What of ``needs`` a CPU with ``flags`` lacks; a level is named with the flags it misses."""
        have = set(flags)
        missing: list[str] = []
        for need in needs:
            if level_of_need(need):
                lacking = [f for f in self.expand([need]) if f not in have]
                if lacking:
                    missing.append(f"{need} ({', '.join(lacking)})")
            elif need not in have:
                missing.append(need)
        return missing


LEVELS = PsabiLevels("x86_64_levels.json", "x86-64 psABI levels v1-v4 and their /proc/cpuinfo flags; read by the "
                                           "ISA verdict (cpu.isa.x86_64_level) and the ISA-floor table")
