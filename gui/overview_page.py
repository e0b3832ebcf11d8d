"""Overview: the chip at a glance, calm and readable, like CPU-Z's first tab.

Everything comes from the model's report (this machine, or a report opened from
a file); the live clock and memory lines follow ``model.sample`` while the page
is visible. Unknown values show a dash with the probe's note as the tooltip.
"""

from __future__ import annotations

import platform
from collections import Counter

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QGridLayout, QHBoxLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout,
                               QWidget)

from cpudoctor.advisor.ranking import ranked
from cpudoctor.gui.common import Badge, Card, severity_dot
from cpudoctor.gui.model import AppModel
from cpudoctor.kits.cpulist import format_cpulist
from cpudoctor.kits.escape import html_escape
from cpudoctor.kits.format import clock, or_unknown, size
from cpudoctor.render import overview as words
from cpudoctor.render.cpu_facts import cpu_facts
from cpudoctor.render.software import environment_words
from cpudoctor.render.topology import cpus_text
from cpudoctor.render.words import DASH, plural, severity, shown_notes
from cpudoctor.model import Finding, Report, arch_family

UNKNOWN = DASH

TOP_FINDINGS = 5
# Rows of render.cpu_facts the Processor card leaves to the page: the model is its heading, the clock its own card.
PROCESSOR_ELSEWHERE = frozenset({"Model", "Clock"})
X86_BADGES = ("AVX2", "FMA", "AVX-512", "VNNI", "BF16", "AMX", "x86-64")
# (badge, Features-line names that mean it, what it is for); the kernel's names, see
# arch/arm64/kernel/cpuinfo.c
ARM_BADGES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("NEON", ("asimd",), "128-bit Advanced SIMD, the floor of Arm PyTorch kernels"),
    ("FP16", ("asimdhp",), "Half-precision vector arithmetic"),
    ("DOTPROD", ("asimddp",), "int8 dot products (quantised inference)"),
    ("I8MM", ("i8mm",), "int8 matrix multiply (faster quantised GEMM)"),
    ("BF16", ("bf16",), "Native bfloat16: bf16 autocast is fast"),
    ("SVE", ("sve", "sve2"), "Scalable Vector Extension (wider vectors on Neoverse V1/V2, A64FX)"),
)
ARM_KEYS = frozenset(k for k, _n, _w in ARM_BADGES)


def ccx_layout(report: Report) -> str:
    """'8 × L3 of 32 MiB, 8 cores each' from the topology's L3 domains."""
    topo = report.topology
    if not topo.l3_domains:
        return "unknown (no cache information)" if not topo.l3_known else "no L3 cache"
    cores_per: Counter[int] = Counter(c.l3 for c in topo.core_list if c.l3 is not None)
    shapes = Counter((len(d.cpus), cores_per.get(i), d.size_bytes) for i, d in enumerate(topo.l3_domains))
    parts = []
    for (threads, cores, l3_bytes), n in sorted(shapes.items(), key=lambda kv: -kv[1]):
        who = plural(cores, "core") if cores else plural(threads, "CPU")
        if cores and threads != cores:
            who += f" / {threads} threads"
        parts.append(f"{n} × L3 {size(l3_bytes, 'size unknown')} ({who} each)")
    return "; ".join(parts)


def numa_layout(report: Report) -> str:
    nodes = report.topology.numa_nodes
    if not nodes:
        return UNKNOWN
    if len(nodes) == 1:
        return "1 node (uniform memory)"
    # the short strided form ("0-76:4"): an interleaved node's plain list has no place to wrap and
    # made the whole page scroll sideways
    detail = ", ".join(f"node {n.id}: CPUs {cpus_text(n.cpus) or 'none'}" for n in nodes[:4])
    more = f", … {len(nodes) - 4} more" if len(nodes) > 4 else ""
    return f"{len(nodes)} nodes — {detail}{more}"


class OverviewPage(QWidget):
    title = "Overview"
    icon_name = "overview"

    navigate = Signal(str)                 # page title to switch to (e.g. "Advisor")
    open_finding = Signal(str)             # a finding's code to show in the Advisor

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self._last_sample = None
        self._build()
        model.report_changed.connect(self.show_report)
        model.findings_changed.connect(self.show_findings)
        model.sample.connect(self.on_sample)
        model.benchmarks_changed.connect(lambda _runs: self._show_peaks(self.model.report))
        if model.report is not None:
            self.show_report(model.report)
        else:
            self.show_skeleton()

    # -- layout -------------------------------------------------------------
    def _build(self) -> None:
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        body = QWidget()
        scroll.setWidget(body)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

        v = QVBoxLayout(body)
        v.setContentsMargins(24, 18, 24, 18)
        v.setSpacing(12)

        self.name = QLabel()
        font = self.name.font()
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        self.name.setFont(font)
        self.name.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.subtitle = QLabel()
        self.subtitle.setStyleSheet("color: palette(placeholder-text);")
        v.addWidget(self.name)
        v.addWidget(self.subtitle)

        badges = QHBoxLayout()
        badges.setSpacing(6)
        self.badges: dict[str, Badge] = {}
        for key in X86_BADGES + tuple(k for k, _f, _w in ARM_BADGES if k not in X86_BADGES):
            b = Badge(key)
            self.badges[key] = b
            badges.addWidget(b)
        badges.addStretch(1)
        self._badge_row = badges
        v.addLayout(badges)
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        v.addWidget(self.verdict)
        # one line that points a new user at one thing: the top finding, or the Inspector for a slow run
        self.start_here = QLabel()
        self.start_here.setWordWrap(True)
        self.start_here.setTextFormat(Qt.TextFormat.RichText)
        self.start_here.linkActivated.connect(self._follow)
        self.start_here.setVisible(False)
        v.addWidget(self.start_here)

        self.findings_card = Card("Top findings")
        self.findings_label = QLabel("The advisor runs once the software check is done.")
        self.findings_label.setWordWrap(True)
        self.findings_label.setTextFormat(Qt.TextFormat.RichText)
        self.findings_label.setOpenExternalLinks(False)
        self.findings_label.linkActivated.connect(lambda _: self.navigate.emit("Advisor"))
        self.findings_card.form.addRow(self.findings_label)
        v.addWidget(self.findings_card)

        grid = QGridLayout()
        grid.setSpacing(12)
        self.cards = {name: Card(name) for name in ("Processor", "Cores and caches", "Clocks", "Memory", "System")}
        grid.addWidget(self.cards["Processor"], 0, 0)
        grid.addWidget(self.cards["Cores and caches"], 0, 1)
        grid.addWidget(self.cards["Clocks"], 1, 0)
        grid.addWidget(self.cards["Memory"], 1, 1)
        grid.addWidget(self.cards["System"], 2, 0, 1, 2)
        grid.setColumnStretch(0, 1)
        grid.setColumnStretch(1, 1)
        v.addLayout(grid)

        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: palette(placeholder-text);")
        self.notes.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        v.addWidget(self.notes)
        v.addStretch(1)

    # -- filling in ---------------------------------------------------------
    def show_skeleton(self) -> None:
        """Before the first report: this machine's architecture's badges and every card's rows, being read."""
        self.name.setText("Reading this machine…")
        self.subtitle.setText(platform.machine() or "")
        self._show_badge_set(is_arm(platform.machine()))
        for badge in self.badges.values():
            badge.set_state("unknown", tooltip=words.READING_TIP)
        for title, rows in words.SKELETON_ROWS.items():
            for label in rows:
                self.cards[title].set(label, words.READING, words.READING_TIP)
        self._align_cards()
        self.findings_label.setText(words.ADVISOR_PENDING)

    def show_report(self, report: Report) -> None:
        cpu, topo = report.cpu, report.topology
        self.name.setText(cpu.brand or "Unknown processor")
        sub = [s for s in (cpu.codename, cpu.microarchitecture, cpu.product_line) if s]
        self.subtitle.setText("  ·  ".join(sub) or "Identity unknown")
        for card in self.cards.values():
            card.clear()        # rows such as "Container limit" or a live "Now" belong to the previous report
        self._badges(report)
        self._show_verdict(report)
        self._show_processor(report)
        self._show_cores(report)
        self._show_clocks(report)
        self._show_memory(report)
        self._show_system(report)
        self._align_cards()
        if not self.model.read_only and self._last_sample is not None:
            self._show_live(self._last_sample)       # a new stage of this machine's report: no "—" flicker
        sw = report.software
        notes = [*cpu.notes, *topo.notes, *((sw.notes if sw else []))]
        self.notes.setText("Probe notes (why a value can be unknown): " + " · ".join(shown_notes(notes))
                           if notes else "")
        self.notes.setVisible(bool(notes))
        self.show_findings(list(report.findings))

    def _align_cards(self) -> None:
        """One value column for every card, as in CPU-Z, instead of each card's own."""
        width = max(card.label_width() for card in self.cards.values())
        for card in self.cards.values():
            card.set_label_width(width)

    def _show_verdict(self, report: Report) -> None:
        isa = report.cpu.isa
        if is_arm(report.cpu.arch):
            # AVX-512 means nothing on Arm: say what the vector unit is instead
            why = isa.datapath_note or ""
            self.verdict.setText(f"<b>SIMD:</b> {html_escape(why)}" if why else "")
        else:
            why = isa.avx512_reason or ""
            if isa.datapath_note:
                why = f"{why} {isa.datapath_note}".strip()
            self.verdict.setText(f"<b>AVX-512:</b> {why}" if why else "")
        self.verdict.setVisible(bool(why))

    def _show_processor(self, report: Report) -> None:
        cpu = report.cpu
        p = self.cards["Processor"]
        # the exports' rows, worded once (render.cpu_facts): the model is the heading, the clocks have a card
        for fact in cpu_facts(cpu):
            if fact.label not in PROCESSOR_ELSEWHERE:
                p.set(fact.label, fact.text, fact.note)

    def _show_cores(self, report: Report) -> None:
        topo = report.topology
        c = self.cards["Cores and caches"]
        threads = f"{topo.logical_cpus} threads" if topo.logical_cpus else ""
        cores = f"{topo.cores} cores" if topo.cores else ""
        c.set("Cores / threads", " / ".join(x for x in (cores, threads) if x) or UNKNOWN)
        c.set("Sockets", or_unknown(topo.packages, UNKNOWN))
        c.set("SMT", UNKNOWN if topo.smt_threads_per_core is None else
              ("off" if topo.smt_threads_per_core == 1 else f"{topo.smt_threads_per_core} threads per core"))
        c.set("CCX (L3) layout", ccx_layout(report))
        total_l3 = sum(d.size_bytes or 0 for d in topo.l3_domains)
        c.set("L3 total", size(total_l3) if total_l3 else UNKNOWN)
        c.set("NUMA", numa_layout(report))
        aff = topo.affinity
        usable = aff.usable_cpus
        if usable is not None and topo.logical_cpus and usable < topo.logical_cpus:
            c.set("Usable here", f"{usable} of {topo.logical_cpus} CPUs (affinity / cgroup limit)")
        else:
            c.set("Usable here", or_unknown(usable and f"{usable} CPUs", UNKNOWN))
        if topo.offline_cpus:
            c.set("Offline CPUs", format_cpulist(topo.offline_cpus))

    def _show_clocks(self, report: Report) -> None:
        cpu, sw = report.cpu, report.software
        k = self.cards["Clocks"]
        k.set("Base", clock(cpu.base_mhz, UNKNOWN))
        k.set("Max (boost)", clock(cpu.max_mhz, UNKNOWN))
        # The clock the kernel reported when the report was made; this machine's live clock replaces it below.
        k.set("Now", f"{clock(cpu.current_mhz)} when probed" if cpu.current_mhz else UNKNOWN,
              f"from {cpu.current_mhz_source}" if cpu.current_mhz_source else "no clock reported")
        os_ = sw.os if sw else None
        k.set("Governor", or_unknown(os_ and os_.governor, UNKNOWN))
        k.set("Driver", or_unknown(os_ and os_.cpufreq_driver, UNKNOWN))
        k.set("Boost", UNKNOWN if not os_ or os_.boost is None else ("on" if os_.boost else "off"))
        self._show_peaks(report)

    def _show_peaks(self, report: Report | None) -> None:
        """The nominal peak (cores × clock × FLOP/cycle) and the measured roof, never one for the other."""
        if report is None:
            return
        from cpudoctor.lab.peak import MachinePeak
        from cpudoctor.lab.roofline import nominal
        from cpudoctor.render.roofline import peak_rows

        try:
            peak = MachinePeak.from_probe(report.cpu, report.topology)
            if self.model.read_only:            # a saved report: its own 'cpu MHz', not this machine's
                peak.cpuinfo_mhz = report.cpu.current_mhz if "cpuinfo" in (report.cpu.current_mhz_source or "") else None
            nom = nominal(peak, "fp32", peak.physical_cores)
        except Exception:  # noqa: BLE001 - a strange report must not break the page
            nom = None
        for label, value, tip in peak_rows(nom, report.benchmarks):
            self.cards["Clocks"].set(label, value, tip)

    def _show_memory(self, report: Report) -> None:
        sw = report.software
        os_ = sw.os if sw else None
        live_only = "a live value: shown for this machine, not stored in saved reports"
        m = self.cards["Memory"]
        m.set("Total", size(os_ and os_.mem_total_bytes, UNKNOWN))
        m.set("Available", size(os_ and os_.mem_available_bytes, UNKNOWN))
        m.set("In use now", UNKNOWN, live_only)
        if os_ and os_.swap_total_bytes is not None:
            m.set("Swap", "none" if os_.swap_total_bytes == 0 else
                  f"{size(os_.swap_used_bytes, UNKNOWN)} used of {size(os_.swap_total_bytes, UNKNOWN)}")
        else:
            m.set("Swap", UNKNOWN)
        m.set("Transparent huge pages", or_unknown(os_ and os_.thp, UNKNOWN))
        if os_ and os_.cgroup_memory_limit_bytes:
            m.set("Container limit", size(os_.cgroup_memory_limit_bytes, UNKNOWN))

    def _show_system(self, report: Report) -> None:
        sw = report.software
        os_ = sw.os if sw else None
        s = self.cards["System"]
        if os_:
            distro = " ".join(x for x in (os_.distro, os_.distro_version) if x)
            s.set("OS", distro or or_unknown(os_.system, UNKNOWN))
            s.set("Kernel", or_unknown(os_.kernel, UNKNOWN))
            s.set("C library", or_unknown(os_.libc, UNKNOWN))
            virt = [x for x in (os_.virtualization, os_.container and f"container: {os_.container}",
                                os_.wsl and f"WSL{os_.wsl}") if x]
            s.set("Runs in", ", ".join(virt) if virt else ("bare metal" if os_.vm is False else UNKNOWN))
        if sw:
            py = sw.python
            if sw.captured:
                s.set("Python environment", "not described (a captured tree has none of this machine's)")
            else:
                # which environment the software facts and findings are about, and why that one
                s.set("Python environment", environment_words(py) if py.version or py.executable else UNKNOWN,
                      f"Interpreter: {py.executable}" if py.executable else "")
            t = sw.torch
            if not sw.children_ran and self.model.read_only:
                s.set("PyTorch", "not checked when this report was made (made with --fast, or from a capture)")
            elif not sw.children_ran:
                s.set("PyTorch", "not checked yet (checked in a child process, never in this one)")
            elif t.status == "ok":
                s.set("PyTorch", f"{t.version} — CPU capability {t.cpu_capability or '?'}, "
                                 f"{plural(t.intra_op_threads, 'thread') if t.intra_op_threads else '? threads'}")
            else:
                s.set("PyTorch", {"not_installed": "not installed"}.get(t.status, t.status)
                      + (f" ({t.signal_name})" if t.signal_name else ""), t.error or "")

    def _show_badge_set(self, arm: bool) -> None:
        """Only one architecture's badges, in its order (an x86 CPU has no NEON, an Arm one no AVX2)."""
        order = [k for k, _n, _w in ARM_BADGES] if arm else list(X86_BADGES)
        for i, key in enumerate(order):          # BF16 is in both sets, at different places
            self._badge_row.removeWidget(self.badges[key])
            self._badge_row.insertWidget(i, self.badges[key])
        for key, badge in self.badges.items():
            badge.setVisible(key in ARM_KEYS if arm else key in X86_BADGES)

    def _badges(self, report: Report) -> None:
        arm = is_arm(report.cpu.arch)
        self._show_badge_set(arm)
        if arm:
            self._arm_badges(report)
            return
        isa = report.cpu.isa
        known = bool(report.cpu.flags)

        def simple(key: str, present: bool, what: str) -> None:
            state = "yes" if present else ("no" if known else "unknown")
            self.badges[key].set_state(state, tooltip=f"{what}: {'yes' if present else 'no' if known else 'unknown'}")

        simple("AVX2", isa.avx2, "256-bit vectors (AVX2), the floor of most PyTorch kernels")
        simple("FMA", isa.fma, "Fused multiply-add")
        a = self.badges["AVX-512"]
        if isa.avx512_usable and isa.avx512_torch_kernels:
            a.set_state("yes", "AVX-512", isa.avx512_reason)
        elif isa.avx512_usable:
            a.set_state("caveat", "AVX-512 (partial)", isa.avx512_reason)
        else:
            a.set_state("no" if known else "unknown", "AVX-512", isa.avx512_reason or "")
        if isa.avx512_subsets:
            a.setToolTip(f"{a.toolTip()}\nSubsets: {', '.join(isa.avx512_subsets)}".strip())
        vnni = [n for n, ok in (("AVX512-VNNI", isa.avx512_vnni), ("AVX-VNNI", isa.avx_vnni)) if ok]
        self.badges["VNNI"].set_state("yes" if vnni else ("no" if known else "unknown"),
                                      tooltip="int8 dot products (quantised inference): " + (", ".join(vnni) or "no"))
        self.badges["BF16"].set_state(
            "yes" if isa.avx512_bf16 else ("no" if known else "unknown"),
            tooltip="Native bfloat16 (AVX512-BF16): bf16 autocast is fast" if isa.avx512_bf16 else
            "No native bfloat16: bf16 autocast is emulated and usually slower than float32")
        amx = self.badges["AMX"]
        amx.set_state("yes" if isa.amx else ("no" if known else "unknown"),
                      "AMX" + (f" ({', '.join(isa.amx)})" if isa.amx else ""),
                      "Advanced Matrix Extensions (tile matrix multiply)")
        lvl = self.badges["x86-64"]
        if isa.x86_64_level:
            lvl.set_state("yes", f"x86-64-v{isa.x86_64_level}", "The psABI micro-architecture level this CPU meets")
        else:
            lvl.set_state("unknown", "x86-64 level unknown", "Not an x86 CPU, or its flags are unknown")

    def _arm_badges(self, report: Report) -> None:
        """Arm's features for deep learning, from /proc/cpuinfo's Features line."""
        flags = set(report.cpu.flags)
        known = bool(flags)
        for key, names, what in ARM_BADGES:
            present = bool(flags & set(names))
            state = "yes" if present else ("no" if known else "unknown")
            self.badges[key].set_state(state, key, f"{what}: {'yes' if present else 'no' if known else 'unknown'}"
                                       f" (flag {' or '.join(names)})")

    def show_findings(self, findings: list[Finding]) -> None:
        if not findings:
            report = self.model.report
            self.start_here.setVisible(False)
            if self.model.read_only:
                self.findings_label.setText("No findings in this report.")
            elif report is not None and self.model.judged and self.model.provisional:
                self.findings_label.setText(words.PROVISIONAL_NONE)
            elif report is not None and self.model.judged:
                self.findings_label.setText("No findings.")
            else:
                self.findings_label.setText(words.ADVISOR_PENDING)     # never "No findings." before it ran
            return
        ordered = ranked(findings)
        text, _target = words.start_here(ordered)
        self.start_here.setText(text)
        self.start_here.setVisible(True)
        problems = [f for f in ordered if f.severity != "ok"]
        passed = len(ordered) - len(problems)
        rows = []
        for f in problems[:TOP_FINDINGS]:
            rows.append(f"{severity_dot(f.severity)} <b>{severity(f.severity).name}</b>"
                        f" &nbsp;{html_escape(f.title)} <span style='color:gray'>({html_escape(f.code)})</span>")
        if not problems:
            rows.append(f"{severity_dot('ok')} No problems found.")
        so_far = (f" <span style='color:gray'>({words.PROVISIONAL_NOTE})</span>"
                  if self.model.provisional and not self.model.read_only else "")
        self.findings_label.setText("<br>".join(rows) + f"<br><a href='advisor'>{findings_count(problems, passed)}"
                                    f": all in the Advisor…</a>{so_far}")

    def _follow(self, link: str) -> None:
        """A "start here" link: a finding opens in the Advisor, a page is shown."""
        kind, _, what = link.partition(":")
        if kind == "finding":
            self.open_finding.emit(what)
        elif kind == "page":
            self.navigate.emit(what)

    def on_sample(self, sample) -> None:
        if self.model.read_only:
            return   # live values describe this machine, not a report opened from a file
        self._last_sample = sample
        if self.isVisible():
            self._show_live(sample)

    def _show_live(self, sample) -> None:
        if sample.freq_mhz:
            lo, hi = min(sample.freq_mhz), max(sample.freq_mhz)
            avg = sum(sample.freq_mhz) / len(sample.freq_mhz)
            span = "" if hi - lo < 50 else f" (from {clock(lo)} to {clock(hi)})"
            self.cards["Clocks"].set("Now", f"{clock(avg)} average{span}")
        else:
            self.cards["Clocks"].set("Now", "unavailable (no clock sensor here)")
        if sample.mem_total_bytes:
            self.cards["Memory"].set(
                "In use now", f"{size(sample.mem_used_bytes, UNKNOWN)} of {size(sample.mem_total_bytes, UNKNOWN)}")


def findings_count(problems: list[Finding], passed: int) -> str:
    """``5 findings, 18 checks passed``: a passed check is not a finding."""
    return f"{plural(len(problems), 'finding')}, {plural(passed, 'check passed', 'checks passed')}"


def is_arm(arch: str | None) -> bool:
    """True for 64/32-bit Arm, whose /proc/cpuinfo lists Features instead of x86 flags (the model's answer)."""
    return arch_family(arch) == "arm"
