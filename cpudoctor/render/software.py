"""Software-stack sections for text and Markdown reports.

Both formats come from one list of sections (title, lines, table) so they say
the same things. Problems are marked the flutter-doctor way: [✓] fine,
[!] worth a look, [✗] broken. Nothing here reads the machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpudoctor.model import IsaRisk, PythonInfo, Software
from cpudoctor.kits.escape import md_code, md_escape
from cpudoctor.kits.format import seconds, size
from cpudoctor.render.words import bracketed, plural, yes_no

OK, WARN, BAD = bracketed("ok"), bracketed("warning"), bracketed("error")


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    table: list[list[str]] = field(default_factory=list)   # first row = header
    bullets: list[str] = field(default_factory=list)       # marked lines ([✓] ...)


def _os_section(sw: Software) -> Section:
    o = sw.os
    s = Section("Operating system")
    name = " ".join(x for x in (o.distro, o.distro_version) if x) or o.system or "unknown"
    parts = [name]
    if o.kernel:
        parts.append(f"kernel {o.kernel}")
    if o.libc:
        parts.append(o.libc)
    s.lines.append(", ".join(parts))
    where = []
    if o.wsl:
        where.append(f"WSL{o.wsl}")
    if o.vm:
        where.append(f"virtual machine ({o.virtualization})" if o.virtualization else "virtual machine")
    elif o.vm is False:
        where.append("bare metal")
    if o.container:
        where.append(f"container: {o.container}")
    if where:
        s.lines.append("Runs on: " + ", ".join(where))
    if o.system == "Windows":        # no cpufreq, no THP: the power plan is Windows' clock policy
        s.lines.append(f"Power plan: {o.power_plan or o.power_plan_guid or 'unknown'}")
    elif o.system != "Darwin":       # macOS clocks the cores itself and shows programs no policy
        freq = f"Governor: {o.governor or 'unknown'}, driver: {o.cpufreq_driver or 'unknown'}, boost: {yes_no(o.boost)}"
        s.lines.append(freq)
        s.lines.append(f"Transparent huge pages: {o.thp or 'unknown'}")
    mem = f"Memory: {size(o.mem_total_bytes)} total, {size(o.mem_available_bytes)} available"
    if o.swap_total_bytes is not None:
        mem += "; swap: none" if o.swap_total_bytes == 0 else f"; swap: {size(o.swap_used_bytes)} of {size(o.swap_total_bytes)} used"
    if o.system in (None, "Linux"):  # cgroups are Linux's
        mem += (f"; cgroup limit: {size(o.cgroup_memory_limit_bytes)}" if o.cgroup_memory_limit_bytes
                else "; cgroup limit: none")
    s.lines.append(mem)
    return s


_CHOSEN = {
    "--python": "chosen with --python",
    "$CPUDOCTOR_PYTHON": "chosen by $CPUDOCTOR_PYTHON",
    "active": "the active environment",
    "working-folder": "the working folder's environment",
    "likely": "the environment you most likely train in",
    "window": "chosen in the window",
    "own-torch": "the only environment found with PyTorch",
    "only-own": "no other environment with Python 3.8+ was found",
}


def environment_words(p: PythonInfo) -> str:
    """Which Python environment the software facts describe, and why that one:
    ``amd_dl (conda, Python 3.10.13): the environment you most likely train in``."""
    kind = p.env_kind or "unknown kind"
    name = p.env_name or p.executable
    if name is None:      # a report made before environments had names: say what is known, no "unknown (venv)"
        what = f"a {p.env_kind} environment" if p.env_kind else "an environment of unknown kind"
        text = f"{what} (Python {p.version})" if p.version else what
    else:
        text = f"{name} ({kind}, Python {p.version})" if p.version else f"{name} ({kind})"
    why = [_CHOSEN.get(p.chosen_by, p.chosen_by)] if p.chosen_by else []
    if p.own:
        why.insert(0, "CPU Doctor's own")
    if why:
        text += ": " + ", ".join(why)
    return text + (f"; it cannot be examined: {p.error}" if p.error else "")


def _python_section(sw: Software) -> Section | None:
    p = sw.python
    if p.version is None and p.executable is None:
        return None
    s = Section("Python", lines=[f"Environment: {environment_words(p)}"])
    if p.executable:
        s.lines.append(f"Interpreter: {p.executable}")
    if sw.packages:
        s.table.append(["package", "version", "build", "detail"])
        for pkg in sw.packages:
            s.table.append([pkg.name, pkg.version or "?", pkg.build or "unknown", pkg.detail])
    else:
        s.lines.append("No deep-learning packages installed")
    return s


def _torch_section(sw: Software) -> Section | None:
    t = sw.torch
    if t.status == "not_installed" and t.version is None:
        return None
    s = Section("PyTorch build")
    if t.status in ("skipped",):
        s.lines.append(f"torch {t.version or ''} installed; build facts not read (quick probe)".replace("  ", " "))
        return s
    if t.status != "ok":
        s.bullets.append(f"{BAD} torch {t.version or ''}: {t.error or t.status}".replace("  ", " "))
        return s
    build = [f"torch {t.version}"]
    if t.cuda_version:
        build.append(f"CUDA {t.cuda_version}")
    if t.hip_version:
        build.append(f"ROCm/HIP {t.hip_version}")
    s.lines.append(", ".join(build) + (f", built with {t.compiler}" if t.compiler else ""))
    s.lines.append(f"CPU capability: {t.cpu_capability or 'unknown'}")
    libs = [
        f"MKL {t.mkl_version or ('available' if t.mkl_available else 'no')}" if t.mkl_available is not None else "MKL unknown",
        f"oneDNN {t.mkldnn_version or ('available' if t.mkldnn_available else 'no')}" if t.mkldnn_available is not None else "oneDNN unknown",
    ]
    if t.blas:
        libs.append(f"BLAS: {t.blas}")
    s.lines.append(", ".join(libs))
    par = t.parallel_backend or "unknown"
    if t.openmp:
        par += f" ({t.openmp})"
    s.lines.append(f"Parallel backend: {par}; threads: {t.intra_op_threads or 'unknown'} intra-op, "
                   f"{t.inter_op_threads or 'unknown'} inter-op")
    s.lines.append(f"bf16 natively supported: {yes_no(t.bf16_supported)}")
    if t.error:
        s.bullets.append(f"{WARN} {t.error}")
    return s


def _blas_section(sw: Software) -> Section | None:
    n = sw.numpy
    libs = sw.loaded_libs or n.blas
    if n.version is None and not libs and not n.error:
        return None
    s = Section("NumPy and thread pools")
    if n.version and not sw.children_ran and not (n.simd_baseline or n.simd_dispatched):
        # The SIMD lists come from a numpy child; empty here means "not read", not "none".
        s.lines.append(f"numpy {n.version}: SIMD features not read (quick probe)")
    elif n.version:
        s.lines.append(f"numpy {n.version}: SIMD baseline {', '.join(n.simd_baseline) or 'none'}; "
                       f"dispatched {', '.join(n.simd_dispatched) or 'none'}")
    if n.error:
        s.bullets.append(f"{BAD} numpy: {n.error}")
    if libs:
        s.table.append(["library", "kind", "version", "threads", "detail"])
        for lib in libs:
            detail = ", ".join(x for x in (lib.threading_layer, lib.architecture) if x)
            s.table.append([lib.library or "?", lib.internal_api or lib.user_api or "?", lib.version or "",
                            "" if lib.num_threads is None else str(lib.num_threads), detail])
    return s


def _env_section(sw: Software) -> Section | None:
    if sw.python.version is None:
        return None
    s = Section("Thread and allocator environment")
    if sw.thread_env:
        s.lines.extend(f"{k}={v}" for k, v in sw.thread_env.items())
    else:
        s.lines.append("none of OMP_*, MKL_*, OPENBLAS_*, KMP_*, GOMP_*, DNNL_*, ZENDNN_*, TORCH_*, LD_PRELOAD set")
    return s


def _imports_section(sw: Software) -> Section | None:
    if not sw.import_checks:
        return None
    s = Section("Import checks")
    for c in sw.import_checks:
        took = f" ({seconds(c.seconds, digits=2)})" if c.seconds is not None else ""
        if c.status == "ok":
            s.bullets.append(f"{OK} import {c.module}{took}")
        elif c.status in ("timeout", "skipped"):
            s.bullets.append(f"{WARN} import {c.module}: {c.message}")
        else:
            s.bullets.append(f"{BAD} import {c.module}: {c.message}")
    return s


def _risk_line(r: IsaRisk) -> str:
    what = f"{r.package} {r.version}" if r.installed and r.version else r.package
    if not r.installed:
        what += " (if installed)"
    return f"{BAD if r.installed else WARN} {what}: missing {', '.join(r.missing)}" + (f" — {r.note}" if r.note else "")


def _risk_section(sw: Software) -> Section | None:
    if not sw.isa_risks:
        return None
    s = Section("Illegal-instruction risk")
    tally = sw.floor_tally()
    at_risk = [r for r in sw.isa_risks if r.at_risk]
    if not at_risk and tally.met:
        s.bullets.append(f"{OK} this CPU meets the ISA floor of every installed package that has one on record "
                         f"({plural(len(tally.met), 'package')}: {', '.join(tally.met)})")
    s.bullets.extend(_risk_line(r) for r in at_risk)
    if tally.unchecked:
        s.bullets.append(f"{WARN} not checked (CPU flags unknown or not x86): {', '.join(tally.unchecked)}")
    if tally.unknown:
        s.bullets.append(f"{WARN} no ISA floor on record (unknown) for {plural(len(tally.unknown), 'installed package')}"
                         f" with compiled code: {', '.join(tally.unknown)}")
    return s


def sections(sw: Software) -> list[Section]:
    out = [_os_section(sw)]
    for make in (_python_section, _torch_section, _blas_section, _env_section, _imports_section, _risk_section):
        sec = make(sw)
        if sec is not None:
            out.append(sec)
    if sw.notes:
        out.append(Section("Notes", lines=list(sw.notes)))
    return out


def _text_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def text_lines(sw: Software | None) -> list[str]:
    """Plain-text lines: section titles flush left, details indented by two spaces."""
    if sw is None:
        return ["(software stack not probed)"]
    lines: list[str] = []
    for sec in sections(sw):
        lines.append(sec.title)
        lines.extend(f"  {line}" for line in sec.lines)
        if sec.table:
            lines.extend(f"  {line}" for line in _text_table(sec.table))
        lines.extend(f"  {b}" for b in sec.bullets)
    return lines


def markdown_lines(sw: Software | None) -> list[str]:
    """GitHub Markdown: one ``###`` heading per section, tables for packages and libraries."""
    if sw is None:
        return ["_Software stack not probed._"]
    lines: list[str] = []
    for sec in sections(sw):
        lines.append(f"### {sec.title}")
        lines.append("")
        if sec.title == "Thread and allocator environment" and sw.thread_env:
            lines.extend(f"- {md_code(line)}" for line in sec.lines)
        else:
            lines.extend(f"- {md_escape(line)}" for line in sec.lines)
        if sec.table:
            if sec.lines:
                lines.append("")
            header, *rows = sec.table
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "|".join("---" for _ in header) + "|")
            lines.extend("| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows)
        lines.extend(f"- {md_escape(b)}" for b in sec.bullets)
        lines.append("")
    return lines
