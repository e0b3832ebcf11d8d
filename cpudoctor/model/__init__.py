"""The report model: plain data every layer shares, importing nothing else of CPU Doctor.

The probes fill it, the advisor and the lab read it and add findings and
benchmarks, render words it, the window shows it, and a saved report is its
JSON form (:mod:`cpudoctor.report_file` reads one back). Like psutil's
``_common``, it sits at the bottom: nothing here reads the machine, decides
or words anything.

================  ============================================================
:mod:`.cpu`       identity, flags, ISA verdicts, the CPUID cross-check
:mod:`.topology`  packages, NUMA nodes, L3 domains, cores, affinity, cgroups
:mod:`.software`  OS, Python, packages, PyTorch build, BLAS, import checks (and
                  :mod:`.environment`: the Python environments ``cpudoctor envs`` lists)
:mod:`.report`    the Report, findings, benchmark runs, the recommendation
:mod:`.serde`     dataclasses to JSON data and back, type-checked
================  ============================================================

The job side (a training job watched by ``cpudoctor run``, ``inspect`` or the
Inspector) has its own plain data beside the report's:

=================  ===========================================================
:mod:`.breakdown`  where the job's time went: shares per category, thread, process
:mod:`.inspection` one running process: threads, CPUs, libraries, children, peers
:mod:`.joblogs`    what its libraries logged: oneDNN kernels, recompilations
:mod:`.evidence`   a run's observation, and the JobEvidence every job rule reads
=================  ===========================================================
"""

from __future__ import annotations

from cpudoctor.model.breakdown import ProcessTime, Share, StackAccess, ThreadTime, TimeBreakdown, TopFrame
from cpudoctor.model.cpu import ARM_ARCHES, X86_ARCHES, CpuidCheck, CpuInfo, IsaVerdict, arch_family, canonical_arch
from cpudoctor.model.environment import PythonEnv
from cpudoctor.model.report import (CATEGORIES, REPORT_KIND, SCHEMA_VERSION, SEVERITIES, SEVERITY_RANK, BenchRun,
                                    Finding, Meta, Report, ReportError, ThreadRecommendation, utc_now_iso, worst)
from cpudoctor.model.evidence import JobEvidence, JobMemory, RunObservation
from cpudoctor.model.inspection import (ChildProcess, Inspection, NativeLib, PeerJob, ProcessEntry, ReadProblem,
                                        ThreadInfo, ThreadPlace)
from cpudoctor.model.joblogs import KernelSummary, OneDnnLog, Primitive, Recompile, RecompileLog
from cpudoctor.model.serde import SchemaError, from_data, to_data
from cpudoctor.model.software import (BlasLib, FloorTally, GpuInfo, ImportCheck, ImportOrderCheck, IsaRisk, NumpyInfo,
                                      OsInfo, PackageInfo, PythonInfo, Software, TorchBuild)
from cpudoctor.model.topology import (Affinity, Cache, CgroupLimits, Core, CpuKind, L3Domain, NumaNode, Package,
                                      ProcessorGroup, Topology)

__all__ = ["ChildProcess", "Inspection", "JobEvidence", "JobMemory", "KernelSummary", "NativeLib", "OneDnnLog",
           "PeerJob", "Primitive", "ProcessEntry", "ProcessTime", "ReadProblem", "Recompile", "RecompileLog",
           "RunObservation", "Share", "StackAccess", "ThreadInfo", "ThreadPlace", "ThreadTime", "TimeBreakdown",
           "TopFrame",
           "ARM_ARCHES", "CATEGORIES", "REPORT_KIND", "SCHEMA_VERSION", "SEVERITIES", "SEVERITY_RANK", "X86_ARCHES",
           "Affinity", "BenchRun", "BlasLib", "Cache", "CgroupLimits", "Core", "CpuInfo", "CpuKind", "CpuidCheck",
           "Finding", "FloorTally", "GpuInfo", "ImportCheck", "ImportOrderCheck", "IsaRisk", "IsaVerdict", "L3Domain",
           "Meta", "NumaNode", "NumpyInfo", "OsInfo", "Package", "PackageInfo", "ProcessorGroup", "PythonEnv", "PythonInfo",
           "Report", "ReportError",
           "SchemaError", "Software", "ThreadRecommendation", "Topology", "TorchBuild", "arch_family", "canonical_arch", "from_data",
           "to_data", "utc_now_iso", "worst"]
