"""What the job sets in its own code, and the fix that names the line (not an environment variable it overrides).

A call in the script wins over anything set outside it: ``torch.set_num_threads(8)``
sets PyTorch's pool whatever ``OMP_NUM_THREADS`` says, and an ``os.environ``
write of ``OMP_PROC_BIND`` before ``import torch`` is what libgomp reads. A fix
printed as ``OMP_NUM_THREADS=2 python train.py`` then does nothing. The job's
probe (:class:`~cpudoctor.model.jobstate.JobState`) records each such call with
its file and line; this module finds the one that decides a setting and writes
the fix as the change to that line. Every job rule that advises a thread count or
a binding asks here first (EVID001, EVID004, EVID013, EVID014, PROC001, PROC009).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cpudoctor.model.jobstate import BINDING_VARS, THREAD_VARS, CodeLine, JobState, SettingCall


@dataclass(frozen=True)
class CodeSetting:
    """A setting the job made itself, and where."""

    call: SettingCall
    at: CodeLine

    @property
    def by_library(self) -> str | None:
        """The package whose code made the call (lightning, transformers), None when the user's code made it, itself
        or through torch's or the standard library's helpers (``with torch.autograd.detect_anomaly():``)."""
        return self.at.library if self.at.library not in (None, "python", "torch") else None

    def place(self) -> str:
        """``line 12 of ~/proj/train.py`` (the user's line; for a library's call, the user's line that led there)."""
        user = self.at.user_place()
        file, line = user if user else (self.at.file, self.at.line)
        return f"line {line} of {file}"

    def short_place(self) -> str:
        """``train.py:12``."""
        user = self.at.user_place()
        file, line = user if user else (self.at.file, self.at.line)
        return f"{os.path.basename(file)}:{line}"

    def statement(self) -> str:
        """What the line does, as code: ``torch.set_num_threads(8)``, ``os.environ["OMP_PROC_BIND"] = "true"``."""
        c = self.call
        if c.name == "torch.set_anomaly_enabled":         # reached through torch.autograd's two helpers
            on = (c.value or "").split(",")[0].strip()
            return ("with torch.autograd.detect_anomaly():" if self.at.function == "__enter__"
                    else f"torch.autograd.set_detect_anomaly({on})")
        if c.name == "torch.backends.mkldnn.enabled":
            return f"torch.backends.mkldnn.enabled = {c.value}"
        if c.name == "os.environ":
            return f'os.environ["{c.key}"] = "{c.value}"' if c.value is not None else f'del os.environ["{c.key}"]'
        if c.name == "os.sched_setaffinity":
            return f"os.sched_setaffinity({c.key}, {{{c.value}}})"
        return f"{c.name}({c.value or ''})"

    def where_words(self) -> str:
        """``torch.set_num_threads(8) at line 12 of train.py`` (``..., set by lightning from line 40 of train.py``)."""
        library = self.by_library
        if library:
            return (f"{self.statement()}, called by {library} ({os.path.basename(self.at.file)}:{self.at.line})"
                    + (f" from {self.place()}" if self.at.user_place() else ""))
        return f"{self.statement()} at {self.place()}"


def setting_of(call: SettingCall | None) -> CodeSetting | None:
    """The call as a :class:`CodeSetting`, when the probe saw the line that made it."""
    return CodeSetting(call, call.at) if call is not None and call.at is not None else None


def thread_setting(state: JobState | None) -> CodeSetting | None:
    """The code that decided the job's intra-op thread count: its last ``torch.set_num_threads`` call, else an
    ``os.environ`` write of a thread variable made before ``import torch`` (libgomp and PyTorch read them then)."""
    if state is None or not state.loaded:
        return None
    call = state.last_call("torch.set_num_threads")
    if call is not None:
        return setting_of(call)
    writes = [c for c in state.env_writes(*THREAD_VARS) if not c.after_torch and c.value is not None]
    return setting_of(writes[-1]) if writes else None


def binding_settings(state: JobState | None) -> list[CodeSetting]:
    """The job's own binding: ``os.environ`` writes of OpenMP binding variables made before ``import torch`` (and
    not removed again), and ``os.sched_setaffinity`` calls on itself."""
    if state is None or not state.loaded:
        return []
    last: dict[str, SettingCall] = {}
    for c in state.env_writes(*BINDING_VARS):
        if not c.after_torch:
            last[c.key or ""] = c
    found = [setting_of(c) for c in last.values() if c.value is not None]
    found += [setting_of(c) for c in state.calls_to("os.sched_setaffinity") if c.key in ("0", str(state.pid))]
    return [s for s in found if s is not None]


def seen_threads(state: JobState | None) -> int | None:
    """The intra-op thread count the probe read on the driving thread (the last sample while the job ran)."""
    sample = state.latest() if state is not None and state.loaded else None
    return sample.threads if sample is not None else None


def thread_change(setting: CodeSetting, threads: int) -> tuple[str, str]:
    """(the fix in words, the snippet in Python) that sets ``threads`` at the line that sets them now."""
    if setting.call.name == "os.environ":
        line = f'os.environ["{setting.call.key}"] = "{threads}"'
    else:
        line = f"torch.set_num_threads({threads})"
    library = setting.by_library
    if library:
        fix = (f"{library} sets the thread count ({setting.where_words()}), which wins over OMP_NUM_THREADS: give "
               f"{library} {threads} threads where it takes them, or call torch.set_num_threads({threads}) after "
               f"{setting.place()}.")
        snippet = f"# after {setting.place()}:\ntorch.set_num_threads({threads})"
    else:
        fix = (f"Change {setting.place()}, which sets the thread count itself ({setting.statement()}) and so wins "
               f"over OMP_NUM_THREADS: set {threads} there.")
        snippet = f"# {setting.place()}:\n{line}"
    return fix, snippet


def binding_removal(settings: list[CodeSetting]) -> tuple[str, str]:
    """(the fix in words, the snippet) that removes the job's own binding lines."""
    places = "; ".join(s.where_words() for s in settings)
    fix = (f"Delete the binding the script sets itself ({places}): an `env -u` outside cannot undo a variable the "
           "script writes; choose the job's CPUs outside it with taskset or numactl instead.")
    snippet = "\n".join(f"# {s.place()}: delete\n# {s.statement()}" for s in settings)
    return fix, snippet
