"""What differs between two reports: before/after a fix, or machine A against machine B.

The diff is data (:class:`Comparison`), rendered as text, Markdown or JSON, so
the CLI and the GUI's side-by-side dialog show the same thing. Only
differences are listed; an empty section means "same". What the two reports
say about their Python environments comes first: two reports may describe
different environments, and then a package or a finding that differs says
nothing about a fix. A problem whose rule has nothing to say in B "no longer
applies"; only a check that passes in B was "fixed".

:func:`compare_files` (``cpudoctor compare``) and :func:`compare_reports` (the
window's Compare dialog) read, redact and label both sides the same way.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cpudoctor.kits.cpulist import format_cpulist, parse_cpulist
from cpudoctor.kits.format import wrap
from cpudoctor.kits.escape import md_escape
from cpudoctor.render.words import plural, severity
from cpudoctor.model import SEVERITY_RANK, BenchRun, Finding, Report



@dataclass
class Change:
    """One field that differs: ``a`` in the first report, ``b`` in the second."""

    section: str                           # environment | packages | threads | chip | flags | topology | software | ...
    item: str
    a: Any = None
    b: Any = None
    note: str = ""                         # e.g. "new", "fixed", "no longer applies", "1.23x"


@dataclass
class Comparison:
    label_a: str
    label_b: str
    changes: list[Change] = field(default_factory=list)
    # Which Python environment each report describes (None: none, e.g. a captured tree), and whether they
    # are one environment (None: cannot tell): said before anything else.
    environment_a: str | None = None
    environment_b: str | None = None
    same_environment: bool | None = None

    def section(self, name: str) -> list[Change]:
        return [c for c in self.changes if c.section == name]

    @property
    def same(self) -> bool:
        return not self.changes

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.label_a, "b": self.label_b,
                "environment": {"a": self.environment_a, "b": self.environment_b, "same": self.same_environment},
                "changes": [asdict(c) for c in self.changes]}


# What changed in the Python environment first, then the machine, then what was judged and measured.
SECTIONS = ("environment", "packages", "threads", "chip", "flags", "topology", "software", "findings", "benchmarks")
SECTION_TITLES = {"environment": "Python", "chip": "Chip", "flags": "CPU flags", "topology": "Topology",
                  "software": "Software", "packages": "Packages", "threads": "Thread environment",
                  "findings": "Findings", "benchmarks": "Benchmarks"}


def compare_files(path_a: Path | str, path_b: Path | str, *, include_identifying: bool = False) -> Comparison:
    """Two saved reports compared, each side labelled by its machine, date and file name.

    Raises :class:`cpudoctor.model.ReportError` naming the file that cannot be read.
    """
    a, b = read_report(path_a), read_report(path_b)
    return compare_reports(a, b, Path(path_a).name, Path(path_b).name, include_identifying=include_identifying)


def compare_reports(a: Report, b: Report, name_a: str, name_b: str, *,
                    include_identifying: bool = False) -> Comparison:
    """``a`` and ``b`` compared as the CLI and the window show them: redacted (unless the user keeps
    identifying details) and labelled ``AMD EPYC 9354 (2026-11-30), before.json``."""
    from cpudoctor.privacy import redact_report

    same_day = (a.meta.generated_at or "")[:10] == (b.meta.generated_at or "")[:10]
    return compare(redact_report(a, include_identifying), redact_report(b, include_identifying),
                   f"{label(a, same_day)}, {name_a}", f"{label(b, same_day)}, {name_b}")


def read_report(path: Path | str) -> Report:
    """A saved report for comparing; :class:`~cpudoctor.model.ReportError` names the file when it cannot be read."""
    from cpudoctor.report_file import load_report
    from cpudoctor.model import ReportError

    try:
        return load_report(path)
    except ReportError as exc:
        raise ReportError(f"{path}: {exc}") from None


def label(report: Report, with_time: bool = False) -> str:
    """``AMD EPYC 9354 (2026-11-30)``: what the user recognises a report by.

    ``with_time`` adds the time of day (``2026-11-30 09:38 UTC``), for two
    reports of one machine made on the same day (before/after a fix).
    """
    stamp = report.meta.generated_at or ""
    when = stamp[:10]
    if with_time and len(stamp) >= 16:
        when += f" {stamp[11:16]}" + (" UTC" if stamp.endswith(("+00:00", "Z")) else "")
    return f"{report.cpu.brand or 'unknown CPU'}" + (f" ({when})" if when else "")


# Field names as a reader says them (the Change keeps the data name, for JSON and the GUI).
ITEM_LABELS = {
    "brand": "name", "microarchitecture": "microarchitecture", "base_mhz": "base clock (MHz)",
    "max_mhz": "max clock (MHz)", "hypervisor": "virtual machine",
    "isa.avx512_usable": "AVX-512 usable", "isa.avx512_torch_kernels": "PyTorch AVX-512 kernels",
    "isa.avx2": "AVX2", "isa.fma": "FMA", "isa.avx_vnni": "AVX-VNNI", "isa.avx512_vnni": "AVX-512 VNNI",
    "isa.avx512_bf16": "AVX-512 BF16", "isa.amx": "AMX", "isa.x86_64_level": "x86-64 level",
    "isa.vector_width_bits": "widest vector (bits)",
    "logical_cpus": "logical CPUs", "smt_threads_per_core": "threads per core", "numa_nodes": "NUMA nodes (CPUs)",
    "l3_domains": "L3 domains (CPUs)", "l3_sizes": "L3 size", "offline_cpus": "offline CPUs",
    "allowed_cpus": "CPUs this process may use", "cpu_quota": "cgroup CPU quota",
    "os.distro": "distribution", "os.distro_version": "distribution version", "os.kernel": "kernel",
    "os.libc": "C library", "os.virtualization": "virtualisation", "os.container": "container",
    "os.governor": "CPU governor", "os.cpufreq_driver": "cpufreq driver", "os.boost": "boost",
    "os.thp": "transparent huge pages", "os.mem_total_bytes": "memory",
    "os.cgroup_memory_limit_bytes": "cgroup memory limit", "python.version": "version",
    "torch.status": "PyTorch status", "torch.version": "PyTorch", "torch.cpu_capability": "PyTorch CPU capability",
    "torch.openmp": "PyTorch OpenMP", "torch.parallel_backend": "PyTorch parallel backend",
    "torch.mkl_available": "MKL", "torch.mkldnn_available": "oneDNN", "torch.intra_op_threads": "PyTorch intra-op threads",
    "torch.inter_op_threads": "PyTorch inter-op threads", "torch.bf16_supported": "bf16 supported",
    "numpy.blas": "NumPy BLAS", "preload_libs": "preloaded libraries",
    "python_env": "Python, packages and thread environment",
}
_KINDS = ("train", "sweep", "gemm", "quant", "peak")
BYTE_ITEMS = {"l3_sizes", "os.mem_total_bytes", "os.cgroup_memory_limit_bytes"}
CPU_ITEMS = {"offline_cpus", "allowed_cpus"}                     # one cpulist per side
CPU_SET_ITEMS = {"numa_nodes": ("node", "nodes"), "l3_domains": ("L3", "L3s")}   # a cpulist per node / L3
SHOWN_SETS = 4             # the first few sets of a long NUMA/L3 list are shown, then "+N more"
WIDE = 100                 # text lines longer than this: flags wrap, long A/B values go on lines of their own
NBSP = "\u00a0"            # keeps a note ("[no longer applies]") on one line when a long line wraps


def item_label(change: "Change") -> str:
    if change.section == "benchmarks" and change.item in _KINDS:
        from cpudoctor.render.md_extra import kind_title

        return kind_title(change.item)
    if change.section == "benchmarks" and "." in change.item:
        from cpudoctor.render.md_extra import kind_title
        from cpudoctor.render.svg_chart import metric_label

        kind, _, name = change.item.partition(".")
        return f"{kind_title(kind)}: {metric_label(name)}"
    return ITEM_LABELS.get(change.item, change.item)


def _field(changes: list[Change], section: str, item: str, a: Any, b: Any) -> None:
    if a != b:
        changes.append(Change(section, item, a, b, change_note(a, b)))


def change_note(a: Any, b: Any) -> str:
    """The Change column: ``-1`` for 2 -> 1 threads, ``1.20x`` for a measured figure, never blank."""
    if a is None:
        return "only in B"
    if b is None:
        return "only in A"
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if numbers and isinstance(a, int) and isinstance(b, int):
        return f"{b - a:+d}"
    if numbers and a:
        return f"{b / a:.2f}x"
    return "changed"


def _cpus(cpus: list[int] | None) -> str | None:
    return None if cpus is None else format_cpulist(cpus)


def compare(a: Report, b: Report, label_a: str | None = None, label_b: str | None = None) -> Comparison:
    """Every difference between ``a`` and ``b`` that matters for deep-learning performance."""
    same_day = (a.meta.generated_at or "")[:10] == (b.meta.generated_at or "")[:10]
    out = Comparison(label_a or label(a, same_day), label_b or label(b, same_day))
    ch = out.changes
    for name in ("brand", "vendor", "microarchitecture", "codename", "family", "model", "stepping", "base_mhz",
                 "max_mhz", "hypervisor"):
        _field(ch, "chip", name, getattr(a.cpu, name), getattr(b.cpu, name))
    for name in ("avx512_usable", "avx512_torch_kernels", "avx2", "fma", "avx_vnni", "avx512_vnni", "avx512_bf16",
                 "amx", "x86_64_level", "vector_width_bits"):
        _field(ch, "chip", f"isa.{name}", getattr(a.cpu.isa, name), getattr(b.cpu.isa, name))
    fa, fb = set(a.cpu.flags), set(b.cpu.flags)
    if fb - fa:
        ch.append(Change("flags", "added", None, sorted(fb - fa), f"{len(fb - fa)} only in B"))
    if fa - fb:
        ch.append(Change("flags", "removed", sorted(fa - fb), None, f"{len(fa - fb)} only in A"))

    ta, tb = a.topology, b.topology
    for name in ("packages", "cores", "logical_cpus", "smt_threads_per_core"):
        _field(ch, "topology", name, getattr(ta, name), getattr(tb, name))
    _field(ch, "topology", "numa_nodes", [_cpus(n.cpus) for n in ta.numa_nodes], [_cpus(n.cpus) for n in tb.numa_nodes])
    _field(ch, "topology", "l3_domains", [_cpus(d.cpus) for d in ta.l3_domains], [_cpus(d.cpus) for d in tb.l3_domains])
    _field(ch, "topology", "l3_sizes", sorted({d.size_bytes for d in ta.l3_domains if d.size_bytes}),
           sorted({d.size_bytes for d in tb.l3_domains if d.size_bytes}))
    _field(ch, "topology", "offline_cpus", _cpus(ta.offline_cpus), _cpus(tb.offline_cpus))
    _field(ch, "topology", "allowed_cpus", _cpus(ta.affinity.allowed_cpus), _cpus(tb.affinity.allowed_cpus))
    _field(ch, "topology", "cpu_quota", ta.affinity.cpu_quota, tb.affinity.cpu_quota)

    out.environment_a, out.environment_b = _environment(a), _environment(b)
    out.same_environment = _same_environment(a, b)
    _software(ch, a, b)
    _findings(ch, a, b)
    _benchmarks(ch, a.benchmarks, b.benchmarks)
    ra, rb = a.recommendation, b.recommendation
    _field(ch, "benchmarks", "recommended threads", ra.threads if ra else None, rb.threads if rb else None)
    return out


def _software(ch: list[Change], a: Report, b: Report) -> None:
    sa, sb = a.software, b.software
    if sa is None or sb is None:
        _field(ch, "software", "probed", sa is not None, sb is not None)
        return
    for name in ("distro", "distro_version", "kernel", "libc", "virtualization", "container", "governor",
                 "cpufreq_driver", "boost", "thp", "mem_total_bytes", "cgroup_memory_limit_bytes"):
        _field(ch, "software", f"os.{name}", getattr(sa.os, name), getattr(sb.os, name))
    ca, cb = getattr(sa, "captured", False), getattr(sb, "captured", False)
    if ca or cb:
        # A captured tree has no Python, packages or environment of its own: "not installed" would be a false diff.
        def _env(captured: bool) -> str:
            return "not read (captured tree)" if captured else "read"

        _field(ch, "software", "python_env", _env(ca), _env(cb))
        return
    _field(ch, "environment", "python.version", sa.python.version, sb.python.version)
    for name in ("status", "version", "cpu_capability", "openmp", "parallel_backend", "mkl_available",
                 "mkldnn_available", "intra_op_threads", "inter_op_threads", "bf16_supported"):
        _field(ch, "software", f"torch.{name}", getattr(sa.torch, name), getattr(sb.torch, name))
    _field(ch, "software", "numpy.blas", [f"{x.internal_api} {x.version or ''}".strip() for x in sa.numpy.blas],
           [f"{x.internal_api} {x.version or ''}".strip() for x in sb.numpy.blas])
    _field(ch, "software", "preload_libs", sa.preload_libs, sb.preload_libs)
    pa = {p.name: p for p in sa.packages}
    pb = {p.name: p for p in sb.packages}
    for name in sorted(pa.keys() | pb.keys()):
        va = pa[name].version if name in pa else None
        vb = pb[name].version if name in pb else None
        if va != vb:
            note = "added" if name not in pa else "removed" if name not in pb else "changed"
            ch.append(Change("packages", name, va, vb, note))
    ea, eb = sa.thread_env, sb.thread_env
    for name in sorted(ea.keys() | eb.keys()):
        if ea.get(name) != eb.get(name):
            note = "set" if name not in ea else "unset" if name not in eb else "changed"
            ch.append(Change("threads", name, ea.get(name), eb.get(name), note))


def _environment(report: Report) -> str | None:
    """``amd_dl (conda, Python 3.10.13)``: the environment a report describes; None when it describes none."""
    from cpudoctor.render.software import environment_words

    sw = report.software
    if sw is None or sw.captured or (sw.python.executable is None and sw.python.version is None):
        return None
    return environment_words(dataclasses.replace(sw.python, chosen_by=None, error=None))


def _same_environment(a: Report, b: Report) -> bool | None:
    """Whether both reports describe one Python environment (its interpreter or folder); None when unknown."""
    pa = a.software.python if a.software is not None and not a.software.captured else None
    pb = b.software.python if b.software is not None and not b.software.captured else None
    if pa is None or pb is None:
        return None
    for key in ("executable", "prefix"):
        x, y = getattr(pa, key), getattr(pb, key)
        if x and y:
            return x == y
    return None


# Report fields that only a live look at the machine's Python environment fills in (not a captured tree)...
_FILE_FIELDS = ("software.os.", "software.gpus")
# ... and those that only the child processes fill in (``report --fast`` skips them).
_CHILD_FIELDS = ("software.torch.", "software.numpy.", "software.loaded_libs", "software.import_checks",
                 "software.isa_risks", "software.children_ran")


def could_check(report: Report, finding: Finding) -> bool:
    """Whether ``report`` had the data the rule behind ``finding`` needed.

    A rule that cannot read its inputs says nothing, so a finding missing from
    a report made with ``--fast`` (no child processes) or from a captured tree
    (no Python, packages or environment of its own) was not checked there; it
    did not go away. The finding's ``fields_used`` and ``evidence`` name what
    the rule read.
    """
    fields = set(finding.fields_used) | set(finding.evidence)
    soft = [f for f in fields if f.startswith("software.") or f == "software"]
    if not soft:
        return True
    sw = report.software
    if sw is None:
        return False
    live = [f for f in soft if not f.startswith(_FILE_FIELDS)]
    if live and getattr(sw, "captured", False):
        return False
    if any(f.startswith(_CHILD_FIELDS) for f in soft) and not sw.children_ran:
        return False
    if getattr(sw, "captured", False):
        # A captured tree may lack the files an OS fact comes from: all of them unknown = not checked.
        os_fields = [f.removeprefix("software.os.") for f in soft if f.startswith("software.os.")]
        if os_fields and all(getattr(sw.os, name, None) is None for name in os_fields):
            return False
    return True


def _findings(ch: list[Change], a: Report, b: Report) -> None:
    fa = {f.code: f for f in a.findings}
    fb = {f.code: f for f in b.findings}
    for code in sorted(fa.keys() | fb.keys()):
        x, y = fa.get(code), fb.get(code)
        # A passed check that is absent on the other side was not checked there: it did not "resolve".
        # Nor did a problem whose rule could not run on the other side (--fast, captured tree).
        if x is None and y is not None:
            note = ("checked only in B" if y.severity == "ok" else
                    "new" if could_check(a, y) else "not checked in A")
            ch.append(Change("findings", f"{code} {y.title}", None, y.severity, note))
        elif y is None and x is not None:
            # The rule says nothing in B: its problem no longer applies there (another environment, a package
            # gone), which is not a fix; a fix is a check that passes.
            note = ("checked only in A" if x.severity == "ok" else
                    "no longer applies" if could_check(b, x) else "not checked in B")
            ch.append(Change("findings", f"{code} {x.title}", x.severity, None, note))
        elif x is not None and y is not None and x.severity != y.severity:
            better = SEVERITY_RANK.get(y.severity, 1) < SEVERITY_RANK.get(x.severity, 1)
            note = "fixed" if y.severity == "ok" else "better" if better else "worse"
            ch.append(Change("findings", f"{code} {y.title}", x.severity, y.severity, note))


def _figures(run: BenchRun) -> dict[str, float]:
    """Headline numbers of a run: its scalar metrics and the best value of each measured series."""
    from cpudoctor.render.svg_chart import find_charts

    out = {k: float(v) for k, v in run.metrics.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    charts = find_charts(run.metrics)
    best = {chart.y_label for chart in charts if chart.bars}
    for chart in charts:
        if chart.bars:
            out[f"best {chart.y_label}"] = max(v for _, v in chart.bars)
        for series in chart.series:
            if series.name in best:          # the sweep's thread ladder peak is already its best bar
                continue
            unit = "" if chart.y_label in series.name else f" {chart.y_label}"
            out[f"peak {series.name}{unit}"] = max(y for _, y in series.points)
    return out


def _benchmarks(ch: list[Change], a: list[BenchRun], b: list[BenchRun]) -> None:
    """Compare the last run of each kind (a report may hold several runs of one kind)."""
    last_a = {r.kind: r for r in a if r.status == "ok"}
    last_b = {r.kind: r for r in b if r.status == "ok"}
    for kind in sorted(last_a.keys() | last_b.keys()):
        ra, rb = last_a.get(kind), last_b.get(kind)
        if ra is None or rb is None:
            ch.append(Change("benchmarks", kind, "run" if ra else None, "run" if rb else None,
                             "only in B" if ra is None else "only in A"))
            continue
        xa, xb = _figures(ra), _figures(rb)
        for name in sorted(xa.keys() | xb.keys()):
            va, vb = xa.get(name), xb.get(name)
            if va == vb:
                continue
            note = f"{vb / va:.2f}x" if va and vb is not None else ""
            ch.append(Change("benchmarks", f"{kind}.{name}", va, vb, note))


# --- renderers ------------------------------------------------------------------

def _show(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        from cpudoctor.kits.format import number

        return number(v)
    if isinstance(v, list):
        items = [_show(x) for x in v]
        # CPU lists contain commas themselves ("0-7,64-71"): separate those with semicolons.
        return ("; " if any("," in i for i in items) else ", ").join(items) if items else "none"
    return str(v)


def _bytes(v: Any) -> Any:
    from cpudoctor.kits.format import size

    if isinstance(v, list):
        return [_bytes(x) for x in v]
    return size(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _cache_sizes(v: Any) -> Any:
    from cpudoctor.kits.format import cache_size

    return [cache_size(x) for x in v] if isinstance(v, list) else v


def _cpu_sets(v: Any, nouns: tuple[str, str]) -> Any:
    """``4 nodes × 20 CPUs: 0-76:4; 1-77:4; ...``: the count first, then short CPU lists.

    Interleaved machines number their CPUs round-robin over nodes, so a node's
    plain cpulist is every 4th CPU spelled out; the kernel's ``a-b:stride``
    form (as the topology page shows it) keeps it short.
    """
    if not isinstance(v, list):
        return v
    if not v:
        return "none"
    sets = [parse_cpulist(x) if isinstance(x, str) else None for x in v]
    if any(s is None for s in sets):
        return v
    from cpudoctor.render.topology import cpus_text

    sizes = sorted({len(s) for s in sets})
    noun = nouns[0] if len(sets) == 1 else nouns[1]
    count = (f"{len(sets)} {noun} × {plural(sizes[0], 'CPU')}" if len(sizes) == 1 else
             f"{len(sets)} {noun} of {sizes[0]}–{sizes[-1]} CPUs")
    shown = "; ".join(cpus_text(s, limit=0) for s in sets[:SHOWN_SETS])      # always the shortest form
    more = f"; +{len(sets) - SHOWN_SETS} more" if len(sets) > SHOWN_SETS else ""
    return f"{count}: {shown}{more}"


def _cpu_list(v: Any) -> Any:
    from cpudoctor.render.topology import cpus_text

    cpus = parse_cpulist(v) if isinstance(v, str) else None
    return v if cpus is None else cpus_text(cpus)


def _values(c: Change) -> tuple[Any, Any]:
    if c.section == "findings":     # a severity, in the app's words (Warning, Passed)
        return tuple(None if v is None else severity(v).name for v in (c.a, c.b))
    if c.section == "topology" and c.item in CPU_SET_ITEMS:
        return _cpu_sets(c.a, CPU_SET_ITEMS[c.item]), _cpu_sets(c.b, CPU_SET_ITEMS[c.item])
    if c.section == "topology" and c.item in CPU_ITEMS:
        return _cpu_list(c.a), _cpu_list(c.b)
    if c.item == "l3_sizes":   # exact like lstopo: 27.5 MiB, 5118 KiB (a memory size would say 28 MiB, 5 MiB)
        return _cache_sizes(c.a), _cache_sizes(c.b)
    return (_bytes(c.a), _bytes(c.b)) if c.item in BYTE_ITEMS else (c.a, c.b)


def environment_text(cmp: Comparison) -> str | None:
    """The first thing a comparison says: which Python environments the reports describe, and what changed in it.

    None when neither report describes one (captured trees, reports without software).
    """
    a, b = cmp.environment_a, cmp.environment_b
    if a is None and b is None:
        return None
    if a is None or b is None:
        side = "B" if a is None else "A"
        return (f"Python environment: only {side} describes one ({a or b}); "
                f"its packages and PyTorch build have nothing to be compared with.")
    if cmp.same_environment is False:
        return (f"Python environment: the reports describe different environments (A: {a}; B: {b}), so "
                "package, PyTorch and finding differences may come from that, not from a change.")
    changed = [plural(n, one, many) for n, one, many in (
        (len(cmp.section("environment")), "Python version", "Python versions"),
        (len(cmp.section("packages")), "package", "packages"),
        (len(cmp.section("threads")), "thread variable", "thread variables")) if n]
    what = f"{_and(changed)} changed in it" if changed else "nothing in it changed"
    where = f"the same in both, {a}" if cmp.same_environment else f"A: {a}; B: {b}"
    return f"Python environment: {where}; {what}."


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def render_text(cmp: Comparison) -> str:
    lines = [f"A: {cmp.label_a}", f"B: {cmp.label_b}", ""]
    env = environment_text(cmp)
    if env:
        lines += [*wrap(env, WIDE), ""]
    if cmp.same:
        return "\n".join(lines + ["No differences."]) + "\n"
    for sec in SECTIONS:
        items = cmp.section(sec)
        if not items:
            continue
        lines.append(f"{SECTION_TITLES[sec]}:")
        for c in items:
            if sec == "flags":
                flags = _show(c.b if c.item == "added" else c.a)
                lines += wrap(f"{c.item} ({c.note}): {flags}", WIDE, indent=2, hang=4)
            else:
                note = f"  [{c.note}]" if c.note else ""
                a, b = (_show(v) for v in _values(c))
                line = f"  {item_label(c)}: {a} -> {b}{note}"
                if len(line) <= WIDE:
                    lines.append(line)
                elif len(a) + len(b) < 30:      # a long title with short values: wrapped, the change stays together
                    whole = line.strip().replace(f"[{c.note}]", f"[{c.note}]".replace(" ", NBSP))
                    lines += [part.replace(NBSP, " ") for part in wrap(whole, WIDE, indent=2, hang=4)]
                else:       # long values: A and B under each other, easy to compare by eye
                    lines += [f"  {item_label(c)}:{note}", f"    A: {a}", f"    B: {b}"]
        lines.append("")
    lines.append(f"{plural(len(cmp.changes), 'difference')}.")
    return "\n".join(lines) + "\n"


def _md(v: Any) -> str:
    return md_escape(_show(v))


def render_markdown(cmp: Comparison) -> str:
    from cpudoctor.kits.escape import md_fence

    lines = ["# CPU Doctor: report comparison", "", f"- **A:** {_md(cmp.label_a)}", f"- **B:** {_md(cmp.label_b)}", ""]
    env = environment_text(cmp)
    if env:
        head, _, rest = env.partition(": ")
        lines += [f"**{md_escape(head)}:** {md_escape(rest)}", ""]
    if cmp.same:
        return "\n".join(lines + ["No differences."]) + "\n"
    for sec in SECTIONS:
        items = cmp.section(sec)
        if not items:
            continue
        lines += [f"## {SECTION_TITLES[sec]}", ""]
        if sec == "flags":
            for c in items:
                flags = c.b if c.item == "added" else c.a
                lines += ["<details>", f"<summary>{_md(c.item.capitalize())}: {_md(c.note)}</summary>", "",
                          *md_fence(" ".join(flags or []), "text"), "", "</details>", ""]
            continue
        lines += ["| | A | B | Change |", "|---|---|---|---|"]
        lines += [f"| {_md(item_label(c))} | {_md(_values(c)[0])} | {_md(_values(c)[1])} | {_md(c.note)} |"
                  for c in items]
        lines.append("")
    return "\n".join(lines) + "\n"


def render_json(cmp: Comparison) -> str:
    from cpudoctor.model.report import json_text

    return json_text(cmp.to_dict()) + "\n"


RENDERERS = {"text": render_text, "md": render_markdown, "json": render_json}
