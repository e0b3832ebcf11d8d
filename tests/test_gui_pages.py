"""Overview, Flags and Monitor pages, built offscreen and fed through the AppModel."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QApplication, QWidget
import pytest

from gui_support import no_qt_leaks  # noqa: F401 - fixture

from conftest import MANIFEST, machine_root
from cpudoctor.gui import flags_page as fp
from cpudoctor.gui.flags_page import CAT, FLAG, MEANING, PRESENT_ROLE, SHOW_MISSING, SHOW_PRESENT, FlagsPage
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.monitor_model import CAPACITY, MonitorHistory, cpu_groups
from cpudoctor.gui.monitor_page import MonitorPage
from cpudoctor.gui.overview_page import OverviewPage, ccx_layout, numa_layout
from cpudoctor.model import CpuInfo, IsaVerdict
from cpudoctor.probes import probe_cpu
from cpudoctor.probes.live.sample import Sample
from cpudoctor.probes import probe_topology
from cpudoctor.model import Finding, Report

ZEN_TREE = "hwloc-64amd64-4s2n4ca2co"          # 4 sockets, 8 L3 domains of 8 CPUs (Bulldozer: "L3", not "CCX")
ARM_TREE = "hwloc-128arm-2pa2n8cluster4co"     # Kunpeng 920: asimd, asimdhp, asimddp; no SVE


def zen4_report() -> Report:
    isa = IsaVerdict(avx512_usable=True, avx512_torch_kernels=True, avx2=True, fma=True, avx512_vnni=True,
                     avx512_bf16=True, x86_64_level=4, avx512_subsets=["F", "CD", "BW", "DQ", "VL", "BF16"],
                     avx512_reason="avx512f and avx512cd are reported, so the OS saves the ZMM registers.",
                     datapath_note="Zen4 executes 512-bit ops on 256-bit units.")
    cpu = CpuInfo(vendor="AMD", vendor_id="AuthenticAMD", brand="AMD Ryzen 9 7950X 16-Core Processor",
                  family=25, model=97, stepping=2, microarchitecture="zen4", codename="Raphael",
                  product_line="Ryzen desktop", arch="x86_64", max_mhz=5881.0, hypervisor=False,
                  flags=["fpu", "sse2", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq",
                         "avx512vl", "avx512_bf16", "avx512_vnni", "zz_future_flag"], isa=isa)
    return Report(cpu=cpu, topology=probe_topology(machine_root(ZEN_TREE)))


@pytest.fixture
def model() -> AppModel:
    return AppModel()


def _page(qtbot, cls, model):
    page = cls(model)
    qtbot.addWidget(page)
    page.resize(1100, 800)
    page.show()
    qtbot.waitExposed(page)
    return page


# -- Overview ---------------------------------------------------------------

def test_overview_shows_the_chip(qtbot, model, corpus):
    page = _page(qtbot, OverviewPage, model)
    assert "Reading" in page.name.text()
    model.set_report(zen4_report())
    assert page.name.text() == "AMD Ryzen 9 7950X 16-Core Processor"
    assert "Raphael" in page.subtitle.text() and "zen4" in page.subtitle.text()
    assert {k: b.state for k, b in page.badges.items() if b.isVisibleTo(page)} == {
        "AVX2": "yes", "FMA": "yes", "AVX-512": "yes", "VNNI": "yes", "BF16": "yes", "AMX": "no", "x86-64": "yes"}
    assert page.badges["x86-64"].text() == "x86-64-v4"
    assert "256-bit units" in page.verdict.text()
    truth = MANIFEST["machines"][ZEN_TREE]["ground_truth"]
    cores = page.cards["Cores and caches"]
    assert cores.value("CCX (L3) layout").startswith(f"{truth['l3_caches']} × L3 6 MiB")
    assert cores.value("NUMA").startswith(f"{truth['numa_nodes']} nodes")
    assert cores.value("Sockets") == str(truth["packages"])
    assert cores.value("L3 total") == "48 MiB"
    assert page.cards["Clocks"].value("Max (boost)") == "5.88 GHz"
    # the value columns of all cards line up
    def value_x() -> set[int]:
        return {card.row(label).mapTo(card, card.row(label).rect().topLeft()).x()
                for card in page.cards.values() for label in list(card._values)[:1]}

    qtbot.waitUntil(lambda: len(value_x()) == 1 and min(value_x()) > 100)


def test_overview_arm_shows_arm_features_not_x86_ones(qtbot, model, corpus):
    """An Arm report shows NEON/DOTPROD/SVE..., not grey AVX pills and an 'x86-64 level ?'."""
    page = _page(qtbot, OverviewPage, model)
    model.set_report(zen4_report())
    cpu = probe_cpu(machine_root(ARM_TREE))
    model.set_report(Report(cpu=cpu, topology=probe_topology(machine_root(ARM_TREE))))
    shown = {k: b.state for k, b in page.badges.items() if b.isVisibleTo(page)}
    assert shown == {"NEON": "yes", "FP16": "yes", "DOTPROD": "yes", "I8MM": "no", "BF16": "no", "SVE": "no"}
    row = [page._badge_row.itemAt(i).widget() for i in range(page._badge_row.count())]
    assert [w.text() for w in row if w is not None and w.isVisibleTo(page)] == [
        "NEON", "FP16", "DOTPROD", "I8MM", "BF16", "SVE"]
    assert "AVX" not in page.verdict.text() and "NEON" in page.verdict.text()
    assert all("?" not in b.text() for b in page.badges.values())
    model.set_report(zen4_report())                     # and back: x86 pills again
    assert page.badges["x86-64"].isVisibleTo(page) and not page.badges["NEON"].isVisibleTo(page)


def test_layout_texts_on_real_trees(corpus):
    truth = MANIFEST["machines"][ZEN_TREE]["ground_truth"]
    report = Report(topology=probe_topology(machine_root(ZEN_TREE)))
    assert ccx_layout(report) == f"{truth['l3_caches']} × L3 6 MiB (8 cores each)"
    assert numa_layout(report).startswith(f"{truth['numa_nodes']} nodes — node 0: CPUs 0-7, node 1: CPUs 8-15")
    assert ccx_layout(Report()) == "unknown (no cache information)"


def test_overview_partial_avx512_is_amber(qtbot, model):
    page = _page(qtbot, OverviewPage, model)
    r = Report(cpu=CpuInfo(flags=["avx512f", "avx512cd"], isa=IsaVerdict(
        avx512_usable=True, avx512_torch_kernels=False, avx2=True, avx512_reason="Knights Landing: F+CD+ER+PF only")))
    model.set_report(r)
    assert page.badges["AVX-512"].state == "caveat"
    assert "partial" in page.badges["AVX-512"].text()


def test_overview_top_findings_in_severity_order(qtbot, model):
    page = _page(qtbot, OverviewPage, model)
    model.set_report(zen4_report())
    sev = ["info", "ok", "warning", "error", "info", "warning", "ok", "info"]
    model.set_findings([Finding(code=f"T{i:03d}", symbol=f"t{i}", category="test", severity=s, title=f"Title {i}")
                        for i, s in enumerate(sev)])
    text = page.findings_label.text()
    assert text.index("Title 3") < text.index("Title 2") < text.index("Title 5") < text.index("Title 0")
    # the top five problems, and a link to the rest; a passed check is not a finding
    assert "Title 1" not in text and "Title 6" not in text and "6 findings, 2 checks passed" in text


def test_overview_live_clock_and_memory(qtbot, model):
    page = _page(qtbot, OverviewPage, model)
    model.set_report(zen4_report())
    model.sample.emit(Sample(t=1.0, cpu_ids=[0, 1], cpu_percent=[10, 20], freq_mhz=[3000.0, 5000.0],
                             mem_total_bytes=64 * 2**30, mem_used_bytes=16 * 2**30))
    assert page.cards["Clocks"].value("Now").startswith("4.00 GHz average")
    assert page.cards["Memory"].value("In use now") == "16 GiB of 64 GiB"
    model.sample.emit(Sample(t=2.0, cpu_ids=[0, 1], cpu_percent=[10, 20], freq_mhz=None))
    assert "unavailable" in page.cards["Clocks"].value("Now")


def test_overview_saved_report_drops_the_previous_reports_live_values_and_rows(qtbot, model):
    """Opening a saved report must not keep this machine's 'Now' clock, memory in use or extra rows."""
    from cpudoctor.model import OsInfo, Software

    page = _page(qtbot, OverviewPage, model)
    live = zen4_report()
    live.software = Software(os=OsInfo(cgroup_memory_limit_bytes=8 * 2**30))
    model.set_report(live)
    model.sample.emit(Sample(t=1.0, cpu_ids=[0, 1], cpu_percent=[10, 20], freq_mhz=[3000.0, 5000.0],
                             mem_total_bytes=64 * 2**30, mem_used_bytes=16 * 2**30))
    assert page.cards["Memory"].value("Container limit") == "8 GiB"
    assert page.cards["Clocks"].value("Now").startswith("4.00 GHz")
    model.set_report(live)                      # the next stage of this machine's report: no "—" flicker
    assert page.cards["Clocks"].value("Now").startswith("4.00 GHz")
    model.set_report(zen4_report(), read_only=True, label="saved.json")
    model.sample.emit(Sample(t=2.0, cpu_ids=[0, 1], cpu_percent=[10, 20], freq_mhz=[3000.0, 5000.0],
                             mem_total_bytes=64 * 2**30, mem_used_bytes=16 * 2**30))
    assert page.cards["Clocks"].value("Now") == "—" and page.cards["Memory"].value("In use now") == "—"
    assert page.cards["Memory"].value("Container limit") == ""          # that row left with its report
    saved = zen4_report()
    saved.software = Software(children_ran=False)
    model.set_report(saved, read_only=True, label="fast.json")
    assert "yet" not in page.cards["System"].value("PyTorch")           # a saved report will never be checked


# -- Flags ------------------------------------------------------------------

def _visible(page: FlagsPage, column: int) -> list[str]:
    return [page.proxy.index(r, column).data() for r in range(page.proxy.rowCount())]


def test_flags_table_filters(qtbot, model):
    page = _page(qtbot, FlagsPage, model)
    model.set_report(zen4_report())
    total = page.source.rowCount()
    assert total >= 13
    page.search.setText("avx512")
    rows = list(zip(_visible(page, FLAG), _visible(page, MEANING)))
    assert rows and all("avx512" in f"{f} {m}".lower() for f, m in rows)
    assert "avx512f" in [f for f, _ in rows]
    page.show_box.setCurrentText(SHOW_PRESENT)
    present = [page.proxy.index(r, FLAG).data(PRESENT_ROLE) for r in range(page.proxy.rowCount())]
    assert present and all(p is True for p in [page.proxy.index(r, 2).data(PRESENT_ROLE)
                                                 for r in range(page.proxy.rowCount())])
    page.show_box.setCurrentText(SHOW_MISSING)
    assert "avx512f" not in _visible(page, FLAG)
    page.search.clear()
    page.show_box.setCurrentIndex(0)
    assert page.proxy.rowCount() == total
    assert page.count.text() == f"{total} of {total} flags"
    # category filter
    idx = page.category.findData("other")
    page.category.setCurrentIndex(idx)
    assert set(_visible(page, CAT)) == {"Other"} and "zz_future_flag" in _visible(page, FLAG)
    # issue 28, 11: the Category column reads as words, never flags.json's lowercase keys
    page.category.setCurrentIndex(0)
    titles = set(_visible(page, CAT))
    if page.categories:
        assert "Vector instruction sets" in titles and "simd" not in titles
    assert all(t[:1].isupper() for t in titles)


def test_flags_meanings_from_resources_and_unknown_flag(qtbot, model):
    page = _page(qtbot, FlagsPage, model)
    model.set_report(zen4_report())
    page.search.setText("zz_future_flag")
    assert _visible(page, FLAG) == ["zz_future_flag"] and _visible(page, MEANING) == [""]
    if page.meanings:                              # resources/flags.json is installed
        page.search.setText("avx2")
        meanings = dict(zip(_visible(page, FLAG), _visible(page, MEANING)))
        assert meanings["avx2"] == page.meanings["avx2"][1] != ""
        # ARM-only flags are not listed for an x86 CPU
        page.search.setText("asimd")
        assert "asimd" not in _visible(page, FLAG)


def test_flag_meanings_follow_the_architecture_and_vendor(qtbot, model, corpus):
    """sme on an AMD CPU is Secure Memory Encryption (security, not deep learning); on Arm it is the matrix engine."""
    from cpudoctor.render.cpu import describe_flag, flag_groups

    assert describe_flag("sme", "x86_64", "AMD")[0] == "security"
    assert "Secure Memory Encryption" in describe_flag("sme", "x86_64", "AMD")[1]
    assert describe_flag("sme", "aarch64")[0] == "arm" and "Matrix" in describe_flag("sme", "aarch64")[1]
    assert describe_flag("cpuid", "aarch64")[0] == "arm_system" and describe_flag("cpuid", "x86_64")[0] == "system"
    assert "sme" in flag_groups(["sme", "avx2"], "x86_64", "AMD")["security"]
    page = _page(qtbot, FlagsPage, model)
    report = zen4_report()
    report.cpu.flags = [*report.cpu.flags, "sme"]
    model.set_report(report)
    page.search.setText("sme")
    rows = dict(zip(_visible(page, FLAG), zip(_visible(page, CAT), _visible(page, MEANING))))
    assert rows["sme"][0] == "Security and speculation mitigations" and "Secure Memory Encryption" in rows["sme"][1]
    arm = probe_cpu(machine_root(ARM_TREE))
    arm.flags = [*arm.flags, "sme"]
    model.set_report(Report(cpu=arm, topology=probe_topology(machine_root(ARM_TREE))))
    page.search.setText("sme")
    rows = dict(zip(_visible(page, FLAG), zip(_visible(page, CAT), _visible(page, MEANING))))
    assert rows["sme"][0] == "ARM SIMD, matrix and atomics" and "Scalable Matrix Extension" in rows["sme"][1]


def test_markdown_export_words_sme_for_the_report_cpu():
    from cpudoctor.render.markdown import flags_lines

    report = zen4_report()
    report.cpu.flags = [*report.cpu.flags, "sme"]
    text = "\n".join(flags_lines(report))
    assert "Scalable Matrix" not in text and "`sme`" in text


def test_flags_without_flags_json(qtbot, model, monkeypatch):
    from cpudoctor.gui import flags_page
    from cpudoctor.knowledge import FlagCatalogue

    # The real loader on a file that is not there (a broken installation).
    monkeypatch.setattr(flags_page, "FLAGS", FlagCatalogue("no_such_flags.json", "missing on purpose"))
    page = _page(qtbot, FlagsPage, model)
    model.set_report(zen4_report())
    assert page.source.rowCount() == 13            # exactly the CPU's flags, meanings empty
    assert set(_visible(page, MEANING)) == {""}


def test_flags_avx512_verdict_in_words(qtbot, model):
    page = _page(qtbot, FlagsPage, model)
    model.set_report(zen4_report())
    assert "usable" in page.verdict_title.text() and "PyTorch" in page.verdict_title.text()
    text = page.verdict_text.text()
    assert "ZMM" in text and "F, BW, DQ and VL" in text and "256-bit units" in text
    model.set_report(Report(cpu=CpuInfo(flags=["avx2"], isa=IsaVerdict(avx2=True, avx512_reason="no avx512f"))))
    assert page.verdict_title.text() == "AVX-512: not usable"


def test_flags_arm_verdict_speaks_of_neon_not_avx512(qtbot, model, corpus):
    page = _page(qtbot, FlagsPage, model)
    model.set_report(Report(cpu=probe_cpu(machine_root(ARM_TREE))))
    assert page.verdict_title.text() == "SIMD: 128-bit vectors"
    text = page.verdict_text.text()
    assert "AVX" not in text and "NEON" in text and "dot product" in text and "No native bf16" in text


def test_flags_rows_follow_the_wrapped_meanings(qtbot, model):
    """Row heights are redone at the table's real width: one-line meanings get one-line rows."""
    page = _page(qtbot, FlagsPage, model)
    model.set_report(zen4_report())
    page.resize(1600, 800)
    qtbot.waitUntil(lambda: page.table.rowHeight(0) <= page.table.fontMetrics().lineSpacing() + 12)
    heights = {page.table.rowHeight(r) for r in range(page.proxy.rowCount())}
    assert len(heights) <= 2                       # wide window: almost all one line, none clipped


def test_flag_catalogue_is_the_knowledge_layers():
    """The page reads the one flag catalogue (schema-checked), not a file of its own."""
    from cpudoctor.knowledge import FLAGS

    meanings, categories, aliases = fp.load_flag_catalogue()
    assert meanings["avx2"] == FLAGS.describe("avx2") and meanings["avx2"][1]
    assert list(categories) == list(FLAGS.categories) and aliases["sse3"] == "pni"


# -- Monitor ----------------------------------------------------------------

def _samples(n: int, cpus: list[int], hz: float = 2.0, temps: bool = True, freq: bool = True):
    for i in range(n):
        load = [float((i + c) % 101) for c in range(len(cpus))]
        yield Sample(t=100.0 + i / hz, cpu_ids=cpus, cpu_percent=load,
                     freq_mhz=[3000.0 + c for c in cpus] if freq else None,
                     temps_c={"k10temp Tctl": 50.0 + i % 10, "k10temp Tccd1": 45.0} if temps else {},
                     mem_total_bytes=32 * 2**30, mem_used_bytes=8 * 2**30,
                     swap_total_bytes=0, swap_used_bytes=0)


def test_cpu_groups_follow_l3_domains(corpus):
    report = zen4_report()
    truth = MANIFEST["machines"][ZEN_TREE]["ground_truth"]
    groups = cpu_groups(report, list(range(64)))
    assert [g.label for g in groups] == [f"L3 {i}" for i in range(truth["l3_caches"])]   # CCX is a Zen word
    assert [f"{g.cpus[0]}-{g.cpus[-1]}" for g in groups] == truth["l3_pu_sets"]
    assert cpu_groups(None, [0, 1, 2])[0].cpus == [0, 1, 2]


def test_monitor_plots_follow_injected_samples(qtbot, model):
    model.set_report(zen4_report())
    page = _page(qtbot, MonitorPage, model)
    cpus = list(range(64))
    for s in _samples(300, cpus):                  # 150 s at 2 Hz; the window shows 120 s
        model.sample.emit(s)
    page.redraw()                                  # the charts may be one redraw interval behind the tiles
    img = page.heat.image
    assert img.shape == (64, 241)                  # CPUs x samples in the last 120 s
    assert img[5, -1] == (299 + 5) % 101           # row = CPU in CCX order, last column = newest
    x, y = page.total_curve.getData()
    assert len(x) == 241 and x[-1] == 0 and x[0] == -120
    assert y[-1] == pytest.approx(np.mean([(299 + c) % 101 for c in cpus]))
    assert not page.is_unavailable("temp") and not page.is_unavailable("clock")
    assert set(page.temp_curves) == {"k10temp Tctl", "k10temp Tccd1"}
    ticks = page.heat_plot.getAxis("left")._tickLevels[0]
    assert [label for _, label in ticks] == [f"L3 {i}" for i in range(8)]
    assert page.tiles["load"].text() == f"{np.mean([(299 + c) % 101 for c in cpus]):.0f} %"
    assert page.tiles["temp"].text() == "59 °C" and page.tiles["clock"].text() == "3.03 GHz"
    assert page.tiles["memory"].text() == "8 GiB" and "of 32 GiB" in page.tiles["memory_detail"].text()


def test_monitor_missing_sensors_are_unavailable_not_zero(qtbot, model):
    page = _page(qtbot, MonitorPage, model)
    for s in _samples(10, [0, 1], temps=False, freq=False):
        model.sample.emit(s)
    assert page.is_unavailable("temp") and page.is_unavailable("clock")
    _, y = page.clock_avg.getData()
    assert np.isnan(y).all()                       # gaps, never a false 0 GHz
    assert page.tiles["temp"].text() == "unavailable" and page.tiles["clock"].text() == "unavailable"


def test_monitor_pause_freezes_and_hidden_page_does_not_draw(qtbot, model):
    page = _page(qtbot, MonitorPage, model)
    with qtbot.waitSignal(page.paused_changed):
        page.pause_button.click()
    for s in _samples(5, [0, 1]):
        model.sample.emit(s)
    assert len(page.history.t) == 0
    page.pause_button.click()
    page.hide()
    for s in _samples(5, [0, 1]):
        model.sample.emit(s)
    assert len(page.history.t) == 5 and page.heat.image is None     # stored, not drawn
    page.show()
    qtbot.waitExposed(page)
    assert page.heat.image.shape == (2, 5)


def test_monitor_names_series_in_titles_not_in_legends_over_the_lines(qtbot, model):
    """A legend inside a plot covers the newest samples; the series are named in the title instead."""
    page = _page(qtbot, MonitorPage, model)
    for plot in (page.total_plot, page.clock_plot, page.temp_plot, page.mem_plot):
        assert plot.legend is None
    assert page.mem_plot.series_names == ["used", "swap used"]
    assert page.clock_plot.series_names == ["average", "fastest core"]
    assert "fastest core" in page.clock_plot.titleLabel.text
    for s in _samples(3, [0, 1]):
        model.sample.emit(s)
    assert page.temp_plot.series_names == ["k10temp Tctl", "k10temp Tccd1"]


def test_monitor_heat_strip_uses_the_map_colour_scale(qtbot, model):
    from cpudoctor.gui.load_scale import lookup_table, rgb_at

    page = _page(qtbot, MonitorPage, model)
    lut = page.heat.lut
    assert lut.shape == (256, 3)
    assert tuple(lut[0]) == rgb_at(0) and tuple(lut[-1]) == rgb_at(100)
    assert (lut == lookup_table(False)).all()
    assert page.heat_scale.isVisibleTo(page)                      # the colour legend beside the strip


def test_decimate_keeps_peaks_and_short_series():
    from cpudoctor.gui.monitor_model import decimate

    x = np.arange(10.0)
    assert decimate(x, x)[0] is x
    x = np.linspace(-900, 0, 9000)
    y = np.zeros(9000)
    y[4321] = 100.0
    xs, ys = decimate(x, y, 800)
    assert len(xs) == 800 and ys.max() == 100.0 and xs[0] == -900 and xs[-1] == 0


def test_monitor_rate_choice_is_signalled(qtbot, model):
    page = _page(qtbot, MonitorPage, model)
    with qtbot.waitSignal(page.rate_changed) as got:
        page.rate_box.setCurrentIndex(page.rate_box.findData(10.0))
    assert got.args == [10.0]
    page.set_rate(0.5)
    assert page.rate_hz == 0.5


def test_history_stays_bounded_after_100k_samples():
    h = MonitorHistory()
    gen = _samples(100_000, list(range(16)))
    first = next(gen)
    h.append(first)
    size = h.nbytes
    for s in gen:
        h.append(s)
    assert len(h.t) == CAPACITY and len(h.per_cpu) == CAPACITY
    assert h.nbytes == size
    n, x = h.window(120)
    assert n == 241 and x[0] == -120.0


def test_history_resets_when_cpus_change():
    h = MonitorHistory()
    for s in _samples(5, [0, 1, 2, 3]):
        h.append(s)
    for s in _samples(3, [0, 1, 3]):               # CPU 2 went offline
        h.append(s)
    assert h.cpu_ids == [0, 1, 3] and len(h.t) == 3 and h.per_cpu.width == 3


def test_heat_columns_stay_true_to_time_across_rate_changes_and_pauses():
    from cpudoctor.gui.monitor_model import heat_columns

    slow = np.arange(-120.0, -60.0, 0.5)                   # 2 Hz for a minute
    fast = np.arange(-60.0, 0.0 + 1e-9, 0.1)                # then 10 Hz
    x = np.concatenate([slow, fast])
    rows = np.where(x < -60, 10.0, 90.0)[:, None]           # one CPU: 10 % then 90 %
    img, x0 = heat_columns(x, rows, max_columns=240)
    assert x0 == -120.0 and img.shape == (1, 240)
    # half the columns (time), not 120 of 720 samples, show the slow minute
    assert (img[0, :119] == 10.0).all() and (img[0, 121:] == 90.0).all()

    paused = np.concatenate([np.arange(-120.0, -100.0, 0.5), np.arange(-20.0, 0.0 + 1e-9, 0.5)])
    img, _ = heat_columns(paused, np.ones((paused.size, 2)), max_columns=120)
    centres = -120.0 + (np.arange(120) + 0.5)
    in_pause = (centres > -100.5) & (centres <= -20.0)        # the interval (last before, first after]
    assert np.isnan(img[:, in_pause]).all() and not np.isnan(img[:, ~in_pause]).any()


def test_lines_break_where_the_monitor_was_paused(qtbot, model):
    page = _page(qtbot, MonitorPage, model)
    samples = list(_samples(40, [0, 1]))
    for s in samples[:10]:
        model.sample.emit(s)
    page.set_paused(True)
    for s in samples[10:30]:
        model.sample.emit(s)                       # dropped while paused
    page.set_paused(False)
    for s in samples[30:]:
        model.sample.emit(s)
    page.redraw()
    x, y = page.total_curve.getData()
    assert len(x) == 21 and np.isnan(y[10]) and not np.isnan(np.delete(y, 10)).any()


def test_card_rows_that_wrap_get_the_height_of_their_lines(qtbot):
    """A wrapped value ('yes — the hypervisor may hide CPU features') must not lose its second line."""
    from cpudoctor.gui.common import Card

    card = Card("Processor")
    qtbot.addWidget(card)
    card.set("Vendor", "AMD")
    card.set("Virtual machine", "yes — the hypervisor may hide CPU features " * 3)
    card.resize(260, 200)
    card.show()
    qtbot.waitExposed(card)
    value = card.row("Virtual machine")
    one_line = card.row("Vendor").sizeHint().height()
    assert value.minimumHeight() >= 2 * one_line - 2
    assert value.minimumHeight() == value.heightForWidth(value.width())


def test_monitor_ticks_repaint_without_relayout(qtbot, model):
    """A sample changes tile texts and curves, never the page's layout: a relayout at 2 Hz is most of an idle
    window's cost (benchmarks/gui_overhead.py measures the whole)."""
    from PySide6.QtCore import QEvent, QObject

    class Count(QObject):
        n = 0

        def eventFilter(self, obj, event):  # noqa: N802 - Qt API
            if event.type() == QEvent.Type.LayoutRequest:
                Count.n += 1
            return False

    page = _page(qtbot, MonitorPage, model)
    model.set_report(zen4_report())
    stream = list(_samples(40, list(range(8))))
    for s in stream[:20]:
        model.sample.emit(s)
    qtbot.wait(50)
    counter = Count()
    for w in [page, *page.findChildren(QWidget)]:
        w.installEventFilter(counter)
    Count.n = 0
    for s in stream[20:]:
        model.sample.emit(s)
        QApplication.processEvents()
    assert Count.n == 0
    assert page.tiles["load"].text().endswith("%")


def test_monitor_tiles_follow_every_sample_and_charts_every_visible_move(qtbot, model):
    """Tiles show each sample; the scrolling charts redraw once new data moves them a few pixels
    (their repaint is most of the Monitor's cost), and never lag more than CHART_MAX_WAIT_S."""
    from cpudoctor.gui.monitor_page import CHART_MAX_WAIT_S, CHART_MIN_MOVE_PX

    page = _page(qtbot, MonitorPage, model)
    interval = page.chart_interval()
    width = page.heat_plot.getViewBox().width()
    assert interval == pytest.approx(min(CHART_MAX_WAIT_S, page.window_s / width * CHART_MIN_MOVE_PX))
    stream = list(_samples(40, [0, 1]))
    drawn = []
    for s in stream:
        model.sample.emit(s)
        assert page.tiles["load"].text() == f"{s.total_percent:.0f} %"           # every sample
        drawn.append(page.heat.image.shape[1])
    expected, last = 0, None
    for s in stream:                                                        # one redraw per interval of data
        if last is None or s.t - last >= interval - 1e-6:
            expected, last = expected + 1, s.t
    assert len(set(drawn)) == expected
    assert interval > 0.5 and expected < len(stream)          # at 2 Hz in this window: not every sample
    page.window_box.setCurrentIndex(page.window_box.findData(900))          # 15 min: capped wait
    assert page.chart_interval() <= CHART_MAX_WAIT_S
    page.set_paused(True)                                                   # a pause shows everything taken
    assert page.heat.image.shape[1] == len(page.history.t)


# -- issue 28, 8: the first launch -------------------------------------------

def test_overview_first_launch_is_a_skeleton_of_this_architecture(qtbot, model):
    """x86 and ARM badges were both shown greyed and the cards stayed empty until the report came."""
    import platform

    from cpudoctor.render.overview import READING, SKELETON_ROWS

    page = _page(qtbot, OverviewPage, model)
    shown = {k for k, b in page.badges.items() if b.isVisibleTo(page)}
    arm = platform.machine().lower().startswith(("aarch64", "arm"))
    assert ("NEON" in shown) == arm and ("AVX2" in shown) != arm
    for title, rows in SKELETON_ROWS.items():
        assert all(page.cards[title].value(label) == READING for label in rows), title
    assert page.findings_label.text() == "The advisor runs once the software check is done."
    assert not page.start_here.isVisibleTo(page)


def test_overview_never_says_no_findings_before_the_advisor_ran(qtbot, model):
    from cpudoctor.model import Software

    page = _page(qtbot, OverviewPage, model)
    stage = zen4_report()
    stage.software = Software(children_ran=True)
    model.set_report(stage, judged=False)               # a pipeline stage: the advisor has not run yet
    assert "No findings" not in page.findings_label.text() and "advisor runs" in page.findings_label.text()
    model.set_findings([])                              # the advisor ran and found nothing at all
    assert page.findings_label.text() == "No findings."


def test_overview_start_here_points_at_the_top_finding_or_the_inspector(qtbot, model):
    page = _page(qtbot, OverviewPage, model)
    report = zen4_report()
    report.findings = [Finding("THR001", "omp-unset", "threads", "warning", "OMP_NUM_THREADS is not set"),
                       Finding("ISA002", "best-kernels", "isa", "ok", "PyTorch runs its best kernels")]
    model.set_report(report)
    assert page.start_here.isVisibleTo(page) and "OMP_NUM_THREADS is not set" in page.start_here.text()
    with qtbot.waitSignal(page.open_finding) as opened:
        page.start_here.linkActivated.emit("finding:THR001")
    assert opened.args == ["THR001"]
    model.set_findings([report.findings[1]])
    assert "Inspect the running job" in page.start_here.text()
    with qtbot.waitSignal(page.navigate) as nav:
        page.start_here.linkActivated.emit("page:Inspector")
    assert nav.args == ["Inspector"]


def test_temperature_legend_names_sensors_shortly():
    """Issue 28, 6: "Temperature ━ coretemp Package id 0 ━ coretemp Package id 1" did not fit its plot."""
    from cpudoctor.gui.monitor_model import sensor_name

    assert sensor_name("coretemp Package id 0") == "package 0"
    assert sensor_name("k10temp Tccd1") == "Tccd1" and sensor_name("acpitz") == "acpitz"


def test_total_load_axis_labels_0_to_100(qtbot, model):
    """Issue 28, 6: the Total-load axis stopped at 80."""
    page = _page(qtbot, MonitorPage, model)
    axis = page.total_plot.getAxis("left")
    labelled = [value for value, _text in axis._tickLevels[0]]
    lo, hi = page.total_plot.viewRange()[1]
    assert labelled == [0, 25, 50, 75, 100] and lo < 0 and hi > 100
