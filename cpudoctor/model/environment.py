"""A Python environment found on this machine: what ``cpudoctor envs`` lists and the window's picker shows.

Plain data, filled by :mod:`cpudoctor.probes.software.envs` from an environment's
files and its interpreter's answer (nothing in it is imported), saved and read
back with :mod:`.serde` like the report (``to_data(env)``,
``from_data(PythonEnv, data)``). The report keeps a smaller record of the one it
describes, :class:`~cpudoctor.model.software.PythonInfo`: :meth:`PythonEnv.record`
is the one way from one to the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.model.software import PythonInfo

KINDS = ("conda", "venv", "pyenv", "system", "pipx")


@dataclass
class PythonEnv:
    """One Python environment, described from its files (nothing in it was imported)."""

    python: str                            # the interpreter to run, absolute
    prefix: str                            # the environment's folder
    kind: str                              # conda | venv | pyenv | system | pipx
    name: str                              # what people call it: conda env name, venv folder, "python3.11"
    version: str | None = None             # Python version, e.g. "3.11.7"
    implementation: str | None = None      # cpython, pypy
    torch: str | None = None               # e.g. "2.13.0+cpu"; None = not installed
    torch_build: str | None = None         # cpu | cuda | rocm | xpu | unknown
    torch_detail: str = ""                 # e.g. "+cu121 (CUDA 12.1)"
    numpy: str | None = None
    active: bool = False                   # $VIRTUAL_ENV / $CONDA_PREFIX
    in_cwd: bool = False                   # a .venv in the working folder
    own: bool = False                      # CPU Doctor's own environment
    found_by: list[str] = field(default_factory=list)
    site_dirs: list[str] = field(default_factory=list)
    error: str | None = None               # why it cannot be used (not a Python, Python 2, hangs...)
    from_files: bool = False               # described from its files alone: its interpreter was not asked

    @property
    def usable(self) -> bool:
        return self.error is None

    def record(self, chosen_by: str | None = None) -> PythonInfo:
        """The report's record of this environment (``software.python``), chosen as ``chosen_by`` says."""
        return PythonInfo(version=self.version, implementation=self.implementation, executable=self.python,
                          env_kind=self.kind, env_name=self.name, prefix=self.prefix, own=self.own, error=self.error,
                          chosen_by=chosen_by)
