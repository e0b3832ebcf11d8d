"""Generate resources/report.schema.json and docs/report-schema.md from the Report dataclasses, and validate.

The dataclasses are the single source of truth: the schema's structure comes
from their type hints, each field's description from the comment on its line
(or from ``DESCRIPTIONS`` below), and the public-contract constraints (enums,
ranges, patterns) from ``CONSTRAINTS``. tests/test_schema.py fails when the
checked-in files drift from the code; regenerate with::

    .venv/bin/python tests/schema_tools.py

The validator is a deliberately small subset of JSON Schema 2020-12 (type,
properties, required, additionalProperties, items, enum, const, minimum,
maximum, maxLength, maxItems, pattern, $ref, anyOf) so the tests need no extra dependency.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import io
import json
import re
import sys
import tokenize
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "resources" / "report.schema.json"
DOCS_PATH = REPO / "docs" / "report-schema.md"
SCHEMA_ID = "https://github.com/cpudoctor/cpudoctor/resources/report.schema.json"

AVX512_SUBSETS = ["F", "CD", "BW", "DQ", "VL", "IFMA", "VBMI", "VBMI2", "VNNI", "BF16", "FP16", "BITALG",
                  "VPOPCNTDQ", "VP2INTERSECT", "ER", "PF"]

# No kernel numbers a CPU (or NUMA node) at 65536 or above (probes/_fs.py MAX_CPUS); no CPU runs at 100 GHz.
MAX_CPUS = 65536
MAX_MHZ = 100_000
CPU_ID: dict[str, Any] = {"minimum": 0, "maximum": MAX_CPUS - 1}
# No kernel makes more NUMA nodes; no probe writes more notes (cpudoctor.report_file, issue 29).
from cpudoctor.report_file import MAX_NOTES, MAX_NUMA_NODES  # noqa: E402
NOTES: dict[str, Any] = {"maxItems": MAX_NOTES}
COUNT: dict[str, Any] = {"minimum": 0, "maximum": MAX_CPUS}

# Extra JSON Schema keywords for fields that are a public contract (issue 2) or have a closed set of values.
CONSTRAINTS: dict[str, dict[str, Any]] = {
    "Report.schema_version": {"const": 1},
    "Meta.kind": {"const": "cpudoctor-report"},
    "CpuInfo.microarchitecture": {"pattern": "^[a-z0-9_]+$"},
    "CpuInfo.source": {"enum": ["procfs", "py-cpuinfo", "sysctl", "unknown"]},
    "CpuInfo.flags": {"items": {"type": "string", "pattern": "^[a-z0-9_.]+$", "maxLength": 64}, "maxItems": 1024},
    "IsaVerdict.avx512_subsets": {"items": {"enum": AVX512_SUBSETS}},
    "IsaVerdict.amx": {"items": {"enum": ["tile", "bf16", "int8", "fp16", "complex"]}},
    "IsaVerdict.x86_64_level": {"minimum": 1, "maximum": 4},
    "IsaVerdict.vector_width_bits": {"minimum": 64},
    "Finding.severity": {"enum": ["ok", "info", "warning", "error"]},
    "Finding.code": {"pattern": "^[A-Z]+[0-9]+$"},
    "BenchRun.status": {"enum": ["ok", "cancelled", "crashed", "error"]},
    "ImportCheck.workload_status": {"enum": ["ok", "crashed", "error", "timeout", None]},
    "ImportOrderCheck.status": {"enum": ["ok", "crashed", "error", "timeout", "skipped"]},
    # Bounds a reader relies on (issue 19): a report saying 10**15 CPUs or a 1 MB brand string
    # is refused when it is opened instead of hanging the window that draws it.
    "CpuInfo.brand": {"maxLength": 256},
    "CpuInfo.base_mhz": {"minimum": 0, "maximum": MAX_MHZ},
    "CpuInfo.max_mhz": {"minimum": 0, "maximum": MAX_MHZ},
    "CpuInfo.logical_cpus_listed": COUNT,
    "Topology.packages": COUNT,
    "Topology.cores": COUNT,
    "Topology.logical_cpus": COUNT,
    "Topology.smt_threads_per_core": COUNT,
    "Topology.online_cpus": {"items": CPU_ID},
    "Topology.offline_cpus": {"items": CPU_ID},
    "Topology.cpuless_numa_nodes": {"items": CPU_ID},
    "Topology.l2_groups": {"items": {"items": CPU_ID}},
    "Affinity.allowed_cpus": {"items": CPU_ID},
    "Affinity.cgroup_cpuset": {"items": CPU_ID},
    "Affinity.allowed_mems": {"items": CPU_ID},
    "Affinity.cpu_quota": {"minimum": 0, "maximum": MAX_CPUS},
    "Affinity.usable_cpus": COUNT,
    "L3Domain.cpus": {"items": CPU_ID},
    "NumaNode.id": CPU_ID,
    "NumaNode.cpus": {"items": CPU_ID},
    "NumaNode.distances": {"items": {"minimum": 0, "maximum": 255}},
    "Core.cpus": {"items": CPU_ID},
    "Core.l3": CPU_ID,
    "Core.efficiency_class": {"minimum": 0, "maximum": 255},
    "ProcessorGroup.id": {"minimum": 0, "maximum": 65535},
    "ProcessorGroup.cpus": {"items": CPU_ID},
    "ProcessorGroup.first_cpu": CPU_ID,
    "ProcessorGroup.maximum": {"minimum": 0, "maximum": 64},
    "Core.numa": CPU_ID,
    "Package.cpus": {"items": CPU_ID},
    "CpuKind.cpus": {"items": CPU_ID},
    "ThreadRecommendation.threads": COUNT,
    "ThreadRecommendation.interop_threads": COUNT,
    "ThreadRecommendation.cpus": {"items": CPU_ID},
    "BlasLib.num_threads": COUNT,
    "TorchBuild.intra_op_threads": COUNT,
    "TorchBuild.inter_op_threads": COUNT,
    "Topology.numa_nodes": {"maxItems": MAX_NUMA_NODES},
    "Report.notes": NOTES,
    "CpuInfo.notes": NOTES,
    "Topology.notes": NOTES,
    "CgroupLimits.notes": NOTES,
    "Software.notes": NOTES,
}

# Descriptions for fields whose source line has no comment.
# Fields added after schema version 1 was published: optional, so a report written before them still loads
# (serde gives them their default). Every other field is required.
ADDED_LATER: frozenset[str] = frozenset({
    "Topology.processor_groups", "Core.efficiency_class", "OsInfo.power_plan", "OsInfo.power_plan_guid",
    "Finding.snippet_bash", "Topology.memory_total_bytes", "CpuidCheck.hypervisor_vendor", "ImportCheck.crashed_in",
    "ImportOrderCheck.crashed_in",
})

DESCRIPTIONS: dict[str, str] = {
    "Report.schema_version": "Version of this schema; readers refuse other versions.",
    "Report.meta": "Who made the report, when, and from which root.",
    "Report.cpu": "CPU identity, flags and ISA verdicts (issue 2 contract).",
    "Report.topology": "Packages, NUMA nodes, L3 (CCX) domains, cores and threads.",
    "Report.software": "OS, Python, PyTorch/NumPy/BLAS builds and thread environment; null when not probed.",
    "Report.findings": "Advisor findings (empty when the advisor did not run).",
    "Report.benchmarks": "Finished lab runs.",
    "Report.recommendation": "Best thread setting from the thread sweep; null when none ran.",
    "Report.notes": "Report-level notes (for example an advisor failure).",
    "Meta.kind": "Always 'cpudoctor-report'.",
    "Meta.tool_version": "CPU Doctor version that wrote the report.",
    "CpuInfo.brand": "Marketing name (x86 'model name'; on ARM decoded from implementer/part).",
    "CpuInfo.family": "x86 CPU family (decimal, extended family included); null on ARM.",
    "CpuInfo.model": "x86 CPU model (decimal, extended model included); null on ARM.",
    "CpuInfo.stepping": "x86 stepping; null on ARM.",
    "CpuInfo.flags": "Flags every processor reports, as Linux names them (x86 'flags', ARM 'Features'), kernel order.",
    "CpuInfo.isa": "ISA verdicts decided from the flags.",
    "CpuInfo.notes": "Why something is unknown, masked or surprising.",
    "IsaVerdict.avx2": "avx2 reported.",
    "IsaVerdict.fma": "fma (FMA3) reported.",
    "IsaVerdict.f16c": "f16c reported.",
    "IsaVerdict.bmi2": "bmi2 reported.",
    "IsaVerdict.avx_vnni": "avx_vnni (VEX-coded VNNI) reported.",
    "IsaVerdict.avx512_vnni": "avx512_vnni reported.",
    "IsaVerdict.avx512_bf16": "avx512_bf16 reported (native bf16 dot products).",
    "CpuInfo.base_mhz": "Base (nominal) clock in MHz; source in base_mhz_source.",
    "CpuInfo.max_mhz": "Highest boost clock in MHz (fastest core); source in max_mhz_source.",
    "Meta.generated_at": "When the report was made (ISO 8601, UTC).",
    "Finding.title": "One-line summary.",
    "Finding.why": "Why it matters, with the numbers that triggered it.",
    "Finding.fix": "What to do, in words.",
    "Finding.snippet_lang": "Language of the snippet (bash, python, ...).",
    "Finding.fields_used": "Report field paths the rule read.",
    "BenchRun.kind": "train, gemm, sweep, quant, ...",
    "BenchRun.settings": "The settings the run used (threads, dtype, model, ...).",
    "BenchRun.metrics": "Measured figures; lists hold series.",
    "BenchRun.started_at": "When the run started (ISO 8601).",
    "BenchRun.note": "Free text, e.g. why it was cancelled.",
    "ThreadRecommendation.threads": "Intra-op threads of the best setting.",
    "ThreadRecommendation.interop_threads": "Inter-op threads, null = PyTorch default.",
    "ThreadRecommendation.samples_per_s": "Throughput of the best setting.",
    "ThreadRecommendation.default_samples_per_s": "Throughput with PyTorch's default settings.",
    "ThreadRecommendation.model": "The model the sweep ran.",
    "Topology.online_cpus": "Online logical CPUs.",
    "Topology.offline_cpus": "Present but offline logical CPUs.",
    "Topology.smt_threads_per_core": "Hardware threads per core (1 = SMT off or absent).",
    "Topology.package_list": "Each package (socket) with its CPUs and dies.",
    "Topology.core_list": "Each physical core with its hardware threads.",
    "Topology.cpuless_numa_nodes": "NUMA nodes with memory but no CPUs (CXL, HBM, Optane).",
    "Topology.affinity": "Where this process may run (affinity, cgroup cpuset and quota).",
    "Topology.notes": "Why something is unknown or unusual.",
    "Affinity.cgroup_cpuset": "CPUs allowed by the cgroup cpuset, null when unrestricted or unknown.",
    "L3Domain.cpus": "Logical CPUs sharing this L3 (on AMD: one CCX).",
    "L3Domain.size_bytes": "L3 size in bytes.",
    "Cache.cpus": "Logical CPUs sharing this cache.",
    "Cache.size_bytes": "Cache size in bytes.",
    "CpuKind.cpus": "Online logical CPUs of this core kind (hybrid chips: P cores or E cores).",
    "NumaNode.id": "Kernel NUMA node number (may be sparse).",
    "NumaNode.cpus": "Logical CPUs of this node.",
    "NumaNode.distances": "SLIT distances to every node, in node order.",
    "Package.cpus": "Logical CPUs of this package.",
    "Package.dies": "Die ids in this package.",
    "Core.package": "Package id of this core.",
    "Core.core_id": "Kernel core id (unique within the package).",
    "Core.cpus": "Logical CPUs (hardware threads) of this core.",
    "Core.die": "Die id, null when unknown.",
    "Software.os": "Operating system, virtualization, frequency and memory facts.",
    "Software.python": "The Python running CPU Doctor.",
    "Software.packages": "Installed deep-learning packages and their builds.",
    "Software.torch": "PyTorch build facts, read in a child process.",
    "Software.numpy": "NumPy SIMD and BLAS facts.",
    "Software.isa_risks": "Installed packages whose ISA floor this CPU may not meet.",
    "Software.import_checks": "Child-process imports of native packages (SIGILL detection).",
    "Software.notes": "Why something is unknown or skipped.",
    "OsInfo.distro_version": "Distribution version.",
    "OsInfo.kernel": "Kernel release.",
    "OsInfo.vm": "Running in a virtual machine.",
    "OsInfo.boost": "CPU boost (turbo) enabled.",
    "OsInfo.mem_total_bytes": "Total RAM in bytes.",
    "OsInfo.mem_available_bytes": "Available RAM in bytes.",
    "OsInfo.swap_total_bytes": "Total swap in bytes.",
    "OsInfo.swap_used_bytes": "Used swap in bytes.",
    "OsInfo.cgroup_memory_limit_bytes": "cgroup memory limit in bytes, null when none.",
    "PythonInfo.version": "Python version.",
    "PythonInfo.implementation": "cpython, pypy, ...",
    "PythonInfo.executable": "Interpreter path (redacted to ~ in exports).",
    "PythonInfo.env_name": "Name of the venv/conda environment.",
    "PackageInfo.name": "Distribution name.",
    "PackageInfo.version": "Installed version.",
    "TorchBuild.version": "torch.__version__.",
    "TorchBuild.mkl_available": "torch.backends.mkl.is_available().",
    "TorchBuild.mkl_version": "MKL version of the build.",
    "TorchBuild.mkldnn_available": "torch.backends.mkldnn.is_available() (oneDNN).",
    "TorchBuild.mkldnn_version": "oneDNN version of the build.",
    "TorchBuild.intra_op_threads": "torch.get_num_threads() in the child.",
    "TorchBuild.inter_op_threads": "torch.get_num_interop_threads() in the child.",
    "TorchBuild.cuda_version": "CUDA version of the build, null for CPU builds.",
    "TorchBuild.hip_version": "ROCm/HIP version of the build, null otherwise.",
    "TorchBuild.seconds": "Wall time of the child.",
    "NumpyInfo.version": "numpy.__version__.",
    "NumpyInfo.simd_baseline": "SIMD extensions NumPy was compiled to require.",
    "NumpyInfo.simd_dispatched": "SIMD extensions NumPy dispatches to at run time on this CPU.",
    "NumpyInfo.blas": "BLAS/OpenMP thread pools NumPy loaded.",
    "NumpyInfo.error": "Why NumPy facts are missing.",
    "BlasLib.version": "Library version.",
    "BlasLib.num_threads": "Threads the pool uses.",
    "BlasLib.threading_layer": "Threading layer (openmp, pthreads, tbb, ...).",
    "IsaRisk.package": "Package name.",
    "IsaRisk.installed": "Whether it is installed.",
    "IsaRisk.version": "Installed version.",
    "IsaRisk.at_risk": "True when the CPU lacks something the build needs (SIGILL risk).",
    "IsaRisk.note": "Explanation.",
    "ImportCheck.package": "Distribution name.",
    "ImportCheck.module": "Module imported in the child.",
    "ImportCheck.signal": "Signal that killed the child, if any.",
    "ImportCheck.signal_name": "Name of that signal (SIGILL ...).",
    "ImportCheck.message": "Error text or diagnosis.",
    "ImportCheck.seconds": "Import time in seconds.",
    "ImportCheck.workload_message": "What went wrong in the workload (empty when it ran or none is known).",
    "ImportOrderCheck.message": "One line: what the child did, or where and how it died.",
    "ImportOrderCheck.signal_name": "Signal that killed the child (SIGABRT for OpenMP's Error #15), if any.",
}


# -- source comments ------------------------------------------------------

def _field_comments(cls: type) -> dict[str, str]:
    """``name -> trailing comment`` for the annotated fields in ``cls``'s source."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    out = {}
    tree = ast.parse(inspect.cleandoc("\n" + source) if source.startswith((" ", "\t")) else source)
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = comments.get(node.lineno) or comments.get(getattr(node, "end_lineno", node.lineno))
            if text and not text.startswith("type:"):
                out[node.target.id] = text
    return out


def _class_description(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    if doc.startswith(f"{cls.__name__}("):      # dataclass auto-generated signature, not a docstring
        return ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


# -- schema generation ----------------------------------------------------

def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules.get(cls.__module__)
    return typing.get_type_hints(cls, globalns=vars(module) if module else None)


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {}
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp)]
        schemas = [_type_schema(a, defs) for a in args]
        simple = [s.get("type") for s in schemas]
        if all(isinstance(t, str) for t in simple) and all(len(s) == 1 for s in schemas):
            return {"type": simple}
        return {"anyOf": schemas}
    if tp is type(None):
        return {"type": "null"}
    if origin in (list, tuple, set, frozenset):
        args = get_args(tp)
        return {"type": "array", "items": _type_schema(args[0], defs) if args else {}}
    if origin is dict:
        args = get_args(tp)
        return {"type": "object", "additionalProperties": _type_schema(args[1], defs) if len(args) == 2 else {}}
    if origin is typing.Literal:
        return {"enum": list(get_args(tp))}
    if dataclasses.is_dataclass(tp):
        _add_def(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    return {"type": {int: "integer", float: "number", str: "string", bool: "boolean"}.get(tp, "string")}


def _add_def(cls: type, defs: dict[str, Any]) -> None:
    if cls.__name__ in defs:
        return
    defs[cls.__name__] = {}                      # placeholder against recursion
    comments = _field_comments(cls)
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        schema = _type_schema(_hints(cls)[f.name], defs)
        key = f"{cls.__name__}.{f.name}"
        extra = CONSTRAINTS.get(key, {})
        if "items" in extra and "items" in schema:
            schema = {**schema, "items": {**schema["items"], **extra["items"]}}
            extra = {k: v for k, v in extra.items() if k != "items"}
        desc = DESCRIPTIONS.get(key) or comments.get(f.name) or ""
        props[f.name] = {**({"description": desc} if desc else {}), **schema, **extra}
    entry: dict[str, Any] = {"type": "object"}
    desc = _class_description(cls)
    if desc:
        entry["description"] = desc
    entry["properties"] = props
    entry["required"] = [f.name for f in dataclasses.fields(cls) if f"{cls.__name__}.{f.name}" not in ADDED_LATER]
    entry["additionalProperties"] = True         # newer minor versions may add fields; readers ignore them
    defs[cls.__name__] = entry


def build_schema() -> dict[str, Any]:
    from cpudoctor.model import Report

    defs: dict[str, Any] = {}
    _add_def(Report, defs)
    root = defs.pop("Report")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "CPU Doctor report",
        "description": ("A CPU Doctor report (cpudoctor report --format json). Generated from the dataclasses in "
                        "cpudoctor/report.py and probes/*.py by tests/schema_tools.py; see docs/report-schema.md."),
        **{k: v for k, v in root.items() if k != "description"},
        "$defs": dict(sorted(defs.items())),
    }


def schema_text(schema: dict[str, Any] | None = None) -> str:
    return json.dumps(schema or build_schema(), indent=2, ensure_ascii=False) + "\n"


# -- docs -----------------------------------------------------------------

DOCS_INTRO = """\
# CPU Doctor report schema

`cpudoctor report --format json` (and the GUI's JSON export) writes one object described by
[`resources/report.schema.json`](../resources/report.schema.json) (JSON Schema 2020-12). This page
lists every field. It is generated from the dataclasses by `tests/schema_tools.py`; a test fails
when the code and this page disagree.

```bash
cpudoctor report --format json -o report.json          # this machine (redacted)
cpudoctor report --root captured-tree/ --format json   # a captured /proc + /sys tree
python -m jsonschema -i report.json resources/report.schema.json   # any JSON Schema validator works
```

## Stability

* `schema_version` is `1`. Fields may be **added** within a version (readers ignore unknown keys and
  fill missing ones with defaults); renaming or removing a field bumps the version.
* `null` means *unknown*; the `notes` next to it say why.
* These keys are a public contract that other tools read (issue 2):

  | Key | Type | Meaning |
  |---|---|---|
  | `cpu.vendor` | string or null | Short vendor: `AMD`, `Intel`, `ARM`, `Hygon`, `Fujitsu`, `HiSilicon`, ... |
  | `cpu.brand` | string or null | Marketing name |
  | `cpu.family`, `cpu.model`, `cpu.stepping` | integer or null | x86 identity (decimal); null on ARM |
  | `cpu.microarchitecture` | string or null | Lowercase, archspec names where archspec has the silicon: `zen`, `zen2`, `zen3`, `zen4`, `zen5`, `k10`, `bulldozer`, `piledriver`, `haswell`, `skylake`, `skylake_avx512`, `cascadelake`, `icelake`, `sapphirerapids`, `alderlake`, `arrowlake_s`, `neoverse_v2`, `a64fx`, ...; gcc `-march` style names otherwise (`raptorlake`, `tigerlake`, `k8`, `tsv110`, `cortex_x925`) |
  | `cpu.flags` | array of strings | Flags as Linux prints them |
  | `cpu.isa.avx512_usable` | boolean | `avx512f` **and** `avx512cd` reported by the OS |
  | `cpu.isa.avx512_subsets` | array of strings | Short names: `F CD BW DQ VL IFMA VBMI VBMI2 VNNI BF16 FP16 BITALG VPOPCNTDQ VP2INTERSECT ER PF` |
  | `cpu.isa.x86_64_level` | integer or null | psABI level 1-4; null on non-x86 |

* The micro-architecture is decoded from family/model (x86) or implementer/part (ARM) through
  `resources/microarchitectures.json`, not from flags: hypervisors mask flags, so flags are only a
  cross-check (a mismatch becomes a note). archspec, by contrast, reports the best *compatible*
  target, so the two can differ (a Lakefield is `lakefield` here and `westmere` in archspec).

## Objects and fields
"""


def _type_text(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema and "type" not in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type_text(s) for s in schema["anyOf"])
    t = schema.get("type")
    if isinstance(t, list):
        return " or ".join(t)
    if t == "array":
        return f"array of {_type_text(schema.get('items', {}))}"
    if t == "object" and isinstance(schema.get("additionalProperties"), dict):
        inner = _type_text(schema["additionalProperties"])
        return f"object of {inner}" if inner != "any" else "object"
    return t or "any"


def docs_text(schema: dict[str, Any] | None = None) -> str:
    schema = schema or build_schema()
    out = [DOCS_INTRO]
    objects = [("Report", schema)] + list(schema["$defs"].items())
    for name, obj in objects:
        out.append(f"### {name}\n")
        if name == "Report":
            out.append("The top-level object.\n")
        elif obj.get("description"):
            out.append(obj["description"] + "\n")
        out.append("| Field | Type | Description |")
        out.append("|---|---|---|")
        for field_name, prop in obj["properties"].items():
            extra = []
            for key in ("minimum", "maximum", "pattern"):
                if key in prop:
                    extra.append(f"{key} `{prop[key]}`")
            if "enum" in prop and "type" in prop:
                extra.append("one of " + ", ".join(f"`{v}`" for v in prop["enum"]))
            items = prop.get("items", {})
            if isinstance(items, dict) and "enum" in items:
                extra.append("items: " + " ".join(f"`{v}`" for v in items["enum"]))
            desc = (prop.get("description", "") + (" (" + "; ".join(extra) + ")" if extra else "")).replace("|", "\\|")
            out.append(f"| `{field_name}` | {_type_text(prop)} | {desc} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- validator ------------------------------------------------------------

class ValidationError(ValueError):
    pass


_JSON_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(instance: Any, schema: dict[str, Any], root: dict[str, Any] | None = None, path: str = "$") -> None:
    """Raise ValidationError at the first place ``instance`` breaks ``schema``."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        validate(instance, root["$defs"][name], root, path)
    if "anyOf" in schema:
        errors = []
        for sub in schema["anyOf"]:
            try:
                validate(instance, sub, root, path)
                break
            except ValidationError as exc:
                errors.append(str(exc))
        else:
            raise ValidationError(f"{path}: matches none of anyOf: {'; '.join(errors)}")
    if "type" in schema:
        types_ = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_JSON_TYPES[t](instance) for t in types_):
            raise ValidationError(f"{path}: {instance!r} is not of type {'/'.join(types_)}")
    if "const" in schema and instance != schema["const"]:
        raise ValidationError(f"{path}: {instance!r} != {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        raise ValidationError(f"{path}: {instance!r} is not one of {schema['enum']}")
    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        if "minimum" in schema and instance < schema["minimum"]:
            raise ValidationError(f"{path}: {instance} < {schema['minimum']}")
        if "maximum" in schema and instance > schema["maximum"]:
            raise ValidationError(f"{path}: {instance} > {schema['maximum']}")
    if isinstance(instance, str) and "maxLength" in schema and len(instance) > schema["maxLength"]:
        raise ValidationError(f"{path}: a string of {len(instance)} characters, longer than {schema['maxLength']}")
    if isinstance(instance, str) and "pattern" in schema and not re.search(schema["pattern"], instance):
        raise ValidationError(f"{path}: {instance!r} does not match {schema['pattern']}")
    if isinstance(instance, list) and "maxItems" in schema and len(instance) > schema["maxItems"]:
        raise ValidationError(f"{path}: a list of {len(instance)} entries, more than {schema['maxItems']}")
    if isinstance(instance, list) and "items" in schema:
        for i, item in enumerate(instance):
            validate(item, schema["items"], root, f"{path}[{i}]")
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in instance:
                raise ValidationError(f"{path}: missing required key {key!r}")
        for key, value in instance.items():
            if key in props:
                validate(value, props[key], root, f"{path}.{key}")
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    raise ValidationError(f"{path}: unexpected key {key!r}")
                if isinstance(extra, dict):
                    validate(value, extra, root, f"{path}.{key}")


def structure(schema: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Object -> field -> type text, ignoring descriptions (what the drift test compares)."""
    objects = {"Report": schema, **schema["$defs"]}
    return {name: {f: json.dumps({k: v for k, v in p.items() if k != "description"}, sort_keys=True)
                   for f, p in obj["properties"].items()} for name, obj in objects.items()}


def main() -> int:
    schema = build_schema()
    SCHEMA_PATH.write_text(schema_text(schema), encoding="utf-8")
    DOCS_PATH.parent.mkdir(exist_ok=True)
    DOCS_PATH.write_text(docs_text(schema), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH.relative_to(REPO)} and {DOCS_PATH.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
