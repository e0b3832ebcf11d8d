"""The memory allocator: glibc malloc against jemalloc/tcmalloc for allocation-heavy training."""

from __future__ import annotations

from cpudoctor.advisor import machine
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.model import Finding, Report

_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")
_MALLOC_CONF = "oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:9000000000,muzzy_decay_ms:9000000000"


@rule("ALLOC001", "allocator-preload", category="allocator", severity="info",
      title="A faster allocator (jemalloc or tcmalloc) is not preloaded")
def allocator_preload(report: Report) -> list[Finding]:
    """What it checks:
        On Linux with PyTorch installed, whether ``LD_PRELOAD`` names jemalloc, tcmalloc or
        mimalloc (the report keeps only the library names).

    Why it matters:
        PyTorch's CPU tensors come from the C allocator. glibc malloc returns large blocks to the
        OS and takes them back again every step (page faults, zeroing) and contends between
        threads; PyTorch's performance tuning guide measures jemalloc/tcmalloc as a free speed-up
        for allocation-heavy training (many small tensors, variable shapes, DataLoader workers).

    Fix:
        Install ``libjemalloc2`` (or ``libtcmalloc-minimal4``) and preload it for the training run,
        with ``MALLOC_CONF`` tuned to keep freed memory for reuse.
    """
    f = Facts(report)
    system = f.get("software.os.system")
    if system != "Linux" or not machine.torch_installed(f):
        return []
    preload = f.get("software.preload_libs") or []
    found = [a for a in _ALLOCATORS if any(a in lib.lower() for lib in preload)]
    if found:
        return [f.finding("ok", f"{found[0]} is preloaded")]
    return [f.finding(
        "info", "Try jemalloc or tcmalloc for allocation-heavy training",
        why=("No faster allocator is preloaded, so PyTorch uses glibc malloc, which returns and re-faults large blocks "
             "every step and contends between threads. PyTorch's tuning guide reports jemalloc/tcmalloc as a free "
             "speed-up for allocation-heavy training."),
        fix="Install jemalloc and preload it for the training run (measure: gains depend on the model).",
        snippet=("sudo apt install libjemalloc2   # Debian/Ubuntu; Fedora: sudo dnf install jemalloc\n"
                 "export LD_PRELOAD=\"$(ldconfig -p | awk '/libjemalloc.so.2/{print $NF; exit}')\"\n"
                 f"export MALLOC_CONF=\"{_MALLOC_CONF}\"\n"
                 "python train.py"))]
