"""The Python environments list (``cpudoctor envs``) in words: a table for people, JSON for tools."""

from __future__ import annotations

import json
import os

from cpudoctor.probes.software.envs import PythonEnv, to_data
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
        note = e.error or ("CPU Doctor's own" if e.own else "active" if e.active else "")
        rows.append(["*" if i == 0 and e.usable else "", e.name, e.kind, e.version or "?", torch,
                     e.numpy or "—", note, home_short(e.python)])
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
