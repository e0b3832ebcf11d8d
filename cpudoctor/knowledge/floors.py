"""The ISA-floor table (``resources/isa_floors.json``): which package builds need which instruction sets.

A TensorFlow wheel on a CPU without AVX, NumPy 2.4 on a CPU without SSE4.2, an
old Intel Extension for PyTorch without AVX-512: each dies at import, often
with a bare "Illegal instruction". The table holds each package's floors by
version range, with sources; this module answers what the table says for a
set of CPU flags: the floor of a version (:meth:`FloorTable.applicable_floor`),
the releases that run (:meth:`FloorTable.safe_versions`, ``"<2.4"``), and which
distributions it knows (:meth:`FloorTable.package_of`). The software probe
records these answers; the advisor words fixes and forecasts from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cpudoctor.knowledge.datafile import DataFile
from cpudoctor.knowledge.levels import LEVELS
from cpudoctor.knowledge.versions import lower_bound, normalize, parse_version, upper_bound


@dataclass(frozen=True)
class Floor:
    """One row of a package's ``floors``: versions in ``versions`` need ``needs``."""

    versions: SpecifierSet
    needs: tuple[str, ...]
    failure: str
    confidence: str
    reason: str
    sources: tuple[str, ...] = ()

    @property
    def open_ended(self) -> bool:
        """True when the floor also covers every future release (no upper bound)."""
        return upper_bound(self.versions) is None


@dataclass(frozen=True)
class KnownPackage:
    """A table entry: the package, how to import it, its distributions, its floors and why it has none."""

    name: str
    label: str
    module: str
    distributions: tuple[str, ...]          # each distribution once (PEP 503), the canonical one first
    floors: tuple[Floor, ...] = ()
    without_floor: dict[str, Any] = field(default_factory=dict)
    install_hint: str = ""
    kind: str = ""


def _distinct(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` without later spellings of an earlier one (same PEP 503 name), in order.

    ``intel_extension_for_pytorch`` and ``intel-extension-for-pytorch`` are one
    distribution; listing both once made the package appear twice.
    """
    first: dict[str, str] = {}
    for name in names:
        first.setdefault(normalize(name), name)
    return tuple(first.values())


class FloorTable(DataFile):
    """isa_floors.json, as :class:`KnownPackage` entries keyed by the table's package name."""

    @cached_property
    def packages(self) -> dict[str, KnownPackage]:
        out: dict[str, KnownPackage] = {}
        for entry in self.data["packages"]:
            floors = tuple(
                Floor(SpecifierSet(f["versions"]), tuple(f["needs"]), f["failure"], f["confidence"], f["reason"],
                      tuple(f["sources"]))
                for f in entry["floors"]
            )
            out[entry["name"]] = KnownPackage(entry["name"], entry["label"], entry["module"],
                                              _distinct(entry["distributions"]), floors,
                                              dict(entry.get("without_floor") or {}), entry.get("install_hint", ""),
                                              entry["kind"])
        return out

    @cached_property
    def _by_distribution(self) -> dict[str, KnownPackage]:
        return {normalize(d): p for p in reversed(list(self.packages.values())) for d in p.distributions}

    def package_of(self, dist_name: str) -> KnownPackage | None:
        """The known package a distribution belongs to (``onnxruntime-gpu`` -> onnxruntime)."""
        return self._by_distribution.get(normalize(dist_name))

    def floors_for(self, package: str) -> list[Floor]:
        entry = self.packages.get(package)
        return list(entry.floors) if entry else []

    def applicable_floor(self, package: str, version: str | None) -> Floor | None:
        """The floor of ``package`` at ``version``; for an unknown version, the floor of current releases."""
        v = parse_version(version)
        for floor in self.floors_for(package):
            if v is None:
                if floor.open_ended:
                    return floor
            elif floor.versions.contains(v, prereleases=True):
                return floor
        return None

    def missing_at(self, package: str, version: str | None, flags: set[str]) -> list[str]:
        """What the floor of ``package`` at ``version`` needs that a CPU with ``flags`` lacks ([]: met, or no floor)."""
        floor = self.applicable_floor(package, version)
        if floor is None or not floor.needs or not flags:
            return []
        return LEVELS.missing_for(floor.needs, flags)

    def safe_versions(self, package: str, flags: set[str]) -> str | None:
        """The releases of ``package`` a CPU with ``flags`` runs, as a specifier ("<2.4", "<1.6,!=1.5.1").

        None: current releases run here (no open-ended floor is missed). "": no
        release in the table's knowledge runs here. Floors below the boundary that
        are a single version are excluded with ``!=``; a range that reaches the
        boundary moves it down to the range's start.
        """
        unmet = [f for f in self.floors_for(package) if f.needs and LEVELS.missing_for(f.needs, flags)]
        newest = [f for f in unmet if f.open_ended]
        if not newest:
            return None
        starts = [lower_bound(f.versions) for f in newest]
        if any(s is None for s in starts):
            return ""
        boundary: Version = min(s for s in starts if s is not None)
        excluded: list[Version] = []
        changed = True
        while changed:
            changed = False
            for f in unmet:
                if f in newest:
                    continue
                lo, hi = lower_bound(f.versions), upper_bound(f.versions)
                if lo is not None and lo == hi:             # one release ("==1.5.1")
                    if lo < boundary and lo not in excluded:
                        excluded.append(lo)
                    continue
                if lo is None:                              # "<1.10": every old release is bad too
                    return ""
                if lo < boundary:                           # a range at or below the boundary
                    boundary, changed = lo, True
        clauses = [f"<{boundary}"] + [f"!={v}" for v in sorted(excluded) if v < boundary]
        return ",".join(clauses)

    def requirement(self, package: str, safe: str) -> str:
        """The requirement that admits only ``safe`` releases of ``package``'s distribution: ``numpy<2.4``."""
        entry = self.packages.get(package)
        return f"{entry.distributions[0] if entry and entry.distributions else package}{safe}"

    def known_distributions(self) -> set[str]:
        """Every distribution name the table knows, PEP 503-normalised."""
        return set(self._by_distribution)

    def compiled_without_floor(self, compiled: Iterable[str]) -> list[str]:
        """Of the installed distributions with compiled code, those the table has no entry for (sorted)."""
        known = self.known_distributions()
        return sorted({n for n in compiled if normalize(n) not in known}, key=str.lower)


FLOORS = FloorTable("isa_floors.json", "the instruction sets package builds need, by version range, with sources; "
                                       "read by the software probe (risks) and the advisor (fixes, forecasts)")
