"""Knowledge as data: codenames, flag meanings, FLOP/cycle, package ISA floors, icons.

Read through :func:`path` / :func:`read_text` so it works from a wheel, an
editable install, a zip or the frozen app. The data files (``NAME.json``, each
with ``NAME.schema.json``) have one reader, :mod:`cpudoctor.knowledge`;
:func:`load_json` is left for ``report.schema.json`` and
``lab_metrics.schema.json``, which :mod:`cpudoctor.report_file` reads.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources as _res
from typing import Any


def path(name: str):
    """A Traversable for a resource file; raises FileNotFoundError listing what exists."""
    ref = _res.files(__name__).joinpath(name)
    if not ref.is_file():
        known = sorted(p.name for p in _res.files(__name__).iterdir() if p.is_file() and not p.name.endswith(".py"))
        raise FileNotFoundError(f"no resource {name!r}; known: {', '.join(known)}")
    return ref


def read_text(name: str) -> str:
    return path(name).read_text(encoding="utf-8")


def read_bytes(name: str) -> bytes:
    return path(name).read_bytes()


@lru_cache(maxsize=None)
def load_json(name: str) -> Any:
    """Parsed JSON resource (cached: resources never change while running)."""
    return json.loads(read_text(name))
