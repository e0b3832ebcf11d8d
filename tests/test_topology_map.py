"""Topology map widget and page, offscreen with pytest-qt."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QGuiApplication

from conftest import machine_root
from cpudoctor.advisor.pinning import l3_cpu_sets, pinning_plan
from cpudoctor.gui.model import AppModel
from cpudoctor.gui.topology_layout import PU_W
from cpudoctor.gui.topology_map import BoxItem, MapColours, PUItem, TopologyMap
from cpudoctor.gui.topology_page import TopologyPage
from cpudoctor.probes.live.sample import Sample
from cpudoctor.model import Affinity, Core, L3Domain, NumaNode, Package, Topology
from cpudoctor.probes.cpu.topology import probe_topology
from cpudoctor.model import Report
from gui_support import no_qt_leaks  # noqa: F401  (autouse fixture)

LARGE = "hwloc-128arm-2pa2n8cluster4co"


def epyc_2x64() -> Topology:
    """2 x 64-core EPYC, SMT on, NPS1: 16 CCXs of 8 cores, sibling of c is c + 128."""
    n = 128
    cores = [Core(i // 64, i % 64, [i, i + n], l3=i // 8, numa=i // 64) for i in range(n)]
    l3 = [L3Domain(sorted(c for i in range(j * 8, j * 8 + 8) for c in (i, i + n)), 32 << 20) for j in range(16)]
    numa = [NumaNode(k, sorted(c for co in cores if co.numa == k for c in co.cpus),
                     [10 if k == m else 32 for m in range(2)]) for k in range(2)]
    return Topology(packages=2, cores=n, logical_cpus=2 * n, l3_domains=l3, numa_nodes=numa,
                    online_cpus=list(range(2 * n)), smt_threads_per_core=2,
                    package_list=[Package(k, numa[k].cpus) for k in range(2)], core_list=cores,
                    affinity=Affinity(allowed_cpus=list(range(2 * n)), usable_cpus=2 * n),
                    l3_known=True, source="sysfs", vendor="AuthenticAMD")


@pytest.fixture
def large_map(qtbot):
    topo = probe_topology(machine_root(LARGE), live=False)
    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(1100, 700)
    m.show()
    m.set_topology(topo)
    return m, topo


def _boxes(m: TopologyMap, kind: str) -> list[BoxItem]:
    return sorted((i for i in m.scene().items() if isinstance(i, BoxItem) and i.kind == kind),
                  key=lambda b: b.cpus[0])


def test_builds_for_largest_corpus_machine(large_map):
    m, topo = large_map
    pus = [i for i in m.scene().items() if isinstance(i, PUItem)]
    assert len(pus) == topo.logical_cpus == 128
    assert sorted(p.cpu for p in pus) == topo.online_cpus
    assert len(_boxes(m, "core")) == topo.cores
    assert len(_boxes(m, "l3")) == len(topo.l3_domains) == 4
    assert len(_boxes(m, "numa")) == len(topo.numa_nodes) == 4
    assert len(_boxes(m, "package")) == topo.packages == 2
    # every PU sits inside its core's box, every core inside its L3's box
    for core in _boxes(m, "core"):
        for pu in core.childItems():
            assert core.sceneBoundingRect().contains(pu.sceneBoundingRect())
    for l3 in _boxes(m, "l3"):
        cores = [c for c in _boxes(m, "core") if set(c.cpus) <= set(l3.cpus)]
        assert len(cores) == len(l3.cpus)      # Kunpeng: 1 thread per core
        assert all(l3.sceneBoundingRect().contains(c.sceneBoundingRect()) for c in cores)


def test_layout_fits_the_window_and_wraps(qtbot):
    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(1000, 700)
    m.show()
    m.set_topology(epyc_2x64())
    m.fit()
    rect = m.scene().sceneRect()
    vp = m.viewport().size()
    assert rect.width() * m.zoom() <= vp.width() + 1 and rect.height() * m.zoom() <= vp.height() + 1
    assert m.zoom() >= 0.6                  # still legible: PU numbers >= ~8 px tall
    # PUs do not overlap
    rects = sorted((p.sceneBoundingRect().x(), p.sceneBoundingRect().y()) for p in m.pu_items.values())
    assert len(set(rects)) == 256
    # zoom, then fit brings back the same fitted view
    fitted = m.zoom()
    m.zoom_by(2.0)
    assert m.zoom() == pytest.approx(2 * fitted)
    assert m.transform().m11() == pytest.approx(2 * fitted)
    m.fit()
    assert m.zoom() == pytest.approx(fitted)


def test_colouring_follows_injected_load(large_map):
    m, topo = large_map
    m.set_load({0: 0.0, 1: 50.0, 2: 100.0})
    colours = MapColours.from_palette(m.palette())
    fill = {c: m.pu_items[c].fill() for c in (0, 1, 2)}
    assert fill[0] == colours.load(0.0) and fill[2] == colours.load(100.0)
    # busier = darker, monotonically
    assert fill[0].lightnessF() > fill[1].lightnessF() > fill[2].lightnessF()
    # the rendered pixel in the middle of PU 2 has the load colour (number drawn elsewhere)
    img = m.grab().toImage()
    pu = m.pu_items[2]
    corner = m.mapFromScene(pu.sceneBoundingRect().topLeft() + pu.boundingRect().center() * 0.25)
    px = img.pixelColor(corner.x(), corner.y())
    assert abs(px.red() - fill[2].red()) < 30 and abs(px.blue() - fill[2].blue()) < 30
    # a later sample changes only what it lists
    m.set_load({2: 0.0})
    assert m.pu_items[2].fill() == colours.load(0.0) and m.pu_items[1].load == 50.0


def test_click_selects_l3_and_snippet_is_right(qtbot, large_map):
    m, topo = large_map
    l3 = _boxes(m, "l3")[1]
    header = m.mapFromScene(l3.sceneBoundingRect().topLeft()) + QPoint(12, 6)
    with qtbot.waitSignal(m.selection_changed, timeout=2000) as sig:
        qtbot.mouseClick(m.viewport(), Qt.MouseButton.LeftButton, pos=header)
    assert sig.args[0] == topo.l3_domains[1].cpus == list(range(32, 64))
    plan = pinning_plan(m.selected_cpus(), topo, environ={})   # no inherited binding to clear
    assert plan.snippet("taskset").text == "OMP_NUM_THREADS=32 taskset -c 32-63 python train.py"
    assert plan.snippet("numactl").text == (
        "OMP_NUM_THREADS=32 numactl --cpunodebind=1 --membind=1 python train.py")   # L3 == NUMA node on Kunpeng
    # ctrl-click on a PU of another L3 adds it; ctrl-click again removes it
    pu = m.pu_items[5]
    pos = m.mapFromScene(pu.sceneBoundingRect().center())
    qtbot.mouseClick(m.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier, pos)
    assert m.selected_cpus() == [5] + list(range(32, 64))
    qtbot.mouseClick(m.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier, pos)
    assert m.selected_cpus() == list(range(32, 64))
    # plain click on a core selects just that core
    qtbot.mouseClick(m.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert m.selected_cpus() == [5]


def test_rubber_band_selects_covered_threads(qtbot):
    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(1000, 700)
    m.show()
    m.set_topology(epyc_2x64())
    a = m.mapFromScene(m.pu_items[0].sceneBoundingRect().center())
    b = m.mapFromScene(m.pu_items[1].sceneBoundingRect().center())
    vp = m.viewport()
    qtbot.mousePress(vp, Qt.MouseButton.LeftButton, pos=a - QPoint(2, 2))
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtCore import QEvent, QPointF
    for p in (a + QPoint(10, 0), b + QPoint(0, 1)):
        ev = QMouseEvent(QEvent.Type.MouseMove, QPointF(p), QPointF(vp.mapToGlobal(p)), Qt.MouseButton.NoButton,
                         Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
        QGuiApplication.sendEvent(vp, ev)
    with qtbot.waitSignal(m.selection_changed, timeout=2000) as sig:
        qtbot.mouseRelease(vp, Qt.MouseButton.LeftButton, pos=b + QPoint(0, 1))
    # PU 0 and 1 are in cores 0 and 1 (first row); the band also covers their SMT siblings 128, 129
    assert {0, 1} <= set(sig.args[0]) and set(sig.args[0]) <= {0, 1, 128, 129}


def test_tooltip_names_core_siblings_l3_peers_numa_and_clock(large_map):
    m, topo = large_map
    m.set_clocks({40: 2600.0})
    m.set_load({40: 37.0})
    tip = m.pu_tooltip(40)
    assert "CPU 40" in tip and "NUMA node: 1" in tip and "2.60 GHz" in tip and "load 37 %" in tip
    assert "L3 #1 peers" in tip and "32-39,41-63" in tip
    epyc = TopologyMap()
    epyc.set_topology(epyc_2x64())
    tip = epyc.pu_tooltip(3)
    assert "SMT siblings: 131" in tip and "CCX 0 peers" in tip
    epyc.deleteLater()


def test_markers_show_on_threads(large_map):
    m, _ = large_map
    m.set_markers({7: ["python (pid 42)", "worker-1"]})
    assert m.pu_items[7].markers == ["python (pid 42)", "worker-1"]
    assert "worker-1" in m.pu_tooltip(7)
    m.set_markers({})
    assert m.pu_items[7].markers == []


def test_svg_and_png_export(tmp_path, large_map):
    m, topo = large_map
    m.set_load({c: (c * 7) % 100 for c in topo.online_cpus})
    svg = m.export_svg(tmp_path / "map.svg")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    texts = {t.text.strip() for t in root.iter() if t.tag.endswith("text") and t.text}
    assert {"0", "127"} <= texts and any("L3" in t for t in texts)
    png = m.export_png(tmp_path / "map.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_unknown_topology_shows_message_not_crash(qtbot, tmp_path):
    m = TopologyMap()
    qtbot.addWidget(m)
    m.set_topology(probe_topology(machine_root("archspec-rocky9-zen5"), live=False))
    assert m.pu_items == {} and "unknown" in m._empty_text
    assert m.export_png(tmp_path / "empty.png").stat().st_size > 0
    m.set_topology(None)
    m.set_load({0: 50.0})            # no items: ignored


# ---------------------------------------------------------------------------
# Page


def _page(qtbot, topo: Topology, read_only: bool = False) -> tuple[TopologyPage, AppModel]:
    model = AppModel()
    page = TopologyPage(model)
    qtbot.addWidget(page)
    page.resize(1200, 850)
    page.show()
    report = Report()
    report.topology = topo
    model.set_report(report, read_only=read_only)
    return page, model


def test_page_selects_ccx_and_copies_snippet(qtbot):
    topo = epyc_2x64()
    page, model = _page(qtbot, topo)
    assert page.title == "Topology" and page.icon_name == "topology"
    assert "128 cores, 256 logical CPUs (SMT 2), 16 L3 domains (CCXs), 2 NUMA nodes" in page.summary.text()
    # 16 CCXs -> one drop-down; 2 NUMA nodes -> 2 buttons
    assert len(page.ccx_buttons) == 1 and [b.text() for b in page.numa_buttons] == ["Node 0", "Node 1"]
    act = page.ccx_buttons[0].menu().actions()[3]
    assert act.text().startswith("CCX 3: 32 MiB L3, CPUs 24-31,152-159")
    act.trigger()
    assert page.map.selected_cpus() == l3_cpu_sets(topo)[3]
    assert [page.tabs.tabText(i) for i in range(page.tabs.count())] == ["taskset", "numactl", "OpenMP", "GOMP",
                                                                        "Python"]
    page.tabs.setCurrentIndex(0)
    page.copy_current()
    # This report has no software part: its environment is unknown, so every OpenMP binding variable is cleared.
    assert QGuiApplication.clipboard().text() == (
        "env -u OMP_PLACES -u OMP_PROC_BIND -u GOMP_CPU_AFFINITY -u KMP_AFFINITY "
        "OMP_NUM_THREADS=8 taskset -c 24-31,152-159 python train.py")
    assert "8 cores" in page.selection_label.text() and "CCX 3" in page.selection_label.text()
    page.command_edit.setText("torchrun --nproc-per-node 1 train.py")
    assert page.current_snippet_text().endswith("torchrun --nproc-per-node 1 train.py")
    # numa button -> cpunodebind
    page.numa_buttons[1].click()
    page.tabs.setCurrentIndex(1)
    assert "--cpunodebind=1 --membind=1" in page.current_snippet_text()
    # one thread per core keeps 64 first threads
    page.per_core_button.click()
    assert page.map.selected_cpus() == list(range(64, 128))
    page.clear_button.click()
    assert page.map.selected_cpus() == [] and page.tabs.count() == 0


def test_page_follows_samples_and_ignores_them_for_saved_reports(qtbot):
    topo = probe_topology(machine_root("hwloc-memorysidecaches"), live=False)
    page, model = _page(qtbot, topo)
    assert len(page.map.pu_items) == 80
    model.sample.emit(Sample(t=1.0, cpu_ids=[0, 1], cpu_percent=[90.0, 10.0], freq_mhz=[3000.0, 2000.0]))
    assert page.map.pu_items[0].load == 90.0 and page.map.clocks[1] == 2000.0
    # a saved report of another machine: no live load drawn on it
    page2, model2 = _page(qtbot, topo, read_only=True)
    model2.sample.emit(Sample(t=1.0, cpu_ids=[0], cpu_percent=[90.0]))
    assert page2.map.pu_items[0].load is None


def test_page_without_report_and_with_unknown_topology(qtbot):
    model = AppModel()
    page = TopologyPage(model)
    qtbot.addWidget(page)
    assert "Waiting" in page.summary.text() and not page.all_button.isEnabled()
    report = Report()
    report.topology = probe_topology(machine_root("pycpuinfo-ubuntu22.04-ryzen7-2700x"), live=False)
    model.set_report(report)
    assert "16 logical CPUs" in page.summary.text()
    assert page.map.pu_items == {}


def test_disallowed_cpus_are_hatched_and_not_selected_by_select_all(qtbot):
    """A cgroup-restricted tree: 6 of 32 CPUs allowed; the rest drawn hatched, left out of ctrl+A."""
    topo = probe_topology(machine_root("hwloc-32amd64-4s2n4c-cgroup2"), live=False)
    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(900, 600)
    m.show()
    m.set_topology(topo)
    assert [c for c, item in m.pu_items.items() if item.allowed] == [0, 1, 2, 3, 4, 5]
    assert "Not allowed" in m.pu_tooltip(17) and "Not allowed" not in m.pu_tooltip(3)
    m.setFocus()
    qtbot.keyClick(m, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert m.selected_cpus() == [0, 1, 2, 3, 4, 5]
    qtbot.keyClick(m, Qt.Key.Key_Escape)
    assert m.selected_cpus() == []
    # hatching is drawn: the disallowed PU's pixels are not uniform
    img = m.grab().toImage()
    r = m.mapFromScene(m.pu_items[20].sceneBoundingRect()).boundingRect().adjusted(3, 3, -3, -3)
    colours = {img.pixelColor(x, y).rgb() for x in range(r.left(), r.right()) for y in range(r.top(), r.bottom())}
    assert len(colours) > 3


def test_selection_row_fits_a_small_window(qtbot, corpus):
    """2 L3 + 4 NUMA nodes in a 1000 px window: drop-downs, not six buttons squeezed to 'ode ('."""
    from cpudoctor.probes import probe_topology

    page, _model = _page(qtbot, probe_topology(machine_root("hwloc-memorysidecaches")))
    page.resize(790, 600)
    qtbot.waitExposed(page)
    assert [b.menu() is not None for b in page.ccx_buttons + page.numa_buttons] == [True, True]
    assert len(page.numa_buttons[0].menu().actions()) == 4
    row = [page.select_row.itemAt(i).widget() for i in range(page.select_row.count())]
    buttons = [w for w in row if w is not None and w.isVisible()]
    buttons += page.ccx_buttons + page.numa_buttons
    squeezed = [b.text() for b in buttons if hasattr(b, "menu")
                and b.width() < b.fontMetrics().horizontalAdvance(b.text()) + (24 if b.menu() else 8)]
    assert not squeezed
    assert page.export_button.menu() is not None and len(page.export_button.menu().actions()) == 2


def test_packages_are_numbered_like_lstopo(qtbot, corpus):
    """Kunpeng's firmware package ids are 36 and 8442: the map says Package 0 and 1 (with the id)."""
    m = TopologyMap()
    qtbot.addWidget(m)
    m.set_topology(probe_topology(machine_root("hwloc-128arm-2pa2n8cluster4co"), live=False))
    labels = sorted(box.label for box in m.box_items["package"])
    assert labels == ["Package 0 (id 36) · 64 cores", "Package 1 (id 8442) · 64 cores"]


def test_hybrid_chip_marks_efficiency_cores(qtbot, corpus):
    """Raptor Lake i7-1370P: P-cores 0-11 (SMT), E-cores 12-19 are drawn dashed and named in tooltips."""
    from conftest import machine_root
    from cpudoctor.gui.topology_map import TopologyMap
    from cpudoctor.probes import probe_topology

    topo = probe_topology(machine_root("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"))
    m = TopologyMap()
    qtbot.addWidget(m)
    m.set_topology(topo)
    assert m.hybrid
    cores = m.box_items["core"]
    assert sorted(c for item in cores if m.is_efficiency(item.cpus) for c in item.cpus) == list(range(12, 20))
    assert "performance core (P)" in m.pu_tooltip(0) and "efficiency core (E)" in m.pu_tooltip(12)
    plain = TopologyMap()
    qtbot.addWidget(plain)
    plain.set_topology(probe_topology(machine_root("hwloc-64amd64-4s2n4ca2co")))
    assert not plain.hybrid and not any(plain.is_efficiency(i.cpus) for i in plain.box_items["core"])


def test_fit_enlarges_a_small_machine_to_fill_the_view(qtbot):
    """A 4-core desktop in a big view: Fit zooms in until the map fills one side (not a stamp in a corner)."""
    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(1100, 700)
    m.show()
    qtbot.waitExposed(m)
    m.set_topology(epyc_small())
    m.zoom_by(0.5)
    m.fit()
    rect, vp = m.scene().sceneRect(), m.viewport().size()
    assert m.zoom() > 1.5
    assert max(rect.width() * m.zoom() / vp.width(), rect.height() * m.zoom() / vp.height()) > 0.9
    # centred: the map's middle is the view's middle
    centre = m.mapFromScene(rect.center())
    assert abs(centre.x() - vp.width() / 2) < 3 and abs(centre.y() - vp.height() / 2) < 3


def epyc_small() -> Topology:
    """1 socket, 2 CCXs of 2 SMT cores (8 CPUs), AMD."""
    cores = [Core(0, i, [i, i + 4], l3=i // 2, numa=0) for i in range(4)]
    l3 = [L3Domain([0, 1, 4, 5], 16 << 20), L3Domain([2, 3, 6, 7], 16 << 20)]
    return Topology(packages=1, cores=4, logical_cpus=8, l3_domains=l3,
                    numa_nodes=[NumaNode(0, list(range(8)), [10])], online_cpus=list(range(8)),
                    smt_threads_per_core=2, package_list=[Package(0, list(range(8)))], core_list=cores,
                    affinity=Affinity(allowed_cpus=list(range(8)), usable_cpus=8), l3_known=True,
                    source="sysfs", vendor="AuthenticAMD", cpu_family=0x19)


def test_png_export_is_big_enough_to_read(tmp_path, qtbot):
    from PySide6.QtGui import QImage

    from cpudoctor.gui.topology_map import PNG_MIN_WIDTH_PX

    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(500, 300)
    m.set_topology(epyc_small())
    img = QImage(str(m.export_png(tmp_path / "small.png")))
    assert img.width() >= PNG_MIN_WIDTH_PX
    assert img.width() / m.scene().sceneRect().width() >= 2.0


def test_caches_toggle_draws_l2_and_l1_like_lstopo(qtbot, corpus):
    from cpudoctor.gui.topology_legend import LoadLegend

    topo = probe_topology(machine_root("hwloc-20em64t-hybrid-1p6c2t+2ca4co1t"), live=False)
    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(1100, 700)
    m.set_topology(topo)
    m.set_selection([0, 1])
    plain_h = m.box_items["core"][0].h
    m.set_show_caches(True)
    assert m.selected_cpus() == [0, 1]                                 # the selection survives the rebuild
    p_core = next(b for b in m.box_items["core"] if b.cpus == [0, 1])
    assert [s.split()[0] for s in p_core.strips] == ["L2", "L1d", "L1i"] and p_core.h > plain_h
    assert [b.cpus for b in m.box_items["l2"]] == topo.l2_groups
    for l2 in m.box_items["l2"]:                                       # the cluster's cores sit inside its L2
        cores = [c for c in m.box_items["core"] if set(c.cpus) <= set(l2.cpus)]
        assert len(cores) == 4 and all(l2.sceneBoundingRect().contains(c.sceneBoundingRect()) for c in cores)
    assert "L2 / L1 cache" in [text for _kind, text in LoadLegend(m).entries()]
    m.set_show_caches(False)
    assert not m.box_items["l2"] and not any(b.strips for b in m.box_items["core"])


def test_selection_outline_is_thick_and_in_the_highlight_colour(qtbot):
    from cpudoctor.gui.topology_map import SELECTED_PEN

    m = TopologyMap()
    qtbot.addWidget(m)
    m.resize(700, 400)
    m.show()
    qtbot.waitExposed(m)
    m.set_topology(epyc_small())
    m.set_selection([0, 1, 4, 5])                       # CCX 0 exactly: its box lights up too
    assert SELECTED_PEN >= 3
    assert [b.selected for b in m.box_items["l3"]] == [True, False]
    img = m.grab().toImage()
    pu = m.pu_items[0]
    edge = m.mapFromScene(pu.sceneBoundingRect().topLeft() + QPointF(PU_W / 2, 1.0))
    px = img.pixelColor(edge.x(), edge.y())
    hl = m.colours.highlight
    assert abs(px.red() - hl.red()) < 40 and abs(px.green() - hl.green()) < 40 and abs(px.blue() - hl.blue()) < 40


def test_ccd_temperatures_show_on_their_ccx(qtbot):
    m = TopologyMap()
    qtbot.addWidget(m)
    m.set_topology(epyc_small())
    m.set_temperatures({"k10temp Tctl": 70.0, "k10temp Tccd1": 64.4, "k10temp Tccd2": 58.0})
    boxes = sorted(m.box_items["l3"], key=lambda b: b.cpus[0])
    assert boxes[0].header_text().endswith("· 64 °C") and boxes[1].header_text().endswith("· 58 °C")
    assert "k10temp Tccd1" in m.box_tooltip(boxes[0])
    m.set_temperatures({})
    assert "°C" not in boxes[0].header_text()


def test_page_shows_numa_distances_and_the_per_node_memory_note(qtbot, corpus):
    topo = probe_topology(machine_root("hwloc-x86linux-64amd64-4p2n4ca2co"), live=False)
    page, _model = _page(qtbot, topo)
    assert page.numa_panel.isVisible()
    n = len(topo.numa_nodes)
    assert page.numa_table.rowCount() == page.numa_table.columnCount() == n
    assert all(page.numa_table.item(i, i).text() == "10" for i in range(n))
    assert page.numa_table.item(0, 1).text() == str(topo.numa_nodes[0].distances[1])
    if topo.numa_memory_bytes:
        assert "kernel's per-node MemTotal" in page.numa_note.text() and "GiB" in page.numa_note.toolTip()
    page2, _ = _page(qtbot, epyc_small())
    assert not page2.numa_panel.isVisible()


def test_hidden_page_colours_the_map_when_shown(qtbot):
    page, model = _page(qtbot, epyc_small())
    page.hide()
    model.sample.emit(Sample(t=1.0, cpu_ids=list(range(8)), cpu_percent=[90.0] * 8))
    assert page.map.pu_items[0].load is None                 # nobody looks: no work
    page.show()
    qtbot.waitExposed(page)
    assert page.map.pu_items[0].load == 90.0


def test_page_says_what_a_vm_nodes_memory_is(qtbot):
    """Issue 28, 7: the only NUMA node's memory moved between readings while the Overview said 23.5 GiB."""
    from cpudoctor.model import Meta, OsInfo, Software

    gib = 1 << 30
    topo = Topology(packages=1, cores=2, logical_cpus=2, online_cpus=[0, 1], numa_nodes=[NumaNode(0, [0, 1])],
                    core_list=[Core(0, 0, [0]), Core(0, 1, [1])], numa_memory_bytes={"0": int(16.8 * gib)})
    model = AppModel()
    page = TopologyPage(model)
    qtbot.addWidget(page)
    model.set_report(Report(meta=Meta(generated_at="2026-12-01T10:02:00+00:00"), topology=topo,
                            software=Software(os=OsInfo(mem_total_bytes=int(23.5 * gib), vm=True))))
    text = page.limits.text()
    assert page.limits.isVisibleTo(page) and "16.8 GiB is the kernel's MemTotal for that node" in text
    assert "23.5 GiB" in text and "balloon" in text and "10:02" in text
