"""Where CPU Doctor keeps what it may forget: one folder for every cache (children's answers, compiled schemas)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """$CPUDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/cpudoctor, else ~/.cache/cpudoctor (None without a home)."""
    environ = os.environ if environ is None else environ
    if environ.get("CPUDOCTOR_CACHE_DIR"):
        return Path(environ["CPUDOCTOR_CACHE_DIR"])
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "cpudoctor"
    try:
        return Path.home() / ".cache" / "cpudoctor"
    except RuntimeError:  # no home directory (some containers)
        return None
