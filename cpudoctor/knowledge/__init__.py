"""Knowledge as data: one loader per data file in ``resources/``, each validated by its schema when first read.

Like archspec's microarchitectures.json, what CPU Doctor knows about CPUs and
packages (flag meanings, psABI levels, ISA floors, VM models, known problems,
FLOP/cycle ...) is data with sources, not code. This package is the only reader
of those files (tests/test_knowledge_boundaries.py holds it to that): every
other layer asks a loader here. A loader reads nothing until it is asked, then
reads, parses and validates its file once (``NAME.json`` against
``NAME.schema.json`` beside it) and keeps the result.

========================  =======================================================
:data:`FLAGS`             flags.json: categories, meanings, CPUID bits, aliases
:data:`LEVELS`            x86_64_levels.json: psABI levels and what flags meet
:data:`FLOORS`            isa_floors.json: package builds' ISA floors by version
:mod:`.files`             the other files, read as they are (schema-checked)
:mod:`.versions`          PEP 440 / PEP 503 maths for the version-ranged tables
========================  =======================================================

``resources/report.schema.json`` is not knowledge: it is the saved report's
contract, generated from :mod:`cpudoctor.model` (tests/schema_tools.py), and
:mod:`cpudoctor.report_file` alone reads it.

Above the model and the kits, below the probes: the probes, the advisor, the
lab and render read knowledge; knowledge decides nothing about a machine.
"""

from __future__ import annotations

from cpudoctor.knowledge.datafile import DataFile, KnowledgeError
from cpudoctor.knowledge.files import (ADVISOR_KNOWLEDGE, KNOWN_PROBLEMS, MICROARCHITECTURES, NATIVE_LIBS,
                                       PEAK_FLOPS, SAMPLE_RULES, SHOWN_SETTINGS, SOFTWARE_FACTS, TORCH_WHEELS,
                                       TRAINING_MEMORY, VM_CPU_MODELS)
from cpudoctor.knowledge.flags import FLAGS, FlagCatalogue
from cpudoctor.knowledge.floors import FLOORS, Floor, FloorTable, KnownPackage
from cpudoctor.knowledge.isa import ISA_FORCING, IsaTable
from cpudoctor.knowledge.levels import LEVELS, PsabiLevels

# Every data file in resources/, one loader each (a test checks that none is missing).
ALL: tuple[DataFile, ...] = (FLAGS, LEVELS, FLOORS, MICROARCHITECTURES, VM_CPU_MODELS, KNOWN_PROBLEMS, ISA_FORCING,
                             ADVISOR_KNOWLEDGE, NATIVE_LIBS, PEAK_FLOPS, TORCH_WHEELS, SOFTWARE_FACTS, SHOWN_SETTINGS,
                             SAMPLE_RULES, TRAINING_MEMORY)

__all__ = ["ADVISOR_KNOWLEDGE", "ALL", "FLAGS", "FLOORS", "ISA_FORCING", "KNOWN_PROBLEMS", "LEVELS", "MICROARCHITECTURES",
           "NATIVE_LIBS", "PEAK_FLOPS", "SAMPLE_RULES", "SHOWN_SETTINGS", "SOFTWARE_FACTS", "TORCH_WHEELS", "TRAINING_MEMORY", "VM_CPU_MODELS",
           "DataFile",
           "Floor", "FloorTable", "FlagCatalogue", "IsaTable", "KnowledgeError", "KnownPackage", "PsabiLevels"]
