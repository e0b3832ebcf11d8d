"""Live per-CPU load, clocks, temperatures and memory: one non-blocking sample at a time.

CONTRACT: the Sample type is shared by the monitor, the topology map and the
inspector. The sampler implementation is owned by the monitor (issue 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sample:
    t: float                                   # time.monotonic() when taken
    cpu_ids: list[int]                         # logical CPU number of each entry below (online CPUs)
    cpu_percent: list[float]                   # 0-100 per logical CPU since the previous sample
    freq_mhz: list[float] | None = None        # per logical CPU; None when unavailable (VM, container)
    temps_c: dict[str, float] = field(default_factory=dict)  # "k10temp Tctl" -> 61.2; empty = unavailable
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    temps_unavailable: str = ""                # why temps_c is empty, in one line ("" when temperatures are there)

    @property
    def total_percent(self) -> float:
        return sum(self.cpu_percent) / len(self.cpu_percent) if self.cpu_percent else 0.0

    def load_by_cpu(self) -> dict[int, float]:
        return dict(zip(self.cpu_ids, self.cpu_percent))
