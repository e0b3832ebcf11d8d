"""The child-process entry shared by the lab's orchestrators (the thread sweep, ``bench infer``).

Both run in CPU Doctor's own interpreter as ``python -m cpudoctor.lab.<name> --json-args '{...}' --control
stdin`` (the window's way to start them) and read the same arguments: their settings, the root and topology
to plan on, the CPUs they may use. One function reads them, so the two cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpudoctor.lab.settings import SettingsError
from cpudoctor.model import Topology


def orchestrator_main(argv: list[str] | None, settings_type: Any, run: Callable[..., Any]) -> int:
    """Parse the job's arguments into ``settings_type``, find the topology, and call ``run`` with the job kit's
    progress, result and stop; 2 with one ``settings`` error line when the settings are wrong."""
    from cpudoctor.lab.jobs import _jobkit

    started = time.monotonic() - _jobkit.process_age()          # the budget counts the start-up too
    args, stop = _jobkit.parse_job_argv(argv)
    root = Path(args.pop("root", "/"))
    topo_data = args.pop("topology", None)
    allowed = args.pop("allowed_cpus", None)
    try:
        settings = settings_type.from_dict(args)
    except (SettingsError, TypeError) as exc:
        _jobkit.error(str(exc), kind="settings")
        return 2
    if topo_data is not None:
        from cpudoctor.model.serde import from_data

        topology = from_data(Topology, topo_data)
    else:
        from cpudoctor.probes import probe_topology

        topology = probe_topology(root)
    run(settings, topology, allowed, on_progress=lambda d: _jobkit.progress(**d), stop=stop,
        on_result=lambda r: _jobkit.result(**r), started=started)
    return 0
