"""The flag catalogue (``resources/flags.json``): what each /proc/cpuinfo flag means for deep learning.

The one reader of flags.json. The CPU probe asks it for the AVX-512 subset
names and the CPUID bits of the cross-check, the py-cpuinfo fallback for the
other spellings of a flag, render and the Flags page for categories and
meanings. A few kernel names mean different things on x86 and Arm (``sme`` is
AMD's Secure Memory Encryption on x86, Arm's Scalable Matrix Extension on
aarch64): an entry's ``on`` table says what the name means where.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cpudoctor.knowledge.datafile import DataFile
from cpudoctor.model import arch_family

# cpu.isa.avx512_subsets lists the subsets in this order (Foundation first, then as Intel added them).
AVX512_SUBSET_ORDER = ("F", "CD", "BW", "DQ", "VL", "IFMA", "VBMI", "VBMI2", "VNNI", "BF16", "FP16", "BITALG",
                       "VPOPCNTDQ", "VP2INTERSECT", "ER", "PF")
OTHER = "other"          # the category of a flag the catalogue does not describe


class FlagCatalogue(DataFile):
    """flags.json: categories (most relevant to deep learning first), flags, other spellings."""

    @property
    def categories(self) -> dict[str, str]:
        """Category key -> its title, in the file's order."""
        return self.data["categories"]

    @property
    def entries(self) -> dict[str, dict[str, Any]]:
        """Kernel flag name -> its entry (category, meaning, and cpuid / avx512_subset / on when given)."""
        return self.data["flags"]

    @property
    def aliases(self) -> dict[str, str]:
        """Other spellings (py-cpuinfo, CPUID names, older kernels) -> the kernel's flag name."""
        return self.data["aliases"]

    def category_title(self, category: str) -> str:
        return self.categories.get(category, category)

    def variant(self, entry: Mapping[str, Any], arch: str | None, vendor: str | None) -> tuple[str, str] | None:
        """The ``on`` override of an entry for this vendor or architecture family, if it has one."""
        on = entry.get("on") or {}
        for key in (vendor, arch_family(arch)):
            if key and key in on:
                v = on[key]
                return v.get("category", entry.get("category", OTHER)), v.get("meaning", entry.get("meaning", ""))
        return None

    def describe(self, name: str, arch: str | None = None, vendor: str | None = None) -> tuple[str, str]:
        """(category, meaning) of a kernel flag on this architecture and vendor; unknown flags: ("other", "")."""
        entry = self.entries.get(name)
        if entry is None:
            return OTHER, ""
        return self.variant(entry, arch, vendor) or (entry["category"], entry["meaning"])

    def groups(self, flags: list[str], arch: str | None = None, vendor: str | None = None) -> dict[str, list[str]]:
        """Flags grouped by category, in the category order of the catalogue."""
        groups: dict[str, list[str]] = {c: [] for c in self.categories}
        for name in flags:
            groups.setdefault(self.describe(name, arch, vendor)[0], []).append(name)
        return {c: v for c, v in groups.items() if v}

    def canonical(self, name: str) -> str:
        """The kernel's spelling of a flag name (lower case; aliases resolved)."""
        low = name.lower()
        return self.aliases.get(low, low)

    def avx512_subsets(self) -> dict[str, str]:
        """Kernel flag -> AVX-512 subset short name (F, CD, BW, ...), in :data:`AVX512_SUBSET_ORDER`."""
        mapping = {name: e["avx512_subset"] for name, e in self.entries.items() if "avx512_subset" in e}
        return dict(sorted(mapping.items(), key=lambda kv: AVX512_SUBSET_ORDER.index(kv[1])))

    def cpuid_bits(self) -> dict[str, tuple[int, int, str, int]]:
        """Kernel flag -> (leaf, subleaf, register, bit) of CPUID, for the flags the cross-check compares."""
        out = {}
        for name, entry in self.entries.items():
            spec = entry.get("cpuid")
            if spec:
                leaf, sub, reg, bit = spec.split(".")
                out[name] = (int(leaf, 0), int(sub), reg, int(bit))
        return out


FLAGS = FlagCatalogue("flags.json", "CPU flags: category and meaning for deep learning, CPUID bits, AVX-512 "
                                    "subsets, other spellings; read by the CPU probe, render and the Flags page")
