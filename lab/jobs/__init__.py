"""The lab's child jobs: standalone scripts run by path in the Python environment under test.

Each job (``train.py``, ``gemm.py``, ``quant.py``, ``roofline.py``) runs as
``python -I lab/jobs/train.py --json-args '{...}' --control stdin`` in an
interpreter that may have torch but has never seen CPU Doctor. So every file
here imports only the standard library, its siblings in this folder and
torch/numpy, never ``cpudoctor``, and its syntax works on Python 3.8 to 3.14.
They speak the JSON-lines protocol through :mod:`._jobkit`; the parent side
(:mod:`cpudoctor.lab.runner`, :mod:`cpudoctor.lab.protocol`,
:mod:`cpudoctor.lab.results`) starts them and reads what they say.

The app process imports this package only to find the scripts' paths and to
share the protocol's constants and the settings' schema, both standard library.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
JOBS = ("train", "gemm", "quant", "roofline", "infer", "fit")


def script_path(name: str) -> Path:
    """The file of child job ``name`` (``train``, ``gemm``, ``quant``)."""
    path = FOLDER / f"{name}.py"
    if name not in JOBS or not path.is_file():
        raise FileNotFoundError(f"no lab job {name!r} in {FOLDER}; known: {', '.join(JOBS)}")
    return path
