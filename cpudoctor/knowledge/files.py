"""The data files read as they are: one loader each, validated against its schema on first use.

Their readers index them directly: the schema guarantees the keys they use.
The files with questions of their own have typed loaders beside this module
(:mod:`.flags`, :mod:`.levels`, :mod:`.floors`, :mod:`.isa`).
"""

from __future__ import annotations

from cpudoctor.knowledge.datafile import DataFile

MICROARCHITECTURES = DataFile(
    "microarchitectures.json", "vendors, product lines, x86 family/model and Arm implementer/part -> "
    "micro-architecture, datapath widths; read by the CPU probe (probes/cpu/uarch.py, identity.py)")
VM_CPU_MODELS = DataFile(
    "vm_cpu_models.json", "hypervisor CPU models that hide the host's instruction sets, the instruction sets each "
    "micro-architecture has in silicon, the fix per hypervisor; read by probes/cpu/vm_model.py and advisor/vm_mask.py")
KNOWN_PROBLEMS = DataFile(
    "known_problems.json", "version-specific problems as conditions on a report -> a finding; read by advisor/known.py")
ADVISOR_KNOWLEDGE = DataFile(
    "advisor_knowledge.json", "facts the advisor's rules decide from (AVX-512 silicon, wheel sizes, memory "
    "thresholds, myths, relevance of each rule); read by advisor/machine.py, ranking.py, process_rules.py")
NATIVE_LIBS = DataFile(
    "native_libs.json", "shared libraries a training process may load (OpenMP runtimes, BLAS, oneDNN) by file "
    "name; read by probes/process/inspect.py")
PEAK_FLOPS = DataFile(
    "peak_flops.json", "FLOP per cycle per core by micro-architecture and precision; read by lab/peak.py")
TORCH_WHEELS = DataFile(
    "torch_wheels.json", "where the official CPU builds of PyTorch come from, by OS and architecture; read by "
    "advisor/torch_install.py")
SOFTWARE_FACTS = DataFile(
    "software_facts.json", "DMI names of hypervisors, cgroup paths of container runtimes, OpenMP runtime library "
    "names; read by probes/software/osinfo.py and stack.py")
SHOWN_SETTINGS = DataFile(
    "shown_settings.json", "which environment variables and command-line flags a report shows, and the shape "
    "a shown value must have; read by probes/software/envvars.py")
SAMPLE_RULES = DataFile(
    "sample_rules.json", "how a sampled stack is classified (compute kernels by library, OpenMP waiting, Python, "
    "data loading, compilation, memory, I/O and sleep, the GIL); read by probes/process/classify.py")
TRAINING_MEMORY = DataFile(
    "training_memory.json", "optimizer states per parameter, the framework's and a DataLoader worker's own memory, "
    "and what each way of needing less memory costs in speed; read by advisor/fit.py and advisor/memory_rules.py")
