"""The kernels a job ran, as its libraries reported them: plain data, whichever way the job was watched.

``cpudoctor run`` reads them from the job's oneDNN verbose lines, a lab job
from its short census (oneDNN and oneMKL verbose lines, ATen's capability,
OpenBLAS's core); :mod:`cpudoctor.probes.kernels` parses both into
:class:`Kernel` records, and a :class:`KernelCensus` carries them with what
the job's environment set that could have capped them. The kernel rules
(EVID007, EVID008) judge a census against a CPU's flags, so a lab run saved in
a report and a user's job read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Kernel:
    """One kind of kernel a library ran: ``share`` is its part of that primitive's measured time."""

    library: str                  # oneDNN | oneMKL | ATen | OpenBLAS
    primitive: str                # convolution, matmul, SGEMM, "vectorised operators", gemm
    isa: str | None               # the library's own name: avx512_core, avx2, AVX512, SkylakeX; None = not named
    share: float | None = None    # 0..1 of this primitive's time in this library; None = not timed
    impl: str = ""                # oneDNN's implementation (brg_conv_fwd:avx512_core), MKL's call
    dtype: str | None = None      # fp32 | bf16 | fp16 | int8 | ... of its source data
    calls: int = 0
    ms: float | None = None       # summed time of the calls, when the library timed them

    def to_dict(self) -> dict[str, Any]:
        """The four fields every surface shows, then the details a library gave (implementation, dtype, time)."""
        out: dict[str, Any] = {"library": self.library, "primitive": self.primitive, "isa": self.isa,
                               "share": self.share}
        extra = {"impl": self.impl, "dtype": self.dtype, "calls": self.calls, "ms": self.ms}
        return {**out, **{k: v for k, v in extra.items() if v not in (None, "", 0)}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Kernel":
        return cls(str(data.get("library") or "?"), str(data.get("primitive") or "?"), data.get("isa"),
                   data.get("share"), str(data.get("impl") or ""), data.get("dtype"), int(data.get("calls") or 0),
                   data.get("ms"))


@dataclass
class KernelCensus:
    """The kernels one job ran and what could have capped them: what the kernel rules judge."""

    kernels: list[Kernel] = field(default_factory=list)
    caps: dict[str, str] = field(default_factory=dict)   # cap/force variables set in the job's environment
    onednn_isa: str | None = None       # oneDNN's own "isa:" line: the most it will use, caps applied
    lab_job: str | None = None          # the lab job's kind (train, gemm, ...); None: the user's own job

    @classmethod
    def of_lab_run(cls, run: Any) -> "KernelCensus | None":
        """The census a lab run recorded (``BenchRun.metrics``: ``kernels`` and ``kernel_check``); None without one."""
        metrics = getattr(run, "metrics", None) or {}
        found = [Kernel.from_dict(k) for k in metrics.get("kernels") or [] if isinstance(k, Mapping)]
        if not found:
            return None
        recorded = metrics.get("kernel_check") if isinstance(metrics.get("kernel_check"), Mapping) else {}
        caps = recorded.get("caps_set") if isinstance(recorded.get("caps_set"), Mapping) else {}
        detected = recorded.get("onednn_isa")
        return cls(found, {str(k): str(v) for k, v in caps.items()}, detected if isinstance(detected, str) else None,
                   str(getattr(run, "kind", "") or "lab"))
