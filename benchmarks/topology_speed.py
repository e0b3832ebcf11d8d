"""How fast the topology probe, the text tree and the map are (medians; run by hand).

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/topology_speed.py

Probe: the live machine and the largest corpus trees (Kunpeng 920, 128 CPUs;
Cascade Lake SNC2, 80 CPUs). Map: a synthetic 2 x 64-core EPYC with SMT (256
hardware threads): build + layout, one set_load of every CPU (what each live
sample costs on the GUI thread), and a full relayout (what a window resize costs).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "machines"


def median_ms(fn, n: int = 15) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    from cpudoctor.probes import probe_topology
    from cpudoctor.render.topology import text_lines

    print("probe_topology (median ms)")
    print(f"  live machine                      {median_ms(lambda: probe_topology()):7.2f}")
    for name in ("hwloc-128arm-2pa2n8cluster4co", "hwloc-memorysidecaches", "hwloc-96em64t-4no4pa3ca2co"):
        root = CORPUS / name
        if root.is_dir():
            print(f"  {name:33s} {median_ms(lambda: probe_topology(root, live=False)):7.2f}")
    big = probe_topology(CORPUS / "hwloc-128arm-2pa2n8cluster4co", live=False)
    print(f"text_lines 128 CPUs                 {median_ms(lambda: text_lines(big)):7.2f}")

    from PySide6.QtWidgets import QApplication

    sys.path.insert(0, str(REPO / "tests"))
    from test_topology_map import epyc_2x64  # the same synthetic machine the widget tests use

    from cpudoctor.gui.topology_map import TopologyMap

    app = QApplication.instance() or QApplication([])
    topo = epyc_2x64()
    m = TopologyMap()
    m.resize(1200, 800)
    m.show()
    app.processEvents()
    print("map, 2 x 64-core EPYC SMT (256 PUs), median ms")
    print(f"  set_topology (build + fit)        {median_ms(lambda: m.set_topology(topo), 7):7.2f}")
    loads = [{c: float((c * k) % 100) for c in range(256)} for k in range(1, 16)]
    it = iter(loads * 10)
    print(f"  set_load(all 256 CPUs)            {median_ms(lambda: m.set_load(next(it))):7.3f}")
    print(f"  relayout                          {median_ms(m.relayout):7.2f}")

    def paint():
        m.viewport().repaint()
    print(f"  full repaint                      {median_ms(paint):7.2f}")


if __name__ == "__main__":
    main()
