"""Version maths for the version-ranged tables (ISA floors, known problems): PEP 440 and PEP 503 with :mod:`packaging`.

Version ranges are specifier sets read by :mod:`packaging` (pip vendors it),
never parsed by hand. A release's pre-release and local labels are dropped
before comparing: ``2.4.0rc1+cpu`` is judged as 2.4.0, the release it leads to.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def parse_version(text: str | None) -> Version | None:
    """A comparable version (pre-release and local labels dropped: 2.4.0rc1+cpu -> 2.4.0), or None."""
    if not text:
        return None
    try:
        return Version(Version(text.strip()).base_version)
    except InvalidVersion:
        return None


def lower_bound(spec: SpecifierSet) -> Version | None:
    """The smallest version ``spec`` admits, from its >=, > and == clauses (None: unbounded)."""
    bounds = [Version(s.version) for s in spec if s.operator in (">=", ">", "==", "===") and "*" not in s.version]
    return max(bounds) if bounds else None


def upper_bound(spec: SpecifierSet) -> Version | None:
    """The version ``spec`` stays below or at, from its <, <= and == clauses (None: open-ended)."""
    bounds = [Version(s.version) for s in spec if s.operator in ("<", "<=", "==", "===") and "*" not in s.version]
    return min(bounds) if bounds else None


def in_range(version: str | None, spec: str | None) -> bool | None:
    """Whether ``version`` is in the specifier set ``spec`` (no spec: True; an unreadable version: None)."""
    if not spec:
        return True
    v = parse_version(version)
    return None if v is None else SpecifierSet(spec).contains(v, prereleases=True)


def normalize(name: str) -> str:
    """PEP 503 name normalisation: ``Intel_Extension.For-PyTorch`` -> ``intel-extension-for-pytorch``."""
    return re.sub(r"[-_.]+", "-", name).lower()
