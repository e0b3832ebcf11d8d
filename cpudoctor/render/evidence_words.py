"""A finding's evidence keys in words: ``software.thread_env.OMP_NUM_THREADS`` -> "OMP_NUM_THREADS (environment)".

The advisor records the report fields a rule read (``fields_used``, the keys of
``evidence``) as dotted paths into the report: exact, and what JSON keeps. People
read them on the Advisor page, the exports and ``doctor -v``: there each path is
said in words, a known field by its name, any other by its section and its last
part ("PyTorch inter-op threads", "package numpy", "CPU ISA: avx512 bf16").
"""

from __future__ import annotations

import re

# Whole paths said their own way.
FIELDS: dict[str, str] = {
    "cpu.brand": "CPU", "cpu.flags": "CPU flags", "cpu.arch": "CPU architecture", "cpu.vendor": "CPU vendor",
    "cpu.hypervisor": "hypervisor", "cpu.microarchitecture": "microarchitecture",
    "cpu.cpuid_check.emulated": "CPU emulated (CPUID check)",
    "cpu.cpuid_check.missing_flags": "flags the running CPU lacks (CPUID check)",
    "software.torch.status": "PyTorch", "software.torch.version": "PyTorch version",
    "software.torch.intra_op_threads": "PyTorch's threads (its own choice)",
    "software.torch.inter_op_threads": "PyTorch's inter-op threads",
    "software.torch.cpu_capability": "PyTorch's CPU kernels",
    "software.children_ran": "packages imported in child processes",
    "software.floor_tally": "ISA floors checked",
    "software.packages": "installed packages",
    "software.loaded_libs": "native thread pools",
    "software.openmp_runtimes": "OpenMP runtimes",
    "software.os.mem_total_bytes": "memory", "software.os.mem_available_bytes": "memory available",
    "software.os.wsl": "WSL version",
    "topology.affinity.usable_cpus": "usable CPUs", "topology.affinity.allowed_cpus": "CPUs allowed",
    "topology.affinity.cpu_quota": "cgroup CPU quota", "topology.logical_cpus": "logical CPUs",
    "topology.cores": "physical cores", "topology.smt_threads_per_core": "threads per core",
    "recommendation": "the thread sweep's pick", "measured_effect": "measured speed-up (x)",
}
# Sections of the report and the words before a field's own name.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("software.thread_env.", "{} (environment)"), ("software.torch.", "PyTorch {}"), ("software.os.", "OS {}"),
    ("software.python.", "Python {}"), ("cpu.cpuid_check.", "CPUID check: {}"), ("cpu.isa.", "CPU ISA: {}"),
    ("cpu.", "CPU {}"), ("topology.affinity.", "affinity: {}"), ("topology.", "topology: {}"),
)
# Lists whose entries a key names in brackets: software.packages[numpy].build -> "package numpy: build".
INDEXED: dict[str, str] = {
    "software.packages": "package {}", "software.import_checks": "import check of {}",
    "software.isa_risks": "ISA floor of {}", "software.loaded_libs": "thread pool {}",
    "benchmarks": "lab run: {}",
}
_INDEX = re.compile(r"^(?P<head>[\w.]+)\[(?P<item>[^\]]*)\](?:\.(?P<rest>[\w.]+))?$")


def _name(part: str) -> str:
    """``intra_op_threads`` -> "intra op threads"; an environment variable keeps its own name."""
    return part if part.isupper() else part.replace("_", " ")


def evidence_words(key: str) -> str:
    """The words for one evidence key (a report field path, or a job rule's own name: ``openmp_wait_share``)."""
    if key in FIELDS:
        return FIELDS[key]
    m = _INDEX.match(key)
    if m and m.group("head") in INDEXED:
        said = INDEXED[m.group("head")].format(m.group("item"))
        return f"{said}: {_name(m.group('rest').rsplit('.', 1)[-1])}" if m.group("rest") else said
    for prefix, form in SECTIONS:
        if key.startswith(prefix):
            rest = key[len(prefix):]
            return form.format(rest if prefix == "software.thread_env." else _name(rest.replace(".", " ")))
    return _name(key.rsplit(".", 1)[-1])
