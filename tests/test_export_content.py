"""What an exported report says, not only that it parses: wording a reader gets in every format.

Regression tests for things found by reading real exports: Python reprs
(``None``, ``True``) in evidence, findings run together into one Markdown
paragraph, "not_installed" PyTorch on a captured tree, GEMM points of two
libraries joined into one line, fractional thread-count ticks, "1 threads".
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from conftest import machine_root, probe_tree
from cpudoctor.export import render_export
from cpudoctor.render.md_extra import evidence_value, recommendation_text, settings_text
from cpudoctor.kits.format import number as fmt_number
from cpudoctor.render.svg_chart import find_charts, line_chart, measurement_tables
from cpudoctor.model import BenchRun, Finding, ThreadRecommendation
from export_samples import sample_report


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.chunks: list[str] = []

    def handle_data(self, data):
        self.chunks.append(data.strip())


def _html_text(report) -> list[str]:
    p = _Text()
    p.feed(render_export(report, "html").decode())
    return [c for c in p.chunks if c]


def _with_evidence():
    r = sample_report()
    r.findings.append(Finding(code="THR002", symbol="omp-unset", category="threads", severity="info",
                              title="OMP_NUM_THREADS is not set", fix="Set it.",
                              evidence={"software.thread_env.OMP_NUM_THREADS": None, "cpu.isa.avx512_bf16": True,
                                        "cpu.isa.amx": [], "topology.cores": 64}))
    return r


def test_evidence_values_are_words_not_python_reprs():
    r = _with_evidence()
    text = _html_text(r)
    assert "None" not in text and "True" not in text and "[]" not in text
    assert "not set / unknown" in text and "yes" in text and "none" in text
    md = render_export(r, "md").decode()
    evidence = md[md.index("OMP\\_NUM\\_THREADS is not set"):]
    assert "`software.thread_env.OMP_NUM_THREADS`: not set / unknown" in evidence
    assert "`cpu.isa.avx512_bf16`: yes" in evidence
    assert ": `None`" not in md and ": `True`" not in md
    pdf_page = render_export(r, "pdf")
    assert pdf_page.startswith(b"%PDF")


def test_evidence_value_words():
    assert evidence_value(None) == "not set / unknown"
    assert evidence_value(False) == "no"
    assert evidence_value([1, 2]) == "1, 2"
    assert evidence_value({"a": None}) == "a=not set / unknown"
    assert evidence_value("x" * 500, limit=50).endswith("…")


def test_markdown_finding_parts_are_separate_paragraphs():
    md = render_export(sample_report(), "md").decode().splitlines()
    title = next(i for i, ln in enumerate(md) if "OMP\\_NUM\\_THREADS counts SMT siblings" in ln)
    assert md[title].startswith("- **[!]")
    assert md[title + 1] == ""                              # why starts a new paragraph
    assert md[title + 2].startswith("  PyTorch runs one thread")
    assert md[title + 3] == "" and md[title + 4].startswith("  **Fix:**")
    assert "  Details: `cpudoctor explain THR001`" in md
    # Passed checks fold away instead of filling the findings list.
    assert any(ln.startswith("<summary>1 check passed") for ln in md)


def test_html_findings_point_to_explain():
    assert any("cpudoctor explain THR001" in c for c in _html_text(sample_report()))


def test_captured_tree_html_matches_markdown_software(corpus, manifest):
    """A --root report has no Python/PyTorch facts: the HTML must not claim torch is "not_installed"."""
    root = machine_root("hwloc-64amd64-4s2n4ca2co")
    report = probe_tree(root)
    assert report.software is not None and report.software.captured
    text = " ".join(_html_text(report))
    md = render_export(report, "md").decode()
    assert "not_installed" not in text and "not_installed" not in md
    assert "PyTorch build" not in text and "PyTorch build" not in md
    assert "Operating system" in text and "Operating system" in md
    # Chip rows use the same labels and wording as the text/Markdown report.
    assert "Family / model" in text and "21 (0x15)" in text


GEMM_POINTS = [{"backend": b, "library": b.split("-")[0], "precision": b.split("-")[1], "threads": t,
                "size": 512, "gflops": g, "peak_gflops": 166.2 * t, "utilisation": g / (166.2 * t)}
               for b, pts in (("torch-fp32", ((1, 108.3), (2, 28.8))), ("numpy-fp32", ((1, 125.9), (2, 200.2))),
                              ("torch-bf16", ((1, 487.8), (2, 33.6))), ("numpy-fp64", ((1, 60.3), (2, 40.5))))
               for t, g in pts]


def test_gemm_chart_has_one_line_per_backend():
    """Grouping by precision joined torch-fp32 and numpy-fp32 into one zig-zag line."""
    (chart,) = find_charts({"points": GEMM_POINTS}, "GEMM throughput")
    names = sorted(s.name for s in chart.series)
    assert names == ["numpy-fp32", "numpy-fp64", "torch-bf16", "torch-fp32"]
    for s in chart.series:
        xs = [x for x, _ in s.points]
        assert xs == sorted(set(xs))                        # one point per thread count
    assert chart.y_label == "GFLOP/s"


def test_thread_axis_has_whole_ticks_and_legend_does_not_squeeze_plot():
    (chart,) = find_charts({"points": GEMM_POINTS}, "GEMM")
    svg = line_chart(chart)
    ticks = re.findall(r'text-anchor="middle">([0-9.]+)</text>', svg)
    assert ticks and all("." not in t for t in ticks)
    height = int(re.search(r'height="(\d+)"', svg).group(1))
    assert height == 280 + 16 * 4


def test_numbers_and_tables_read_without_scientific_notation():
    assert fmt_number(258911.7) == "258,912"
    assert fmt_number(487.83) == "487.8"
    assert fmt_number(0.35366) == "0.3537"
    assert fmt_number(True) == "yes" and fmt_number(110) == "110"
    quant = [{"batch": 1, "fp32_samples_per_s": 8856.0, "int8_samples_per_s": 14282.8, "fp32_p90_ms": 0.1377},
             {"batch": 64, "fp32_samples_per_s": 18071.5, "int8_samples_per_s": 258911.7, "fp32_p90_ms": 81.3}]
    ((_, cols, rows),) = measurement_tables({"points": quant})
    assert cols == ["batch", "fp32 samples/s", "int8 samples/s", "fp32 p90 ms"]
    assert rows[1] == ["64", "18,072", "258,912", "81.3"]
    r = sample_report()
    r.benchmarks.append(BenchRun(kind="quant", metrics={"points": quant, "vnni": True}))
    md = render_export(r, "md").decode()
    assert "e+0" not in md
    assert "### Dynamic int8 vs fp32 inference" in md and "| vnni | yes |" in md


def test_recommendation_and_settings_wording():
    assert recommendation_text(ThreadRecommendation(threads=1, variant="1 thread")) == "1 thread"
    rec = ThreadRecommendation(threads=8, cpus=list(range(8)), variant="one CCX", samples_per_s=1710.0,
                               default_samples_per_s=1500.0)
    assert recommendation_text(rec) == "8 threads, pinned to CPUs 0-7 (one CCX): 1,710 samples/s, 1.14× the PyTorch default"
    assert settings_text({"train": {"model": "simplecnn", "compile": False}, "seconds": 1.0, "cpus": None}) == [
        "model: simplecnn", "compile: no", "run for (s): 1"]
    r = sample_report()
    r.benchmarks[0].settings = {"train": {"model": "simplecnn"}, "seconds": 8}
    md = render_export(r, "md").decode()
    assert "{'model'" not in md and "model: simplecnn" in md and "train.model" not in md


def test_constant_columns_are_said_once_and_pdf_tables_fit():
    from cpudoctor.render.svg_chart import split_constant_columns

    ((_, cols, rows),) = measurement_tables({"points": GEMM_POINTS})
    kept, kept_rows, same = split_constant_columns(cols, rows)
    assert "size" not in kept and same == ["size 512"]
    assert all(len(r) == len(kept) for r in kept_rows)
    assert split_constant_columns(["a"], [["1"]]) == (["a"], [["1"]], [])   # one row: nothing to lift
    r = sample_report()
    r.benchmarks.append(BenchRun(kind="gemm", metrics={"points": GEMM_POINTS}))
    md = render_export(r, "md").decode()
    assert "Every row: size 512" in md
    assert "<summary>8 measurements</summary>" in md and "(points)" not in md
    from cpudoctor.render.html import build_html

    page, _ = build_html(r, images="resources")
    assert '</table><p style="margin:0;font-size:4pt">' in page      # Qt drops margins after tables


def test_small_machine_map_is_enlarged_not_a_thumbnail():
    from export_samples import epyc_topology

    from cpudoctor.render.svg_topology import render_svg

    small = epyc_topology(packages=1, ccx_per_pkg=1, cores_per_ccx=2, smt=1)
    svg = render_svg(small, min_width=400)
    vw, vh = map(int, re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).groups())
    w, h = map(int, re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg).groups())
    assert vw < 400 and w == min(400, round(vw * 1.6)) and abs(h / w - vh / vw) < 0.02
    big = render_svg(epyc_topology(), min_width=400)
    assert re.search(r'viewBox="0 0 (\d+) \d+" width="\1"', big)        # large maps keep their size
    html = render_export(sample_report(), "html").decode()
    assert 'class="topology"' in html


def test_cpuinfo_only_tree_map_does_not_invent_cores(corpus, manifest):
    """An archspec tree has /proc/cpuinfo only: 16 cores with SMT 2, but no sibling lists."""
    from cpudoctor.probes import probe_topology
    from cpudoctor.render.svg_topology import render_svg

    topo = probe_topology(machine_root("archspec-rocky9-zen5"))
    assert not topo.core_list and topo.cores == 16 and topo.logical_cpus == 32
    svg = render_svg(topo)
    assert ">Core " not in svg                       # 32 boxes called "Core N" would contradict "16 cores"
    assert svg.count('class="tp-pu"') == 32 and "core layout unknown" in svg


def test_offline_cpus_said_once_and_platform_named(corpus, manifest):
    report = probe_tree(machine_root("hwloc-offline-cpu0-node0"), software=False)
    text = " ".join(_html_text(report))
    assert "0-3,21-23" in text and "are offline" not in text      # the Offline CPUs row says it
    assert " on Linux" in text


def test_json_export_is_strict_json_even_with_a_diverged_loss():
    import json

    r = sample_report()
    r.benchmarks.append(BenchRun(kind="train", metrics={"final_loss": float("nan"), "samples_per_s": float("inf"),
                                                        "points": [{"threads": 1, "samples_per_s": float("nan")}]}))

    def reject(name):
        raise ValueError(f"{name} is not JSON")

    data = json.loads(render_export(r, "json").decode(), parse_constant=reject)
    train = data["benchmarks"][-1]["metrics"]
    assert train["final_loss"] is None and train["samples_per_s"] is None
    assert train["points"][0]["samples_per_s"] is None
    assert data["cpu"]["brand"] == r.cpu.brand


def test_header_reads_well_when_the_report_is_bare():
    from cpudoctor.render.html import when
    from cpudoctor.model import Report

    bare = " ".join(_html_text(Report()))
    assert "Exported " in bare and " UTC by CPU Doctor" in bare and "ollected" not in bare   # no collection date
    text = " ".join(_html_text(sample_report()))
    assert "Collected 2026-11-30 10:12 UTC, exported " in text and " UTC by CPU Doctor 0.1.0" in text
    assert when("2026-11-30T09:38:47+02:00") == "2026-11-30 09:38 +02:00" and when("soon") == "soon"


def test_pdf_pages_carry_title_and_page_number(tmp_path):
    import shutil
    import subprocess

    import pytest

    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed: a machine with it runs this test")
    r = _with_evidence()
    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(render_export(r, "pdf"))
    pages = subprocess.run(["pdftotext", "-raw", str(pdf), "-"], capture_output=True, text=True,
                           check=True).stdout.split("\f")
    pages = [p for p in pages if p.strip()]
    assert len(pages) >= 2
    for i, page in enumerate(pages, 1):
        assert f"page {i} of {len(pages)}" in page
        assert re.search(rf"CPU Doctor report — {r.cpu.brand}\s+page {i} of", page)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True).stdout
    assert r.cpu.brand in info


def test_new_html_paths_escape_report_data():
    r = _with_evidence()
    evil = '<img src=x onerror=alert(1)>'
    r.benchmarks.append(BenchRun(kind=evil, settings={evil: evil}, metrics={evil: evil, "points": [
        {"variant": evil, "samples_per_s": 1.0}, {"variant": "b", "samples_per_s": 2.0}]}, note=evil))
    r.findings[-1].evidence["x"] = evil
    r.software.os.distro = evil
    r.software.thread_env = {"OMP_NUM_THREADS": evil}
    r.recommendation.variant = evil
    html = render_export(r, "html").decode()
    assert "<img src=x" not in html and "&lt;img src=x" in html
    md = render_export(r, "md").decode()
    ours = md[md.index("## Findings"):]                 # findings and benchmarks come from md_extra
    ours = re.sub(r"`[^`\n]*`", "", ours)               # code spans show markup literally
    assert not re.search(r"(?<!\\)<img", ours) and "\\<img src=x" in ours


def test_pdf_snippets_stay_whole_commands_and_utilisation_is_a_percentage():
    """A printed command must paste back into a shell: continued with ' \\' at a space, never cut mid-word;
    backend names are not hyphen-wrapped ('torch-/fp32'); utilisation is '31.1 %', not 0.3115."""
    from cpudoctor.render.finding_html import _chars_per_line, print_snippet
    from cpudoctor.render.html import build_html
    from cpudoctor.kits.format import metric as fmt_metric

    long_cmd = ("OMP_NUM_THREADS=16 numactl --physcpubind=0-7,16-23,32-39,48-55,64-71,80-87,96-103,112-119 "
                "--membind=0 python train.py --epochs 10 --batch-size 256")
    text, points = print_snippet(long_cmd + "\nexport OMP_PROC_BIND=close", "bash")
    lines = text.splitlines()
    assert all(len(line) <= _chars_per_line(points) for line in lines)
    assert lines[0].endswith(" \\") and " ".join(p.rstrip(" \\").strip() for p in lines[:-1]) == long_cmd
    assert print_snippet("x = [1, 2]", "python") == ("x = [1, 2]", 8.0)
    places = 'export OMP_PLACES="' + ",".join(f"{{{i},{i + 64}}}" for i in range(22)) + '"'
    text, points = print_snippet(places, "bash")
    assert text == places and points < 8                    # one long word: a smaller font, no continuation
    report = sample_report()
    report.findings[0].snippet = long_cmd
    report.benchmarks.append(BenchRun(kind="gemm", metrics={"points": [
        {"backend": "torch-fp32", "threads": 4, "gflops": 400.0, "utilisation": 0.3115},
        {"backend": "numpy-fp32", "threads": 4, "gflops": 300.0, "utilisation": 0.25}]}))
    page, _pictures = build_html(report, "resources")
    assert "--membind=0 python train.py" not in page.split("numactl", 1)[1].split("\n", 1)[0]
    assert 'white-space:nowrap">torch-fp32</td>' in page
    assert "31.1 %" in page and "0.3115" not in page
    assert fmt_metric("utilisation", 0.3115) == "31.1 %" and fmt_metric("gflops", 400.0) == "400.0"


def test_an_export_says_when_its_facts_were_collected_and_when_it_was_written():
    """Issue 40, 13: "Generated 15:16" on a file exported at 15:35 misdated it; and the severity counts ran
    together ("8 suggestions 27 checks passed") where the page's CSS is absent (the PDF, the preview)."""
    from cpudoctor.export import render_export

    report = sample_report()                                   # collected 2026-11-30 10:12 UTC
    for fmt in ("html", "md", "text"):
        out = render_export(report, fmt, exported_at="2026-11-30T10:31:00+00:00").decode()
        assert "ollected 2026-11-30 10:12 UTC, exported 2026-11-30 10:31 UTC" in out, fmt
        assert "enerated" not in out.split("\n\n", 2)[0] + out[:2000], fmt
    same_minute = render_export(report, "text", exported_at="2026-11-30T10:12:40+00:00").decode()
    assert "exported" not in same_minute.splitlines()[2]
    html = render_export(report, "html").decode()
    summary = html.split('<p class="summary">', 1)[1].split("</p>", 1)[0]
    assert "</span> · <span" in summary


def test_lab_tables_speak_a_readers_words():
    """Issue 40, 13: the exports said "budget s", "segment s", "samples/s lo/hi/n", "train.model=" and a "90 %
    claim" row with no context."""
    import re

    from gui_fill import realistic_report
    from lab_samples import lab_runs

    report = realistic_report()
    report.benchmarks = lab_runs()
    for fmt in ("html", "md", "text"):
        out = render_export(report, fmt).decode()
        words = re.sub(r"<[^>]+>", " ", out) if fmt == "html" else out
        for internal in ("budget s ", "segment s ", "samples/s lo", "samples/s hi", "samples/s n ", "train.model",
                         "budget_s", "| 90 % claim"):
            assert internal not in words, (fmt, internal)
    import html as htmllib

    import roofline_samples

    page = htmllib.unescape(render_export(report, "html").decode())
    assert "time budget (s)" in page and "samples/s, lowest" in page
    report.benchmarks = roofline_samples.runs()
    for fmt in ("html", "md", "text"):
        out = " ".join(htmllib.unescape(render_export(report, fmt).decode()).split())
        assert "Against the guides' 90 % claim" in out and "Guides say CPU training reaches about 90 %" in out, fmt
