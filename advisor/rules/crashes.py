"""Crashes after a clean import, and environment variables that force an instruction set against the CPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpudoctor.advisor import machine, snippets
from cpudoctor.advisor.engine import Facts, rule
from cpudoctor.advisor.torch_install import pip_install, platform_of
from cpudoctor.knowledge import ISA_FORCING
from cpudoctor.model import Finding, Report

# Which forcing variables each package's kernels read.
_READERS: dict[str, tuple[str, ...]] = {
    "numpy": ("OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "NPY_DISABLE_CPU_FEATURES"),
    "scipy": ("OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR"),
    "torch": ("ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR"),
}


def forcing_table() -> dict[str, Any]:
    return ISA_FORCING.data


@dataclass
class Forced:
    """One forcing variable judged against the CPU's flags."""

    name: str
    value: str
    kind: str                  # force | cap
    library: str
    isa: str | None            # what the value selects, e.g. "AVX-512"
    missing: list[str]         # flags the value needs and the CPU lacks
    best: str | None           # the best value for this CPU, e.g. "Haswell"
    best_isa: str | None
    lower: bool                # the value is below the CPU's best
    cost: str
    source: str
    known: bool = True


def _variable(name: str) -> dict[str, Any] | None:
    return ISA_FORCING.variable(name)


def judge(name: str, value: str, flags: set[str]) -> Forced | None:
    """How ``name=value`` relates to a CPU with ``flags``; None when the variable is not in the table."""
    entry = _variable(name)
    if entry is None:
        return None
    wanted = value.split(",")[0].strip().lower()   # MKL_CBWR=AVX2,STRICT
    values = entry["values"]
    chosen = next((v for v in values if wanted in v["names"]), None)
    fitting = [v for v in values if v["rank"] < 99 and set(v["needs"]) <= flags]
    best = max(fitting, key=lambda v: v["rank"]) if fitting else None
    best_name = best["names"][0] if best else None
    if chosen is None:
        return Forced(name, value, entry["kind"], entry["library"], None, [], best_name, best["isa"] if best else None,
                      False, entry["cost"], entry["source"], known=False)
    missing = sorted(set(chosen["needs"]) - flags)
    lower = bool(best) and chosen["rank"] < best["rank"] and not missing
    return Forced(name, value, entry["kind"], entry["library"], chosen["isa"], missing, best_name,
                  best["isa"] if best else None, lower, entry["cost"], entry["source"])


def _display(name: str | None) -> str:
    """OpenBLAS core names are written CamelCase in its docs: skylakex -> SkylakeX."""
    special = {"skylakex": "SkylakeX", "sapphirerapids": "SapphireRapids", "cooperlake": "Cooperlake"}
    if name is None:
        return "?"
    return special.get(name, name.upper() if "_" in name or name.startswith("avx") else name.capitalize())


def forced_vars(f: Facts, names: tuple[str, ...] | None = None) -> list[Forced]:
    """The forcing variables set in the report's environment, judged against its CPU flags."""
    flags = machine.flags(f)
    out = []
    for name in names or tuple(forcing_table()["variables"]):
        value = machine.env(f, name)
        if value is None or not value.strip():
            continue
        judged = judge(name, value, flags)
        if judged is not None:
            out.append(judged)
    return out


def _npy_disabled(f: Facts) -> tuple[str, list[str]] | None:
    """(value, features the CPU has) for NPY_DISABLE_CPU_FEATURES."""
    value = machine.env(f, "NPY_DISABLE_CPU_FEATURES")
    if not value:
        return None
    table = forcing_table()["numpy_disable"]["flags"]
    flags = machine.flags(f)
    names = [n.strip().upper() for n in value.replace(",", " ").split() if n.strip()]
    return value, [n for n in names if table.get(n) in flags]


@rule("ISAENV001", "isa-forced-by-env", category="isa", severity="error",
      title="An environment variable forces or caps an instruction set against this CPU")
def isa_forced_by_env(report: Report) -> list[Finding]:
    """What it checks:
        Variables that pick a library's instruction set: ``OPENBLAS_CORETYPE`` and
        ``ATEN_CPU_CAPABILITY`` (force: used whether or not the CPU has it),
        ``MKL_ENABLE_INSTRUCTIONS``, ``DNNL_MAX_CPU_ISA``/``ONEDNN_MAX_CPU_ISA`` and ``MKL_CBWR``
        (caps), and ``NPY_DISABLE_CPU_FEATURES``, each against the CPU's flags (the table of values
        and the flags they need is resources/isa_forcing.json, with sources).

    Why it matters:
        A forced instruction set the CPU lacks kills the process with SIGILL at the first kernel
        call, after a clean import: ``OPENBLAS_CORETYPE=SkylakeX`` copied from a server's profile
        to a Zen 3 desktop crashes numpy's first matrix product. A value below the CPU's best runs
        slower kernels for nothing: AVX2 instead of AVX-512 is about half the FLOP/s.

    Fix:
        Unset the variable, or set it to the CPU's best value (named in the finding).
        ``ATEN_CPU_CAPABILITY`` below the CPU is ISA002's finding.
    """
    f = Facts(report)
    if not machine.env_known(f) or not machine.is_x86(f) or not machine.flags(f):
        return []
    out: list[Finding] = []
    for forced in forced_vars(f):
        setting = f"{forced.name}={forced.value}"
        clear = snippets.unset_lines([forced.name]) + "\n# or for one run:\n" + snippets.clean_launch([forced.name])
        if not forced.known:
            out.append(f.finding(
                "warning", f"{setting}: a value {forced.library} does not know",
                why=(f"{forced.name} accepts the values listed in {forced.source}; '{forced.value}' is not one of them, so "
                     f"{forced.library} ignores it, refuses to start or falls back to its oldest kernels."),
                fix=f"Unset {forced.name}" + (f" or set it to {_display(forced.best)}, this CPU's best." if forced.best else "."),
                snippet=clear))
        elif forced.missing and forced.kind == "force":
            best = f" ({_display(forced.best)} is the best this CPU runs: {forced.best_isa})" if forced.best else ""
            out.append(f.finding(
                "error", f"{setting} forces {forced.isa} kernels this CPU lacks",
                why=(f"{forced.name} makes {forced.library} use its {forced.isa} kernels without checking the CPU, and this "
                     f"CPU lacks {', '.join(forced.missing)}. The first call into those kernels dies of SIGILL (Illegal "
                     "instruction) after a clean import: every script that computes with it crashes."),
                fix=f"Unset {forced.name}{best}.",
                snippet=clear))
        elif forced.missing:
            out.append(f.finding(
                "info", f"{setting} caps at {forced.isa}, above this CPU: no effect",
                why=(f"{forced.name} is an upper limit for {forced.library}; this CPU lacks {', '.join(forced.missing)}, so "
                     f"the library runs its best kernels for the CPU ({forced.best_isa or 'unknown'}) anyway."),
                fix=f"Nothing breaks; remove {forced.name} to keep the environment honest.",
                snippet=snippets.unset_lines([forced.name])))
        elif forced.lower:
            if forced.name == "ATEN_CPU_CAPABILITY":
                continue  # ISA002 compares PyTorch's actual kernels with the CPU and names this variable
            out.append(f.finding(
                "warning", f"{setting} holds {forced.library} to {forced.isa}; this CPU runs {forced.best_isa}",
                why=(f"{forced.name} limits {forced.library} to its {forced.isa} kernels, while this CPU can run "
                     f"{forced.best_isa} ({_display(forced.best)}). Cost: {forced.cost}."),
                fix=f"Unset {forced.name} (or set it to {_display(forced.best)}) unless you need bit-identical results "
                    "across machines.",
                snippet=clear))
        else:
            out.append(f.finding("ok", f"{setting} fits this CPU ({forced.isa})"))
    npy = _npy_disabled(f)
    if npy is not None:
        value, hit = npy
        if hit:
            info = forcing_table()["numpy_disable"]
            out.append(f.finding(
                "warning", f"NPY_DISABLE_CPU_FEATURES turns off {', '.join(hit)} in numpy",
                why=(f"NPY_DISABLE_CPU_FEATURES={value} disables numpy's {', '.join(hit)} loops on a CPU that has them. "
                     f"Cost: {info['cost']}."),
                fix="Unset NPY_DISABLE_CPU_FEATURES unless you are bisecting a numpy bug.",
                snippet=snippets.unset_lines(["NPY_DISABLE_CPU_FEATURES"])))
    return out


@rule("KERNEL001", "crash-after-import", category="isa", severity="error",
      title="A package imports, then crashes in its first computation")
def crash_after_import(report: Report) -> list[Finding]:
    """What it checks:
        The tiny workload each import-check child runs right after the import (a BLAS matrix
        product for numpy, a matmul and a convolution for torch, a matmul for TensorFlow and JAX,
        a one-node model for ONNX Runtime): whether it crashed, failed or hung, which package and
        native library was running (the child prints its stage before each step), and whether a
        variable that forces an instruction set explains it.

    Why it matters:
        Libraries pick their kernels on the first call, not at import: ``import numpy`` works and
        the first ``a @ b`` dies of SIGILL in OpenBLAS. Blaming the wrong package (torch, because
        the script imported it too) sends people reinstalling the wrong thing.

    Fix:
        Unset the forcing variable when one is set (OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY, ...);
        otherwise install a build of the crashing package that matches this CPU, or force its
        kernels down to what the CPU has (e.g. ``OPENBLAS_CORETYPE=Haswell`` on an AVX2 CPU whose
        AVX-512 a VM hides) until it is fixed upstream.
    """
    f = Facts(report)
    checks = [c for c in (f.get("software.import_checks", record=False) or []) if c.workload_status]
    if not checks:
        return []
    out: list[Finding] = []
    for chk in checks:
        if chk.workload_status == "ok":
            continue
        f.record(f"software.import_checks[{chk.package}].workload",
                 {"status": chk.workload_status, "stage": chk.stage, "library": chk.workload_library,
                  "signal": chk.signal_name})
        readers = _READERS.get(chk.module, ())
        forced = [x for x in forced_vars(f, readers) if x.kind == "force" and x.missing] if readers else []
        where = f" in {chk.workload_library}" if chk.workload_library else ""
        what = {"crashed": f"died of {chk.signal_name or 'a signal'}", "timeout": "did not finish in time",
                "error": "raised an error"}.get(chk.workload_status, "failed")
        why = f"import {chk.module} works, then its first computation {what}{where}."
        if chk.workload_message and chk.workload_status == "error":
            why += f" Message: {chk.workload_message[:200]}"
        if forced:
            listed = ", ".join(f"{x.name}={x.value}" for x in forced)
            why += (f" {listed} forces {', '.join(x.isa or '?' for x in forced)} kernels, and this CPU lacks "
                    f"{', '.join(sorted({m for x in forced for m in x.missing}))}.")
            names = [x.name for x in forced]
            fix = f"Unset {', '.join(names)}; {chk.package} then picks the kernels this CPU has."
            snippet = snippets.unset_lines(names) + "\n# or for one run:\n" + snippets.clean_launch(names)
        elif chk.workload_status == "crashed" and chk.signal_name == "SIGILL":
            why += (" The kernels it chose use an instruction this CPU does not run: a CPU-detection or build bug of "
                    "the library (often inside a VM whose CPU model promises more than it delivers).")
            workaround = _workaround(f, chk.module)
            fix = (f"Update {chk.package}, or install a build for this CPU; report it upstream with this message."
                   + (f" Until then, force the kernels down: {workaround}." if workaround else ""))
            snippet = ((f"export {workaround}  # what this CPU runs\n" if workaround else "")
                       + pip_install([chk.package], platform_of(report), upgrade=True))
        else:
            fix = (f"Reinstall {chk.package} in a clean environment with versions that match each other; run "
                   f"`python -c 'import {chk.module}'` plus one operation to reproduce it.")
            snippet = pip_install([chk.package], platform_of(report), force=True)
        severity = "warning" if chk.workload_status in ("timeout", "error") else "error"
        out.append(f.finding(severity, f"{chk.package} imports, then its first computation {what}",
                             why=why, fix=fix, snippet=snippet))
    if out:
        return out
    ran = [c.package for c in checks if c.workload_status == "ok"]
    return [f.finding("ok", f"First computations ran after import: {', '.join(ran)}")]


def _workaround(f: Facts, module: str) -> str | None:
    """``OPENBLAS_CORETYPE=Haswell``-style setting that keeps a BLAS on kernels this CPU has."""
    if module not in ("numpy", "scipy"):
        return None
    flags = machine.flags(f)
    best = judge("OPENBLAS_CORETYPE", "prescott", flags)
    return f"OPENBLAS_CORETYPE={_display(best.best)}" if best and best.best else None
