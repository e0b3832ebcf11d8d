"""Instruction sets by library (``resources/isa_forcing.json``): the one table of vector widths.

Each library names its instruction sets its own way (oneDNN ``avx512_core_bf16``,
ATen ``AVX512``, oneMKL ``avx2``, OpenBLAS ``SkylakeX``); the variable that caps
or forces each library lists those names with the flags they need and the
vector width of the kernels they select. Every question of the form "how wide
is this kernel", "how wide may this library go on a CPU with these flags",
"does this kernel or CPU compute bf16 natively" is answered here, so the
parser of oneDNN's lines, the kernel census and the rules that judge it
compare in one currency (``tests/test_architecture.py`` keeps a second table
out of the code).

Widths: 0 reference C++ code, 1 SSE, 2 AVX, 3 AVX2, 4 AVX-512.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

from cpudoctor.knowledge.datafile import DataFile

REFERENCE = 0          # a library's portable C++ code: no vector kernels
ONEDNN_VARIABLE = "DNNL_MAX_CPU_ISA"


class IsaTable(DataFile):
    """isa_forcing.json: cap and force variables, the widths of their values, and the dtypes' own instructions."""

    def variable(self, name: str) -> dict[str, Any] | None:
        """The entry of a cap/force variable, ``same_as`` followed; None when the table does not know it."""
        entry = self.data["variables"].get(name)
        if entry is not None and "same_as" in entry:
            entry = self.data["variables"].get(entry["same_as"])
        return entry

    def _values(self, variable: str) -> list[dict[str, Any]]:
        entry = self.variable(variable)
        return entry["values"] if entry is not None else []

    def width_of(self, variable: str, name: str | None) -> int | None:
        """The vector width of the instruction set ``name`` in the words of ``variable``'s library
        (``avx512_core_amx`` -> 4); ``ref`` is 0, any SSE-family name 1; None when not named or unknown."""
        if not name:
            return None
        name = name.lower()
        if name == "ref":
            return REFERENCE
        if name.startswith(("sse", "ssse")):
            return 1
        return next((v["width"] for v in self._values(variable) if name in v["names"] and "width" in v), None)

    def cpu_width(self, variable: str, flags: Iterable[str]) -> int | None:
        """The widest kernels ``variable``'s library has that a CPU with ``flags`` runs; None when the flags are
        unknown (empty) or meet none."""
        have = set(flags)
        if not have:
            return None
        fitting = [v["width"] for v in self._values(variable) if "width" in v and set(v["needs"]) <= have]
        return max(fitting) if fitting else None

    def names(self, variable: str) -> tuple[str, ...]:
        """Every instruction-set name of ``variable``'s library that selects kernels, narrowest first."""
        ordered = sorted((v for v in self._values(variable) if "width" in v), key=lambda v: (v["width"], v["rank"]))
        return tuple(n for v in ordered for n in v["names"])

    @cached_property
    def onednn_names(self) -> tuple[str, ...]:
        """oneDNN's instruction-set names (what its implementation names end with), narrowest first."""
        return self.names(ONEDNN_VARIABLE)

    def width_name(self, width: int | None) -> str:
        """``4`` -> ``AVX-512``; ``unknown`` for None."""
        names = self.data["widths"]["names"]
        return names[width] if width is not None and 0 <= width < len(names) else "unknown"

    def reported_width(self, text: str | None) -> int | None:
        """The width of oneDNN's own words for the most it will use (``Intel AVX-512 with Intel DL Boost``)."""
        if not text:
            return None
        return next((w["width"] for w in self.data["widths"]["reported"]["words"] if w["words"] in text), None)

    def dot_products(self, variable: str, name: str | None) -> tuple[str, ...]:
        """The dtypes the kernels of instruction set ``name`` compute with instructions of their own
        (``avx512_core_bf16`` -> int8, bf16); empty for fp32-only sets and unknown names."""
        if not name:
            return ()
        name = name.lower()
        return next((tuple(v.get("dot_products", ())) for v in self._values(variable) if name in v["names"]), ())

    def dtype_native(self, dtype: str | None, flags: Iterable[str]) -> bool | None:
        """Whether a CPU with ``flags`` computes ``dtype`` (bf16, fp16, int8) natively; None for another dtype or
        unknown flags."""
        have = set(flags)
        wanted = self.data["dot_products"]["dtypes"].get(dtype or "")
        if not have or wanted is None:
            return None
        return bool(have & set(wanted))

    def dtype_flags(self, dtype: str) -> tuple[str, ...]:
        """The flags any one of which computes ``dtype`` natively (for a finding's words)."""
        return tuple(self.data["dot_products"]["dtypes"].get(dtype, ()))


ISA_FORCING = IsaTable(
    "isa_forcing.json", "environment variables that force or cap a library's instruction set, their values, the "
    "flags each needs and the vector width each selects, and the flags that compute each reduced-precision dtype; "
    "read by advisor/rules/crashes.py, probes/kernels.py and probes/process/onednn_verbose.py")
