"""The Python environments list (``cpudoctor envs``) in words: a table for people, JSON for tools."""

from __future__ import annotations

import json
import os

from cpudoctor.kits.escape import one_line
from cpudoctor.model import PythonEnv, to_data
from cpudoctor.render.software import _text_table


def render_json(envs: list[PythonEnv]) -> str:
    default = envs[0].python if envs and envs[0].usable else None
    return json.dumps({"default": default, "environments": to_data(envs)}, indent=2) + "\n"


def render_text(envs: list[PythonEnv]) -> str:
    if not envs:
        return "No Python environment found.\n"
    rows = [["", "NAME", "KIND", "PYTHON", "TORCH", "NUMPY", "NOTE", "INTERPRETER"]]
    for i, e in enumerate(envs):
        torch = f"{e.torch} ({e.torch_build})" if e.torch and e.torch_build else (e.torch or "—")
        note = e.error or ("CPU Doctor's own: described only when chosen" if e.own and not (i == 0 and e.usable)
                           else "CPU Doctor's own" if e.own else "active" if e.active else "")
        # one line per row whatever a folder's name holds (a newline in a venv's name made a second, fake row)
        rows.append([one_line(cell) for cell in ("*" if i == 0 and e.usable else "", e.name, e.kind, e.version or "?",
                                                 torch, e.numpy or "—", note, home_short(e.python))])
    lines = ["Python environments; CPU Doctor describes the first (*) unless told otherwise:", ""]
    lines += _text_table(rows)
    lines += ["", "Describe another: cpudoctor doctor --python NAME|PATH   (also report and bench)"]
    return "\n".join(lines) + "\n"


def home_short(path: str) -> str:
    """``/home/ann/miniconda3/bin/python`` as ``~/miniconda3/bin/python``: shorter, and no user name."""
    home = os.path.expanduser("~")
    if home and home != "/" and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


def no_official_build(setup) -> str:
    """What to do where PyTorch publishes no wheel for this OS and CPU architecture (one sentence's end)."""
    arch = setup.arch or "this CPU architecture"
    return (f"PyTorch publishes no official build for {setup.os_name or 'this system'} on {arch}: build it from "
            "source (pytorch.org/get-started) or use conda-forge's pytorch-cpu where it has one, then look again.")


def torch_missing_text(setup) -> tuple[str, str]:
    """The Training page's words when no environment has PyTorch: a headline and what to do.

    ``setup`` is a :class:`cpudoctor.advisor.torch_setup.TorchSetup`; the command itself is
    shown apart, to copy.
    """
    headline = "No Python environment with PyTorch was found on this machine."
    where = "Training, the thread sweep and the benchmarks run in one of your Python environments"
    if not setup.supported:
        return headline, f"{where}, and {no_official_build(setup)}"
    if setup.target is not None:
        into = f"into {setup.target.name} ({home_short(setup.target.python)})"
    else:
        into = f"into a new environment in your home folder, {setup.new_env}"
    note = f" {setup.note}." if setup.note else ""
    return headline, (f"{where}. This installs PyTorch's CPU build for this CPU {into}, then "
                      f"choose Look again.{note}")
