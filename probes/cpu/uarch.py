"""Decode a CPU's micro-architecture from its identity, using resources/microarchitectures.json.

Family/model (x86) or implementer/part (ARM) is the primary key: a hypervisor
can hide flags (a KVM guest of a Zen+ that lost ``fma``, a Haswell with AES
disabled in the BIOS), but it rarely lies about the model. Flags are only a
cross-check, and a mismatch becomes a note, never a different answer. This is
the opposite of archspec, which picks the best *compatible* target from flags
and therefore calls a Lakefield "westmere".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cpudoctor.knowledge import MICROARCHITECTURES


# CPUID brand strings are 48 characters; ARM "Hardware"/"model name" lines are short too.
# Anything far longer is a damaged or hostile file (a 1 MB name made a window take minutes).
BRAND_MAX = 200


def clean_brand(text: str | None) -> str | None:
    """A brand string as it may be shown: printable, spaces folded, at most :data:`BRAND_MAX` characters."""
    if not text:
        return None
    text = "".join(ch for ch in text if ch.isprintable() or ch.isspace())   # no escape sequences
    brand = " ".join(text.replace("\ufffd", "").split())
    if len(brand) > BRAND_MAX:
        brand = brand[: BRAND_MAX - 1] + "…"
    return brand or None


@dataclass
class UarchMatch:
    """The decode of one identity; None fields are unknown."""

    uarch: str | None = None               # archspec-style name: zen4, haswell, neoverse_v2
    display: str | None = None             # human name: "Zen 4", "Neoverse V2"
    codename: str | None = None            # Genoa, Raphael, Sapphire Rapids
    product_line: str | None = None        # EPYC, Ryzen desktop, Xeon, ...
    datapath_bits: int | None = None       # widest native SIMD execution width
    datapath_note: str = ""
    sve_bits: int | None = None            # SVE vector length when known from the part
    expected_flags: list[str] = field(default_factory=list)
    reason: str = ""                       # the table row's source
    notes: list[str] = field(default_factory=list)


def _table() -> dict[str, Any]:
    return MICROARCHITECTURES.data


def vendor_short(vendor_id: str | None) -> str | None:
    """``AuthenticAMD`` -> ``AMD``; an ARM implementer code -> its company; else None."""
    if not vendor_id:
        return None
    table = _table()
    entry = table["vendors"].get(vendor_id) or table["vendors"].get(vendor_id.strip())
    if entry:
        return entry["short"]
    impl = _norm_hex(vendor_id)
    if impl is not None:
        return table["arm_implementers"].get(impl)
    return None


def product_line(vendor: str | None, brand: str | None) -> str | None:
    """The product line named by the brand string (first matching pattern)."""
    if not brand or not vendor:
        return None
    for row in _table()["product_lines"]:
        if row["vendor"] == vendor and re.search(row["pattern"], brand):
            return row["line"]
    return None


def _parse_ranges(specs: list[str]) -> list[tuple[int, int]]:
    ranges = []
    for spec in specs:
        lo, _, hi = spec.partition("-")
        ranges.append((int(lo, 0), int(hi or lo, 0)))
    return ranges


def _span(ranges: list[tuple[int, int]]) -> int:
    return sum(hi - lo + 1 for lo, hi in ranges)


def _in(value: int, ranges: list[tuple[int, int]]) -> bool:
    return any(lo <= value <= hi for lo, hi in ranges)


def decode_x86(vendor: str | None, family: int | None, model: int | None, stepping: int | None,
               brand: str | None) -> UarchMatch:
    """Micro-architecture of an x86 CPU from vendor + family + model (+ stepping).

    Rows that name a stepping beat rows that do not; among the rest the row
    covering the fewest models wins, so a specific "model 0x31 = Rome" row
    overrides the "models 0x30-0x3f are Zen 2" catch-all.
    """
    match = UarchMatch(product_line=product_line(vendor, brand))
    if vendor is None or family is None or model is None:
        match.notes.append("micro-architecture unknown: vendor, family or model missing from cpuinfo")
        return match
    best: tuple[int, int, dict] | None = None
    for row in _table()["x86"]:
        if row["vendor"] != vendor or row["family"] != family:
            continue
        ranges = _parse_ranges(row["models"])
        if not _in(model, ranges):
            continue
        has_step = "steppings" in row
        if has_step:
            if stepping is None or not _in(stepping, _parse_ranges([row["steppings"]])):
                continue
        key = (0 if has_step else 1, _span(ranges))
        if best is None or key < best[:2]:
            best = (key[0], key[1], row)
    if best is None:
        match.notes.append(
            f"micro-architecture unknown: {vendor} family {family} (0x{family:x}) model {model} (0x{model:x}) "
            "is not in CPU Doctor's table yet"
        )
        return match
    row = best[2]
    _fill(match, row)
    by_line = row.get("codename_by_line")
    if by_line:
        line = match.product_line
        if line is None and len(row.get("product_lines", [])) == 1:
            line = row["product_lines"][0]
        match.codename = by_line.get(line) if line else None
        if match.codename is None:
            match.codename = " / ".join(dict.fromkeys(by_line.values()))
    else:
        match.codename = row.get("codename")
    if match.product_line is None and len(row.get("product_lines", [])) == 1:
        match.product_line = row["product_lines"][0]
    return match


def decode_arm(implementer: str | None, parts: list[str]) -> UarchMatch:
    """Micro-architecture of an ARM CPU from its implementer and part numbers.

    Hybrid chips (GB10: Cortex-X925 + Cortex-A725) list several parts; the
    highest performance class names the chip, the others go into the codename.
    """
    match = UarchMatch()
    impl = _norm_hex(implementer)
    if impl is None or not parts:
        match.notes.append("micro-architecture unknown: no CPU implementer/part in cpuinfo")
        return match
    rows = []
    unknown = []
    for part in parts:
        p = _norm_hex(part, width=3)
        row = next((r for r in _table()["arm"] if r["implementer"] == impl and p in r["parts"]), None)
        if row is None:
            unknown.append(part)
        elif row not in rows:
            rows.append(row)
    if not rows:
        company = _table()["arm_implementers"].get(impl, impl)
        match.notes.append(f"micro-architecture unknown: {company} part {', '.join(unknown)} is not in CPU Doctor's table yet")
        return match
    rows.sort(key=lambda r: -r["perf_class"])
    _fill(match, rows[0])
    match.display = rows[0]["name"]
    if len(rows) > 1:
        match.codename = " + ".join(r["name"] for r in rows)
    else:
        match.codename = rows[0].get("codename")
    match.sve_bits = rows[0].get("sve_bits")
    if unknown:
        match.notes.append(f"unknown ARM part(s) {', '.join(unknown)} ignored")
    return match


def decode_brand(brand: str | None) -> UarchMatch:
    """Last resort for platforms without family/model (macOS on Apple silicon)."""
    match = UarchMatch()
    if not brand:
        return match
    for row in _table()["brand_uarch"]:
        if re.search(row["pattern"], brand):
            _fill(match, {"uarch": row["uarch"], "reason": row["reason"]})
            return match
    return match


def uarch_info(name: str | None) -> dict[str, Any] | None:
    """The per-micro-architecture traits (display name, expected flags, datapath)."""
    if not name:
        return None
    return _table()["uarchs"].get(name)


def _fill(match: UarchMatch, row: dict[str, Any]) -> None:
    match.uarch = row.get("uarch")
    match.reason = row.get("reason", "")
    traits = uarch_info(match.uarch) or {}
    match.display = traits.get("name")
    match.expected_flags = list(traits.get("expected_flags", []))
    match.datapath_bits = row.get("datapath_bits", traits.get("datapath_bits"))
    match.datapath_note = row.get("datapath_note") or traits.get("datapath_note", "")


def _norm_hex(text: str | None, width: int = 2) -> str | None:
    """``0x41`` / ``0X041`` / ``65`` -> ``0x41`` (lowercase, zero-padded to ``width``)."""
    if text is None:
        return None
    text = text.strip()
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        return None
    return f"0x{value:0{width}x}"
