"""The measured roofs a user's job is held against: a saved ``bench roofline``, else a quick one in a child.

In order: the roofline run of a saved report the user names (``cpudoctor run --roof REPORT``, where ``bench
roofline --into REPORT`` put it); the latest roofline run the window keeps for this machine (``lab-runs.json``
beside its settings); else, after the job has ended (so the two do not contend), a quick in-cache measurement:
the roofline job in a child, only the dtypes and the thread count the job used, with the memory roof, a few
seconds, stated as such. A dtype the CPU computes by emulation (int8 without VNNI or AMX-INT8, bf16 without
AVX512_BF16 or AMX-BF16) is not measured: its "roof" would be an emulation's, so it has none and says why.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from cpudoctor.model.achieved import Roofs

KEPT_RUNS = "lab-runs.json"                 # gui/training_runs.RunStore's file, beside the window's settings
MAX_KEPT_BYTES = 4 << 20
QUICK_BUDGET_S = 6.0
EMULATED = {"bf16": "no AVX512_BF16 or AMX-BF16", "int8": "no VNNI or AMX-INT8", "fp16": "no AVX512_FP16 or AMX-FP16"}
QUICK_WORDS = "a quick in-cache measurement in a child after the job ({dtypes} on {threads}, {seconds:.0f} s)"


def kept_runs_file(env: dict[str, str] | None = None) -> Path | None:
    """Where the window keeps its lab runs (Qt's settings folder for organisation "CPU Doctor" on Linux)."""
    env = dict(os.environ if env is None else env)
    if not sys.platform.startswith("linux"):
        return None
    base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME") or "~").expanduser() / ".config")
    return base / "CPU Doctor" / KEPT_RUNS


def _latest_roofline(runs: list[Any]) -> Any | None:
    found = [r for r in runs if getattr(r, "kind", None) == "roofline" and (getattr(r, "metrics", None) or {})
             .get("compute")]
    return max(found, key=lambda r: r.started_at or "", default=None)


def from_report(path: Path) -> Roofs | None:
    """The latest roofline run of a saved report; None when it has none. Raises the report reader's error."""
    from cpudoctor.report_file import load_report

    run = _latest_roofline(load_report(path).benchmarks)
    return Roofs.of_roofline(run.metrics, source="saved", where=str(path), measured_at=run.started_at) \
        if run is not None else None


def from_kept(path: Path | None) -> Roofs | None:
    """The latest roofline run the window kept for this host; None when there is none or the file is unreadable."""
    from cpudoctor.model import BenchRun
    from cpudoctor.model.serde import from_data

    if path is None:
        return None
    try:
        if not path.is_file() or path.stat().st_size > MAX_KEPT_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    runs = []
    host = socket.gethostname() + " | "
    for key, items in ((data.get("runs") or {}) if isinstance(data, dict) else {}).items():
        if not str(key).startswith(host) or not isinstance(items, list):
            continue
        for item in items:
            try:
                runs.append(from_data(BenchRun, item))
            except (TypeError, ValueError):
                continue
    run = _latest_roofline(runs)
    return Roofs.of_roofline(run.metrics, source="saved", where=f"{path} (the window's lab runs)",
                             measured_at=run.started_at) if run is not None else None


def quick(dtypes: list[str], threads: int | None, *, python: str | None = None,
          stop: threading.Event | None = None, budget_s: float = QUICK_BUDGET_S) -> Roofs:
    """The roofline job in a child, small: ``dtypes`` (those this CPU computes natively) at ``threads``."""
    from cpudoctor.lab import session

    context = session.context_for("roofline")
    native = native_support_flags(context.flags)
    wanted = [d for d in dict.fromkeys(dtypes) if d in ("fp32", "fp64") or native.get(d)]
    missing = {d: f"this CPU computes {d} by emulation ({EMULATED[d]})" for d in dtypes
               if d in EMULATED and not native.get(d)}
    if "fp32" not in wanted:
        wanted.insert(0, "fp32")
    t = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    settings = {"dtypes": wanted, "threads": sorted({t, 1}, reverse=True), "seconds_per_point": 0.15, "memory": True,
                "memory_seconds": 0.25, "operators": False, "budget_s": budget_s}
    _outcome, result = session.run("roofline", settings, context=context, python=python, stop=stop)
    run = result.bench_run()
    counts = f"{t} thread{'s' if t != 1 else ''}" + (" and 1" if t > 1 else "")
    words = QUICK_WORDS.format(dtypes=", ".join(wanted), threads=counts, seconds=budget_s)
    roofs = Roofs.of_roofline(run.metrics, source="quick", where=words, measured_at=run.started_at)
    roofs.missing.update(missing)
    return roofs


def native_support_flags(flags: list[str]) -> dict[str, bool]:
    """Which reduced dtypes the CPU with ``flags`` computes natively (the one table of them)."""
    from cpudoctor.knowledge import ISA_FORCING

    return {d: bool(ISA_FORCING.dtype_native(d, flags)) for d in ("bf16", "int8", "fp16")}


def find(dtypes: list[str], threads: int | None, *, flags: list[str] | None = None, report: Path | None = None,
         kept: Path | None = None, measure: bool = True, python: str | None = None,
         stop: threading.Event | None = None, notify=None) -> Roofs:
    """The roofs for a job that computed in ``dtypes`` on ``threads``: a saved report's, the window's kept runs',
    else a quick measurement (``measure``; ``notify(text)`` is told before it starts); ``Roofs()`` (source
    "none") when none could be had."""
    if report is not None:
        found = from_report(report)
        if found is not None:
            return _with_missing(found, dtypes, flags)
    found = from_kept(kept if kept is not None else kept_runs_file())
    if found is not None:
        return _with_missing(found, dtypes, flags)
    if not measure:
        return Roofs()
    if notify is not None:
        notify(f"no saved roofline run: measuring this CPU's roof for about {QUICK_BUDGET_S:.0f} s "
               "(`--roof none` skips it; `cpudoctor bench roofline --into REPORT`, then `--roof REPORT`, "
               "uses a full one)")
    try:
        return quick(dtypes, threads, python=python, stop=stop)
    except Exception as exc:  # noqa: BLE001 - no roof is a note of the run, never its failure
        return Roofs(source="none", where=f"the quick measurement failed: {type(exc).__name__}: {exc}"[:300])


def _with_missing(roofs: Roofs, dtypes: list[str], flags: list[str] | None) -> Roofs:
    """A saved roofline without a dtype the job used: say why (emulated on this CPU, or simply not measured)."""
    native = native_support_flags(flags) if flags else {}
    for d in dtypes:
        if d in roofs.missing or any(r.dtype == d for r in roofs.compute):
            continue
        if d in EMULATED and native.get(d) is False:
            roofs.missing[d] = f"this CPU computes {d} by emulation ({EMULATED[d]})"
        else:
            roofs.missing[d] = "the saved roofline run did not measure it"
    return roofs
