"""Roofs measured: the roofline job's settings and reading, its picture, and the reports that carry it.

The real job runs once (``bench roofline`` on this machine) and is checked
against /proc/cpuinfo, sched_getaffinity and sysfs, never against a speed.
The picture's tests read the drawn SVG back and compare every point and roof
with the data it was drawn from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cpudoctor.lab.jobs._settings import RooflineSettings, SettingsError
from cpudoctor.lab.results import against_roof
from cpudoctor.lab.roofline import CLAIM, machine_args
from cpudoctor.render.roofline import gemm_intensity, picture_from_runs, roof_lines
from cpudoctor.render.svg_roofline import CHAR_W, render_svg
from cpudoctor.model import Report
from tests import roofline_samples as samples
from tests.conftest import machine_root, run_cli

SVG = "{http://www.w3.org/2000/svg}"


# ----------------------------------------------------------------------------- settings and machine


def test_settings_validate_and_choose_dtypes_from_the_cpu():
    assert RooflineSettings(native_bf16=True, native_int8=False).validate().dtypes_used == ["fp32", "bf16"]
    assert RooflineSettings(native_bf16=None, native_int8=None).validate().dtypes_used == ["fp32"]
    assert RooflineSettings(dtypes=["int8", "fp32", "int8"]).validate().dtypes == ["int8", "fp32"]
    for bad in ({"dtypes": ["fp8"]}, {"budget_s": float("nan")}, {"nodes": [{"node": 0}]}, {"threads": [0]},
                {"memory_mib": 0}, {"sizes": [8]}):
        with pytest.raises(SettingsError):
            RooflineSettings.from_dict(bad)


@pytest.mark.parametrize("machine", ["hwloc-16amd64-8n2c", "hwloc-memorysidecaches"])
def test_machine_args_follow_the_topology(machine):
    """The NUMA nodes the job binds to are the tree's own node folders (sysfs, read here independently)."""
    from cpudoctor.probes import probe_topology

    root = machine_root(machine)
    topo = probe_topology(root)
    allowed = topo.online_cpus
    args = machine_args(topo, allowed, available_bytes=64 << 30)
    sysfs = sorted(int(p.name[4:]) for p in (root / "sys/devices/system/node").glob("node[0-9]*")
                   if (p / "cpulist").is_file() and (p / "cpulist").read_text().strip())
    assert [n["node"] for n in args["nodes"]] == sysfs
    assert sorted(c for n in args["nodes"] for c in n["cpus"]) == sorted(allowed)
    l3 = [d.size_bytes for d in topo.l3_domains if d.size_bytes]
    assert args["cache_bytes"] == (max(l3) if l3 else None)
    assert 256 <= args["memory_mib"] <= 1024
    assert machine_args(topo, allowed, available_bytes=1 << 30)["memory_mib"] <= 128      # a small machine


def test_without_numa_facts_the_job_measures_all_cpus_only():
    from cpudoctor.probes import probe_topology

    args = machine_args(probe_topology(machine_root("archspec-rocky8.5-zen4")))     # no sysfs in the tree
    assert "nodes" not in args and args["memory_mib"] >= 256



class _FakeTorch:
    """Just what :func:`_roofs.bandwidth` touches; the rates come from the patched ``timed_rates``."""

    float32 = "float32"

    def __init__(self) -> None:
        self.threads = 1

    def set_num_threads(self, n: int) -> None:
        self.threads = n

    def empty(self, n: int, dtype: str):
        class Buffer:
            def data_ptr(self) -> int:
                return 0

            def fill_(self, value: float) -> None:
                pass

            def copy_(self, other) -> None:
                pass
        return Buffer()


@pytest.mark.parametrize("rates, used", [({2: 6e9, 1: 22e9}, 1), ({2: 30e9, 1: 12e9}, 2)])
def test_a_memory_roof_is_the_better_of_all_threads_and_one(monkeypatch, rates, used):
    """On 2 busy CPUs a 2-thread copy waits for its slower thread at every barrier: one thread is the roof's
    floor. Each figure says which thread count it came from; the job's thread count is restored."""
    from cpudoctor.lab.jobs import _roofs

    torch = _FakeTorch()
    monkeypatch.setattr(_roofs, "timed_rates", lambda op, work, seconds, stop: [rates[torch.threads] * 0.9,
                                                                                 rates[torch.threads]])
    got = _roofs.bandwidth(torch, 1 << 20, 2, 0.1, stop=type("S", (), {"is_set": lambda self: False})())
    for kernel in ("read", "copy"):
        assert got["results"][kernel]["threads"] == used
        assert got["results"][kernel]["gbps"] == round(max(rates.values()) / 1e9, 2)
    assert torch.threads == 2
    one = _roofs.bandwidth(torch, 1 << 20, 1, 0.1, stop=type("S", (), {"is_set": lambda self: False})())
    assert one["results"]["copy"]["threads"] == 1 and one["results"]["copy"]["gbps"] == round(rates[1] / 1e9, 2)


# ----------------------------------------------------------------------------- reading a result


def test_measured_roofs_stand_beside_the_nominal_peak_with_its_sources():
    r = samples.roofline_result()
    fp32 = r.roof("fp32")
    assert (fp32["threads"], fp32["gflops"], fp32["nominal_gflops"]) == (2, 288.0, 320.0)
    assert fp32["of_nominal"] == pytest.approx(288 / 320)
    assert set(fp32) >= {"dtype", "gflops", "threads", "method", "other_share"}
    nom = next(n for n in r.nominal if n["dtype"] == "fp32" and n["threads"] == 1)
    assert nom["cores"] == 1 and nom["gflops"] == 160.0 and nom["clock_mhz"] == 2500.0
    assert "boost" in nom["clock_source"] and "peak_flops.json" in nom["flops_per_cycle_source"]
    assert "zen5" in nom["flops_per_cycle_source"]
    assert {(m["node"], m["kernel"]) for m in r.memory} == {(0, "read"), (0, "copy"), ("all", "read"), ("all", "copy")}
    assert all(set(m) >= {"node", "gbps", "method"} for m in r.memory)
    assert r.interference.share == pytest.approx(0.31)          # the worst window: the memory measurement
    assert r.claim["measured_vs_nominal"] == pytest.approx(0.9) and r.claim["holds"] is (0.9 >= CLAIM)
    assert r.claim["best_operator"] == "addmm" and r.claim["best_operator_vs_roof"] == pytest.approx(26.9 / 288, 1e-3)
    metrics = r.bench_run().metrics
    assert metrics["compute"] == r.compute and metrics["claim"] == r.claim and metrics["other_share"] == 0.31
    extra = r.json_extra()
    assert extra["nominal"] == r.nominal and extra["claim"] == r.claim


def test_gemm_points_are_held_against_their_measured_roof():
    roofs = [{"dtype": "fp32", "threads": 2, "gflops": 200.0}, {"dtype": "fp64", "threads": 2, "gflops": 100.0}]
    p = against_roof({"backend": "torch-fp32", "threads": 2, "gflops": 150.0, "utilisation": 0.7}, roofs)
    assert p["roof_gflops"] == 200.0 and p["of_roof"] == 0.75 and p["utilisation"] == 0.7
    assert against_roof({"backend": "numpy-fp64", "threads": 2, "gflops": 50.0}, roofs)["of_roof"] == 0.5
    assert "of_roof" not in against_roof({"backend": "torch-bf16", "threads": 2, "gflops": 50.0}, roofs)


def test_gemm_text_shows_measured_roof_and_nominal_peak():
    from types import SimpleNamespace

    from cpudoctor.lab.results import read_outcome
    from cpudoctor.lab.results import Context
    from cpudoctor.render.lab import gemm_html, outcome_text

    point = {"backend": "torch-fp32", "library": "torch", "precision": "fp32", "threads": 1, "size": 1024,
             "gflops": 120.0, "gflops_lo": 110.0, "gflops_hi": 125.0}
    result = {"points": [point], "roofs": [{"dtype": "fp32", "threads": 1, "gflops": 150.0}], "size": 1024}
    r = read_outcome("gemm", SimpleNamespace(status="ok", result=result, progress=[], message=""), {},
                     Context(peak=samples.peak()))
    text = outcome_text(r)
    assert "roof" in text and "of roof" in text and "nominal" in text
    row = next(line for line in text.splitlines() if line.startswith("torch-fp32"))
    assert "150.0" in row and "80 %" in row and "160.0" in row and "75 %" in row
    html = gemm_html(r)
    assert "measured roof" in html and "nominal peak" in html and "80 %" in html and "75 %" in html


def test_one_numa_node_is_one_memory_row_per_kernel_and_two_nodes_keep_their_total():
    """On one node the job reports its one measurement as node 0 and as the total: the terminal and the
    report rows say it once ("node 0 (all)"); with two nodes each node and the total keep their rows."""
    from cpudoctor.render.lab import outcome_text
    from cpudoctor.render.roofline import memory_places

    r = samples.roofline_result()
    rows = [line for line in outcome_text(r).splitlines() if line.startswith(("node ", "all"))]
    assert [row.split()[:4] for row in rows] == [["node", "0", "(all)", "read"], ["node", "0", "(all)", "copy"]]
    two = [{"node": n, "kernel": "copy", "gbps": g} for n, g in ((0, 20.0), (1, 19.0), ("all", 38.0))]
    assert [(where, x["gbps"]) for where, x in memory_places(two)] == [("node 0", 20.0), ("node 1", 19.0),
                                                                      ("all nodes", 38.0)]
    assert memory_places([{"node": "all", "kernel": "copy", "gbps": 5.0}])[0][0] == "all nodes"


# ----------------------------------------------------------------------------- the picture


def _svg_points(svg: str) -> list[dict]:
    root = ET.fromstring(svg)
    return [el.attrib for el in root.iter() if "rf-point" in el.attrib.get("class", "")]


def test_the_key_names_the_precisions_drawn_and_no_other():
    pic = picture_from_runs(samples.runs())
    drawn = {r.dtype for r in pic.compute} | {p.dtype for p in pic.points if p.dtype}
    keys = [el.text or "" for el in ET.fromstring(render_svg(pic)).iter() if "rf-m" in el.attrib.get("class", "")]
    assert {k.split(" ", 1)[1] for k in keys if k.startswith("— ")} == drawn
    pic.compute = [r for r in pic.compute if r.dtype == "fp32"]
    pic.points = [p for p in pic.points if p.dtype == "fp32"]
    keys = [el.text or "" for el in ET.fromstring(render_svg(pic)).iter() if "rf-m" in el.attrib.get("class", "")]
    assert [k for k in keys if k.startswith("— ")] == ["— fp32"]


def test_every_point_drawn_is_a_point_of_the_data_and_back():
    runs = samples.runs()
    svg = render_svg(picture_from_runs(runs))
    drawn = {(p["data-kind"], round(float(p["data-x"]), 3), round(float(p["data-y"]), 3)) for p in _svg_points(svg)}
    expected = set()
    for p in runs[1].metrics["points"]:                                   # the GEMM run
        expected.add(("gemm", round(gemm_intensity(p["size"], p["precision"]), 3), p["gflops"]))
    for op in runs[2].metrics["operators"]:                               # the training run's operators
        expected.add(("operator", op["intensity"], op["gflops"]))
    for p in runs[0].metrics["gemm_points"]:                              # in-cache multiplies on every CPU
        if p["threads"] == 2:
            expected.add(("gemm-ladder", round(2 * p["size"] / (3 * {"fp32": 4, "bf16": 2}[p["dtype"]]), 3),
                          p["gflops"]))
    assert drawn == expected
    # a 4096 x 4096 fp32 multiply: 2n^3 FLOP over 3 n^2 x 4 bytes
    assert gemm_intensity(4096, "fp32") == pytest.approx(2 * 4096 ** 3 / (3 * 4096 ** 2 * 4))


def test_the_roofs_drawn_are_the_measured_ones_and_the_nominal_peak():
    runs = samples.runs()
    root = ET.fromstring(render_svg(picture_from_runs(runs)))
    roofs = {(el.attrib["data-dtype"], int(el.attrib["data-threads"]), float(el.attrib["data-y"]))
             for el in root.iter() if "rf-roof" in el.attrib.get("class", "")}
    assert roofs == {(c["dtype"], c["threads"], c["gflops"]) for c in runs[0].metrics["compute"]}
    nominal = sorted(float(el.attrib["data-y"]) for el in root.iter() if "rf-nominal" in el.attrib.get("class", ""))
    assert nominal == pytest.approx([320.0, 640.0])              # one nominal line per dtype: fp32, bf16
    memory = [el.attrib for el in root.iter() if "rf-memory" == el.attrib.get("class")]
    assert [float(m["data-gbps"]) for m in memory] == [33.0]


def test_labels_never_touch_each_other_and_stay_in_the_picture():
    svg = render_svg(picture_from_runs(samples.runs()))
    root = ET.fromstring(svg)
    width, height = (float(v) for v in root.attrib["viewBox"].split()[2:])
    boxes = []
    for el in root.iter(f"{SVG}text"):
        if "rf-label" in el.attrib.get("class", ""):
            x, y = float(el.attrib["x"]), float(el.attrib["y"])
            boxes.append((x, y - 10, x + CHAR_W * len(el.text or ""), y + 2))
    assert len(boxes) >= 6
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= width and 0 <= a[1] and a[3] <= height
        for b in boxes[i + 1:]:
            assert a[2] < b[0] or b[2] < a[0] or a[3] < b[1] or b[3] < a[1], (a, b)


def test_the_picture_is_900_by_600_and_says_the_claim():
    svg = render_svg(picture_from_runs(samples.runs()))
    root = ET.fromstring(svg)
    assert root.attrib["width"] == "900" and int(root.attrib["height"]) >= 600
    text = " ".join((el.text or "") for el in root.iter(f"{SVG}text"))
    assert "Measured fp32 roof 288.0 GFLOP/s on 2 threads = 90 % of the nominal peak 320.0 GFLOP/s" in text
    assert "(2 cores × 2,500 MHz × 64 FLOP/cycle)" in text and "about 90 %" in text
    assert min(int(m) for m in re.findall(r"font:(?:\d+ )?(\d+)px", svg)) >= 11    # readable when scaled


def test_png_export_is_the_same_picture_rasterised(tmp_path):
    from cpudoctor.render.pdf import write_png

    svg = render_svg(picture_from_runs(samples.runs()))
    path = tmp_path / "roofline.png"
    write_png(svg, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (w, h) == (1800, 2 * int(ET.fromstring(svg).attrib["height"]))


def test_no_roofline_run_no_picture():
    assert picture_from_runs([samples.gemm_run(), samples.train_run()]) is None
    assert roof_lines([samples.gemm_run()]) == []


# ----------------------------------------------------------------------------- in the reports


def _report() -> Report:
    from tests.export_samples import sample_report

    r = sample_report()
    r.benchmarks = samples.runs()
    return r


def test_reports_say_measured_roof_and_nominal_peak_apart():
    from cpudoctor.render import render

    r = _report()
    for fmt in ("text", "md", "html"):
        out = render(r, fmt)
        assert "Measured roof" in out and "Nominal peak" in out, fmt
        assert "fp32 288.0 GFLOP/s on 2 threads" in out and "fp32 320.0 GFLOP/s on 2 cores" in out, fmt
    html = render(r, "html")
    assert 'id="roofline"' in html and html.count('class="rf-point"') == len(_svg_points(render_svg(
        picture_from_runs(r.benchmarks))))


def test_the_pdf_draws_the_picture(tmp_path):
    import shutil
    import subprocess

    from cpudoctor.render.html import build_html
    from cpudoctor.export import render_export

    page, pictures = build_html(_report(), "resources")
    assert "roofline" in pictures and '<img src="cpudoctor:roofline">' in page
    pdf = render_export(_report(), "pdf")
    assert pdf.startswith(b"%PDF")
    if shutil.which("pdftotext"):
        (tmp_path / "r.pdf").write_bytes(pdf)
        text = subprocess.run(["pdftotext", str(tmp_path / "r.pdf"), "-"], capture_output=True, text=True,
                              check=True).stdout
        assert "Measured roof" in text and "Nominal peak" in text
        assert "fp32 roof, every usable CPU" in text            # drawn as vectors: the picture's own words


# ----------------------------------------------------------------------------- the real job


def _cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    if importlib.util.find_spec("torch") is None:       # never imported here: the GUI tests check this process
        pytest.skip("torch is not installed in this Python")
    if not Path("/proc/cpuinfo").is_file() or not hasattr(os, "sched_getaffinity"):
        pytest.skip("the real roofline test reads Linux's /proc and sysfs")
    out = tmp_path_factory.mktemp("roofline")
    from cpudoctor.cli import main

    # a short budget: the first pass of every roof fits in it (the second passes, which only refine the figures,
    # are skipped and said so); the default 45 s costs CI's serial pass half a minute for no more facts
    code = main(["bench", "roofline", "--json", "--quiet", "--budget", "16", "-o", str(out / "r.json"),
                 "--plot", str(out / "r.svg")])
    return code, json.loads((out / "r.json").read_text()), (out / "r.svg")


@pytest.mark.hardware
@pytest.mark.slow
def test_real_roofline_measures_what_this_cpu_runs(real_run):
    code, data, _svg = real_run
    assert code == 0, data.get("message")
    result = data["result"]
    flags = _cpuinfo_flags()
    allowed = len(os.sched_getaffinity(0))
    dtypes = {c["dtype"] for c in result["compute"]}
    assert "fp32" in dtypes
    assert ("bf16" in dtypes) == bool(flags & {"avx512_bf16", "amx_bf16"} or "bf16" in flags)
    assert ("int8" in dtypes) == bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"} or flags & {"asimddp", "i8mm"})
    for c in result["compute"]:
        assert set(c) >= {"dtype", "gflops", "threads", "method", "interference"} and c["gflops"] > 0
    assert {c["threads"] for c in result["compute"] if c["dtype"] == "fp32"} == {allowed, 1}
    nodes = sorted(int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node[0-9]*")
                   if (p / "cpulist").read_text().strip())
    assert {m["node"] for m in result["memory"]} == set(nodes) | {"all"}
    assert {m["kernel"] for m in result["memory"]} == {"read", "copy"}
    assert all(set(m) >= {"node", "gbps", "method"} and m["gbps"] > 0 for m in result["memory"])
    assert any(n["dtype"] == "fp32" for n in result["nominal"])
    assert data["bench_run"]["metrics"]["other_share"] is not None


@pytest.mark.hardware
@pytest.mark.slow
def test_real_roofline_plot_draws_the_json_it_printed(real_run):
    _code, data, svg = real_run
    root = ET.fromstring(svg.read_text())
    roofs = {(el.attrib["data-dtype"], int(el.attrib["data-threads"])): float(el.attrib["data-y"])
             for el in root.iter() if "rf-roof" in el.attrib.get("class", "")}
    for c in data["result"]["compute"]:
        assert roofs[(c["dtype"], c["threads"])] == pytest.approx(c["gflops"])
    memory = [float(el.attrib["data-gbps"]) for el in root.iter() if el.attrib.get("class") == "rf-memory"]
    copy = next(m for m in data["result"]["memory"] if m["node"] == "all" and m["kernel"] == "copy")
    assert memory == [pytest.approx(copy["gbps"])]


def test_plot_needs_svg_or_png(tmp_path, capsys):
    code, _out, err = run_cli(capsys, "bench", "roofline", "--plot", str(tmp_path / "r.jpg"))
    assert code == 2 and "SVG or PNG" in err
