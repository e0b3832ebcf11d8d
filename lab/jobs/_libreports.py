"""Which kernels ran, in the libraries' own words: a short census with their verbose reports switched on.

oneDNN and oneMKL print one line per primitive or call when their verbose
mode is on (``torch.backends.mkldnn.verbose``, ``torch.backends.mkl.verbose``:
the same as ``ONEDNN_VERBOSE=profile_exec`` / ``MKL_VERBOSE=1``, switched on
for a few steps only, so the measured steps pay nothing for it). They print
with C's ``printf`` to the process's stdout, which is this job's protocol
channel: :func:`census` points file descriptor 1 at a temporary file for the
census, flushes C's buffers, puts it back, and keeps the lines. Anything else
written meanwhile (a protocol line, a library's message) is passed on.

The lines travel raw to the parent, which parses them with
:mod:`cpudoctor.probes.kernels` (the one parser, shared with ``cpudoctor
run``). Added here: ATen's CPU capability, the variables that cap or force
an instruction set in this job's environment, and where the census could
not run, why. Standard library only, Python 3.8+; torch is handed in.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional

# The variables that cap or force a library's instruction set (cpudoctor.probes.kernels.CAP_VARIABLES;
# a test checks the two lists agree).
CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                 "MKL_CBWR", "OPENBLAS_CORETYPE")
MAX_LINES = 600          # per library: a ResNet-18 step prints ~150 oneDNN lines; the protocol line stays small
MAX_LINE_CHARS = 1000
MAX_BYTES = 4 << 20      # read at most this much of what the census printed


def _libc():
    import ctypes

    try:
        return ctypes.CDLL(None)
    except OSError:           # Windows: no C library handle by None
        return None


def capture_stdout(fn: Callable[[], Any]) -> str:
    """What ``fn()`` printed to file descriptor 1 (C's printf too); the job's own stdout is restored after."""
    libc = _libc()
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            try:
                sys.stdout.flush()
            finally:
                if libc is not None:
                    libc.fflush(None)
                os.dup2(saved, 1)
                os.close(saved)
        tmp.seek(0)
        return tmp.read(MAX_BYTES).decode("utf-8", errors="replace")


class Census:
    """The library reports of one job, gathered over one or more census runs."""

    def __init__(self, torch: Any = None):
        self.torch = torch
        self.onednn: List[str] = []
        self.mkl: List[str] = []
        self.notes: List[str] = []
        self.truncated = False

    def run(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` (a training step, a multiply) once with the verbose reports on and keep their lines."""
        torch = self.torch
        if torch is None or os.name != "posix":
            self._note("the kernel census needs torch on a POSIX system (it reads the libraries' verbose lines "
                       "from the process's stdout)")
            fn()
            return

        def verbose() -> None:
            with _verbose(torch.backends.mkldnn, "oneDNN", self), _verbose(getattr(torch.backends, "mkl", None),
                                                                          "oneMKL", self):
                fn()

        text = capture_stdout(verbose)
        for line in text.splitlines():
            if line.startswith(("onednn_verbose", "dnnl_verbose", "mkldnn_verbose")):  # names of oneDNN over the years
                self._keep(self.onednn, line)
            elif line.startswith("MKL_VERBOSE"):
                self._keep(self.mkl, line)
            elif line.strip():
                sys.stdout.write(line + "\n")        # a protocol line or a library's message: pass it on
        sys.stdout.flush()

    def _keep(self, into: List[str], line: str) -> None:
        if len(into) >= MAX_LINES:
            self.truncated = True
            return
        into.append(line[:MAX_LINE_CHARS])

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def report(self, blas: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
        """The raw reports for the parent: lines, ATen's capability, cap variables, notes."""
        capability = None
        if self.torch is not None:
            try:
                capability = self.torch.backends.cpu.get_cpu_capability()
            except Exception:  # noqa: BLE001 - torch older than 2.0
                capability = None
        out: Dict[str, Any] = {"onednn": self.onednn, "mkl": self.mkl, "aten_capability": capability,
                               "caps": {k: os.environ[k] for k in CAP_VARIABLES if os.environ.get(k)},
                               "notes": list(self.notes)}
        if blas:
            out["blas"] = blas
        if self.truncated:
            out["notes"].append(f"more than {MAX_LINES} verbose lines from one library: the first ones kept")
        return out


class _verbose:
    """``torch.backends.mkldnn.verbose(1)`` / ``torch.backends.mkl.verbose(1)``, or nothing where it is missing."""

    def __init__(self, backend: Any, name: str, census: Census):
        self.backend, self.name, self.census = backend, name, census
        self.ctx = None

    def __enter__(self) -> None:
        make = getattr(self.backend, "verbose", None) if self.backend is not None else None
        if make is None:
            self.census._note(f"this torch cannot switch {self.name}'s verbose report on")
            return
        try:
            self.ctx = make(1)
            self.ctx.__enter__()
        except Exception as exc:  # noqa: BLE001 - a build without the library: say so, measure on
            self.ctx = None
            self.census._note(f"{self.name}'s verbose report is unavailable: {type(exc).__name__}: {exc}")

    def __exit__(self, *exc: Any) -> None:
        if self.ctx is not None:
            self.ctx.__exit__(*exc)
