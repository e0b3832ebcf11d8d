"""One probe facade over the operating systems a report can describe.

CPU Doctor describes Linux machines from /proc and /sys, Windows machines from
``GetLogicalProcessorInformationEx`` and a few system calls, macOS machines
from ``sysctl``, and each of them either live or from a capture (a folder
made by ``cpudoctor capture``). Like psutil's ``_pslinux`` / ``_pswindows`` /
``_psosx``, the code for each lives in one private module with the same three
entry points:

=====================  ==============================================================
``topology(where)``    packages, cores, caches, NUMA nodes, processor groups, affinity
``cpu(where)``         identity, flags and ISA verdicts
``os_facts(where)``    OS, memory, power policy (governor / power plan) and notes
=====================  ==============================================================

:func:`platform_of` chooses the module once per call, from what the root is
(never at import time, so tests can probe a Windows capture on Linux):

* a captured tree with ``windows/`` is a Windows machine, with ``macos/`` a Mac,
  anything else a Linux tree (even an empty one: it says what is missing);
* the live machine is what ``sys.platform`` says; an OS with none of the three
  gets counts from psutil (``_other``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from cpudoctor.kits.rooted import is_live_root

if TYPE_CHECKING:
    from cpudoctor.model import CpuInfo
    from cpudoctor.model.topology import Topology
    from cpudoctor.model import OsInfo

PLATFORMS = ("linux", "windows", "macos", "other")
# What marks a capture of each OS (docs/capture.md).
WINDOWS_DIR = "windows"
MACOS_DIR = "macos"


@dataclass(frozen=True)
class Where:
    """What the probes describe: ``platform`` under ``root``, live (this machine) or captured."""

    platform: str                           # linux | windows | macos | other
    root: Path
    live: bool


def platform_of(root: Path | str = Path("/"), live: bool | None = None) -> Where:
    """Which OS ``root`` describes (see the module docstring); ``live`` defaults to "root is /"."""
    from cpudoctor.kits.rooted import under

    root = Path(root)
    if live is None:
        live = is_live_root(root)
    if live:
        return Where(_running(), root, True)
    if under(root, WINDOWS_DIR).is_dir():
        return Where("windows", root, False)
    if under(root, MACOS_DIR).is_dir():
        return Where("macos", root, False)
    return Where("linux", root, False)


def _running() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "win32":
        return "windows"
    if sys.platform == "darwin":
        return "macos"
    return "other"


def _module(where: Where):
    return importlib.import_module(f"cpudoctor.probes.platforms._{where.platform}")


def probe_topology(root: Path | str = Path("/"), live: bool | None = None) -> "Topology":
    """The CPU topology of the machine under ``root`` (live: this machine)."""
    where = platform_of(root, live)
    return _module(where).topology(where)


def probe_cpu(root: Path | str = Path("/")) -> "CpuInfo":
    """Identity, flags and ISA verdicts of the CPU under ``root``; never raises."""
    where = platform_of(root)
    return _module(where).cpu(where)


def probe_os(root: Path | str = Path("/"), environ: Mapping[str, str] | None = None) -> "tuple[OsInfo, list[str]]":
    """OS facts under ``root`` and notes on what could not be known.

    ``environ`` is the live environment, given only for the live machine.
    """
    where = platform_of(root)
    return _module(where).os_facts(where, environ)



def capture_files(platform: str) -> tuple[dict[str, bytes], list[str]]:
    """The files a capture of this (live) Windows PC or Mac holds: ({path under the capture: bytes}, notes).

    Linux captures are packed from /proc and /sys by :mod:`cpudoctor.capture` itself.
    """
    if platform not in ("windows", "macos"):
        raise ValueError(f"no native capture for {platform!r}")
    return importlib.import_module(f"cpudoctor.probes.platforms._{platform}").capture_files()
