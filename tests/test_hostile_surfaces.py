"""Hostile input on the surfaces added since issue 19 (issue 39): each point once failed as described.

Destroyed (item 2): ``-o R --into R`` overwrote the report, then refused to merge into it.
Leaked (items 3, 5): a roofline run's dtype went into an SVG attribute unescaped; inspect named another
user's home. Never ending (items 10, 12): Windows/macOS captures of a few hundred kB and a tree whose
CPUs each claim 65,536 siblings ran for minutes. Tracebacks (items 13-15): wrong-shaped lab-run metrics,
a damaged knowledge file, a capture's JSON nested 100,000 deep. Silently wrong (items 17, 19): ``run -o``
into a missing folder ran the job first; ``--plot ""`` was ignored and a ``--plot`` FIFO refused only after
the measurement. (Items 1 and 11: tests/test_writers_on_devices.py; 16: tests/test_inspect.py.)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from xml.dom import minidom

import pytest

from conftest import alarm, machine_root, run_cli
from export_samples import sample_report


def deadline(seconds: float):
    """Fail instead of running on (these cases ran for minutes); never a timing assertion on a good run."""
    return alarm(seconds, TimeoutError, "still running after")


@pytest.fixture
def no_job(monkeypatch):
    """Any lab job or observed command started is a failure: the checks must come first."""
    def started(*_a, **_k):
        raise AssertionError("the job was started before its outputs were checked")

    from cpudoctor import jobrun
    from cpudoctor.lab import session

    monkeypatch.setattr(session, "run", started)
    monkeypatch.setattr(jobrun, "run_job", started)


def _this_machines_report(path: Path) -> Path:
    from cpudoctor.model import Report
    from cpudoctor.probes import probe_cpu

    path.write_text(Report(cpu=probe_cpu(Path("/"))).to_json())
    return path


# ---------------------------------------------------------------------------- items 2, 17, 19: checked first


@pytest.mark.parametrize("how", ["same name", "a link to it", "a hard link"])
def test_o_and_into_naming_one_report_are_refused_at_the_start(how, tmp_path, capsys, no_job):
    report = _this_machines_report(tmp_path / "r.json")
    before = report.read_bytes()
    other = {"same name": report, "a link to it": tmp_path / "link.json", "a hard link": tmp_path / "hard.json"}[how]
    if how == "a link to it":
        other.symlink_to(report)
    elif how == "a hard link":
        os.link(report, other)
    code, out, err = run_cli(capsys, "bench", "gemm", "--quiet", "-o", str(other), "--into", str(report))
    assert code == 2 and "name the same file" in err and err.count("\n") == 1, err
    assert report.read_bytes() == before


def test_plot_and_into_naming_one_file_are_refused_too(tmp_path, capsys, no_job):
    target = tmp_path / "p.svg"
    target.write_text("<svg/>")
    (tmp_path / "out.txt").symlink_to(target)
    code, _, err = run_cli(capsys, "bench", "roofline", "--quiet", "-o", str(tmp_path / "out.txt"),
                           "--plot", str(target))
    assert code == 2 and "name the same file" in err, err


def test_run_checks_its_output_before_the_job(tmp_path, capsys, no_job):
    code, _, err = run_cli(capsys, "run", "-o", str(tmp_path / "nonexistent" / "x.txt"), "--", "true")
    assert code == 2 and "does not exist" in err and err.count("\n") == 1, err
    folder = tmp_path / "a-folder"
    folder.mkdir()
    code, _, err = run_cli(capsys, "run", "-o", str(folder), "--", "true")
    assert code == 2 and "folder" in err


def test_run_checks_its_picture_before_the_job(tmp_path, capsys, no_job):
    """run --plot is written after a job that runs once: a FIFO, a missing folder or the -o file are refused first."""
    fifo = tmp_path / "plot.svg"
    os.mkfifo(fifo)
    code, _, err = run_cli(capsys, "run", "--plot", str(fifo), "--", "true")
    assert code == 2 and err.count("\n") == 1 and "--plot" in err, err
    code, _, err = run_cli(capsys, "run", "--plot", str(tmp_path / "nonexistent" / "p.svg"), "--", "true")
    assert code == 2 and "does not exist" in err, err
    (tmp_path / "link.html").symlink_to(tmp_path / "p.html")
    code, _, err = run_cli(capsys, "run", "-o", str(tmp_path / "p.html"), "--plot", str(tmp_path / "link.html"),
                           "--", "true")
    assert code == 2 and "name the same file" in err, err


def test_an_empty_plot_name_is_refused(capsys, no_job):
    code, _, err = run_cli(capsys, "bench", "roofline", "--quiet", "--plot", "")
    assert code == 2 and "empty name" in err


def test_a_plot_fifo_is_refused_before_the_measurement(tmp_path, capsys, no_job):
    fifo = tmp_path / "plot.svg"
    os.mkfifo(fifo)
    code, _, err = run_cli(capsys, "bench", "roofline", "--quiet", "--plot", str(fifo))
    assert code == 2 and "named pipe" in err and err.count("\n") == 1, err


# ---------------------------------------------------------------------------- item 3: attributes escaped


HOSTILE = 'x" onmouseover="alert(1)" y="<'


def test_every_svg_attribute_from_data_is_escaped():
    from cpudoctor.render.roofline import Picture, Point, Roof
    from cpudoctor.render.svg_roofline import render_svg

    pic = Picture(compute=[Roof(HOSTILE, 100.0, HOSTILE, HOSTILE)], memory_gbps=20.0, memory_label=HOSTILE,
                  points=[Point(HOSTILE, 4.0, 50.0, HOSTILE, HOSTILE, HOSTILE)], claim=HOSTILE)
    svg = render_svg(pic)
    dom = minidom.parseString(svg.encode())
    for element in dom.getElementsByTagName("*"):
        names = set(element.attributes.keys())
        assert "onmouseover" not in names, element.toxml()[:200]
    roof = next(e for e in dom.getElementsByTagName("line") if e.getAttribute("class") == "rf-roof")
    assert roof.getAttribute("data-dtype") == HOSTILE and roof.getAttribute("data-threads") == HOSTILE
    point = next(e for e in dom.getElementsByTagName("*") if e.getAttribute("class") == "rf-point")
    assert point.getAttribute("data-kind") == HOSTILE


def test_a_saved_roofline_run_cannot_write_markup_into_the_html():
    from roofline_samples import runs

    from cpudoctor.export import render_export
    from cpudoctor.report_file import report_from_json

    report = sample_report()
    report.benchmarks = runs()
    data = json.loads(report.to_json())
    data["benchmarks"][0]["metrics"]["compute"][0]["dtype"] = '"><b onload=1'
    html = render_export(report_from_json(json.dumps(data)), "html").decode()
    assert "<b onload" not in html and "onload=1" not in html.replace("&quot;&gt;&lt;b onload=1", "")


# ---------------------------------------------------------------------------- item 5: another user's home


def test_inspect_names_no_other_users_home(tmp_path, capsys):
    from inspect_fakes import FakeProc

    fp = FakeProc(tmp_path)
    fp.add_process(4321, "python", cmdline=["/home/alice/venv/bin/python", "train.py"],
                   environ={"VIRTUAL_ENV": "/home/alice/venv"})
    os.symlink("/home/alice/venv/bin/python", fp.pdir(4321) / "exe")
    for fmt in ("text", "json"):
        code, out, err = run_cli(capsys, "inspect", "4321", "-s", "0.2", "--root", str(tmp_path), "-f", fmt)
        assert code == 0, err
        assert "alice" not in out, [line for line in out.splitlines() if "alice" in line]
    assert "cpudoctor doctor --python ~/venv/bin/python" in run_cli(
        capsys, "inspect", "4321", "-s", "0.2", "--root", str(tmp_path))[1]


# ---------------------------------------------------------------------------- items 10, 15: captures


@pytest.mark.parametrize("name", ["5,000 NUMA records", "16,384 single-CPU groups", "65,535 group masks per record",
                                  "a buffer of 8 MB", "sysctl.txt of 16 levels x 4,096 CPUs",
                                  "cpu.json nested 100,000 deep"])
def test_oversized_windows_and_mac_captures_are_cut_with_a_note(name, tmp_path):
    """Each ran `report --root` for minutes (a quadratic node merge, tens of thousands of CPUs, a launch line
    per cache domain) or died of RecursionError; now the probe keeps what a machine can have and says so."""
    from hostile_captures import BUILDERS

    from cpudoctor import advisor
    from cpudoctor.pipeline import Source, build_report

    root = BUILDERS[name](tmp_path / "capture")
    with deadline(120):
        report = build_report(Source.tree(root), children=False, findings=False)
        report.findings = advisor.diagnose(report)
    topo = report.topology
    notes = " ".join(topo.notes + report.cpu.notes)
    assert (topo.logical_cpus or 0) <= 8192 and len(topo.numa_nodes) <= 1024
    expected = {"5,000 NUMA records": "NUMA node numbers of 1,024 or more were ignored",
                "16,384 single-CPU groups": "processor groups beyond the first 128",
                "65,535 group masks per record": "group masks naming a group beyond the first 128 were ignored",
                "a buffer of 8 MB": "larger than 4 MiB",
                "sysctl.txt of 16 levels x 4,096 CPUs": "more than any Mac has",
                "cpu.json nested 100,000 deep": "nested too deeply"}[name]
    assert expected in notes, notes[:2000]
    for finding in report.findings:
        assert finding.snippet.count("\n") < 400, finding.code       # a launch per domain, at most 64


def test_pinned_launches_stop_at_a_readable_number():
    from cpudoctor.advisor import snippets
    from cpudoctor.model.topology import L3Domain

    report = sample_report()
    topo = report.topology
    topo.l3_domains = [L3Domain([c], 1 << 20) for c in topo.online_cpus]
    text = snippets.pinned_launches(report)
    assert text.count("taskset") + text.count("numactl") <= snippets.MAX_LAUNCHES
    assert "more NUMA nodes and L3 domains" in text


def _report_of_8192_cpus():
    """The sample report on a machine of 8,192 online CPUs, all usable: the most a topology may hold."""
    report = sample_report()
    cpus = list(range(8192))
    report.topology.online_cpus = cpus
    report.topology.logical_cpus = len(cpus)
    report.topology.affinity.allowed_cpus = cpus
    return report, cpus


def test_pinned_launches_of_scattered_cpus_fit_a_reports_field():
    """`make fuzz`: a capture whose L3 domains each held every 64th CPU of 8,192 made taskset lists kilobytes long;
    64 of them were a 147 kB snippet, and the report CPU Doctor wrote could not be read back (65,536 a field)."""
    from cpudoctor.advisor import snippets
    from cpudoctor.model.topology import L3Domain
    from cpudoctor import advisor
    from cpudoctor.report_file import MAX_STRING, report_from_json

    report, cpus = _report_of_8192_cpus()
    topo = report.topology
    topo.l3_domains = [L3Domain(cpus[i::64], 1 << 20) for i in range(64)]
    text = snippets.pinned_launches(report)
    assert len(text) <= snippets.MAX_LAUNCH_CHARS + 200 < MAX_STRING
    assert "more NUMA nodes and L3 domains" in text
    report.findings = advisor.diagnose(report)
    assert all(len(f.snippet) < MAX_STRING for f in report.findings)
    report_from_json(report.to_json())                  # what CPU Doctor writes, it reads back


# ---------------------------------------------------------------------------- item 12: a tree of many CPUs


def test_sibling_lists_naming_every_cpu_are_garbled_not_expanded(tmp_path):
    """Every CPU of a 100,000-CPU tree saying its core has 65,536 threads took `report --root` a minute (8,192 CPUs
    read, each list expanded and intersected): a core's list past 16 threads is garbled, with a note."""
    import shutil

    from cpudoctor.probes import probe_topology

    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    cpu_dir = tree / "sys/devices/system/cpu"
    for p in [tree, *tree.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    for n in range(16, 3000):
        topo = cpu_dir / f"cpu{n}" / "topology"
        topo.mkdir(parents=True)
        (topo / "thread_siblings_list").write_text("0-65535\n")
        (topo / "core_id").write_text(f"{n}\n")
    (cpu_dir / "online").chmod(0o644)
    (cpu_dir / "online").write_text("0-2999\n")
    with deadline(120):
        topo = probe_topology(tree)
    assert topo.logical_cpus == 3000
    assert any("names 65,536 CPUs, more than the 16" in n for n in topo.notes), topo.notes[:5]


def test_a_capture_skips_files_past_its_budget(tmp_path, monkeypatch):
    """Sparse files in every folder of a tree are not read whole into a capture: the budget stops it."""
    import shutil
    import tarfile

    from cpudoctor import capture as cap

    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    for p in [tree, *tree.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    monkeypatch.setattr(cap, "MAX_CAPTURE_BYTES", 64 << 10)
    for n in range(16):
        big = tree / f"sys/devices/system/cpu/cpu{n}/topology/core_cpus_list"
        with open(big, "wb") as fh:
            fh.truncate(60 << 10)
    result = cap.capture(tmp_path / "c.tar.gz", root=tree, force=True)
    assert result.bytes <= 64 << 10
    assert any("were not packed" in s for s in result.skipped) and "were not packed" in result.summary()
    with tarfile.open(result.path) as tar:
        assert sum(m.size for m in tar.getmembers() if m.isfile()) <= (64 << 10) + 4096


# ---------------------------------------------------------------------------- item 13: lab-run metrics


def _with_damaged_runs() -> str:
    from lab_samples import gemm_run, lab_runs
    from roofline_samples import runs

    report = sample_report()
    report.benchmarks = lab_runs() + runs() + [gemm_run()]
    data = json.loads(report.to_json())
    b = data["benchmarks"]
    b[2]["metrics"]["points"][0]["gflops"] = "abc"                      # gemm: a figure as text
    del b[4]["metrics"]["nominal"][0]["cores"]                          # roofline: a key every nominal has
    b[3]["metrics"]["points"][1]["batch"] = "1e999"                     # quant
    b[0]["metrics"]["samples_per_s"] = [1, 2]                           # train
    b[-1]["metrics"]["points"] = 5                                      # gemm: not a list
    return json.dumps(data)


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json", "pdf"])
def test_damaged_lab_runs_are_left_out_with_a_note_in_every_format(fmt, qapp):
    from cpudoctor.export import render_export
    from cpudoctor.report_file import report_from_json

    report = report_from_json(_with_damaged_runs())
    kinds = [r.kind for r in report.benchmarks]
    assert kinds.count("gemm") == 1 and "roofline" not in kinds and "quant" not in kinds, kinds
    notes = [n for n in report.notes if "is damaged and is not shown" in n]
    assert len(notes) == 5 and all("\n" not in n for n in notes)
    assert "$.benchmarks[2].metrics.points[0].gflops: expected a number or null, got a string" in notes[1]
    out = render_export(report, fmt)
    if fmt in ("text", "md", "json"):
        assert "is damaged and is not shown" in " ".join(out.decode().split())


def test_a_report_with_damaged_runs_fills_the_overview(qtbot, tmp_path):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from cpudoctor.gui.main_window import MainWindow
    from cpudoctor.gui.model import AppModel

    path = tmp_path / "r.json"
    path.write_text(_with_damaged_runs())
    win = MainWindow(AppModel(), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                     collect=False)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.collector.opened, timeout=60_000):
        win.open_report(path)
    for title in ("Overview", "Training", "Report"):
        win.show_page(title)
        QApplication.processEvents()
    assert win.model.read_only and win.model.report is not None
    assert len(win.model.report.benchmarks) == 3
    win.close()


def test_the_lab_metrics_schema_knows_every_kind_the_lab_writes():
    from cpudoctor import resources
    from cpudoctor.lab.results import KINDS
    from cpudoctor.report_file import LAB_KINDS

    assert tuple(KINDS) == LAB_KINDS
    assert set(LAB_KINDS) <= set(resources.load_json("lab_metrics.schema.json")["$defs"])


def test_every_real_lab_result_fits_its_schema():
    """The shapes the jobs write (through lab/results.py) all pass: the check refuses damage, not data."""
    from lab_samples import infer_run, kernel_run, lab_runs
    from roofline_samples import runs

    from cpudoctor.model.serde import to_data
    from cpudoctor.report_file import lab_run_problem

    for run in lab_runs() + runs() + [kernel_run(), infer_run()] + sample_report().benchmarks:
        assert lab_run_problem(to_data(run)) is None, (run.kind, lab_run_problem(to_data(run)))


# ---------------------------------------------------------------------------- item 14: knowledge files


@pytest.fixture
def damaged_resources(tmp_path, monkeypatch):
    """A copy of resources/ that the knowledge loaders read instead; the test damages it."""
    import shutil

    from cpudoctor import resources

    real = Path(resources.__file__).parent
    copy = tmp_path / "resources"
    copy.mkdir()
    for p in real.iterdir():
        if p.is_file():
            shutil.copy(p, copy / p.name)

    def path(name):
        ref = copy / name
        if not os.path.lexists(ref):
            raise FileNotFoundError(f"no resource {name!r}; known: ...")
        return ref

    monkeypatch.setattr(resources, "path", path)
    monkeypatch.setattr(resources, "read_bytes", lambda name: path(name).read_bytes())
    from cpudoctor.knowledge import validated

    validated.listed.cache_clear()
    yield copy
    validated.listed.cache_clear()


@pytest.mark.parametrize("damage", ["flags: 5", "a FIFO", "a link to /dev/zero", "nested 200,000 deep",
                                    "no schema", "3 GB sparse"])
def test_a_damaged_knowledge_file_is_one_line_naming_it(damage, damaged_resources):
    from cpudoctor.knowledge import KnowledgeError
    from cpudoctor.knowledge.flags import FlagCatalogue

    flags = damaged_resources / "flags.json"
    if damage == "flags: 5":
        flags.write_text(json.dumps(dict(json.loads(flags.read_text()), flags=5)))
    elif damage == "a FIFO":
        flags.unlink()
        os.mkfifo(flags)
    elif damage == "a link to /dev/zero":
        flags.unlink()
        flags.symlink_to("/dev/zero")
    elif damage == "nested 200,000 deep":
        flags.write_text("[" * 200_000 + "]" * 200_000)
    elif damage == "no schema":
        (damaged_resources / "flags.schema.json").unlink()
    else:
        with open(flags, "r+b") as fh:
            fh.truncate(3 << 30)
    with deadline(30), pytest.raises(KnowledgeError) as caught:
        FlagCatalogue("flags.json", "damaged").data
    message = str(caught.value)
    assert "\n" not in message and "resources/flags" in message and len(message) < 300, message


def test_a_huge_knowledge_list_is_not_read_whole(damaged_resources):
    from cpudoctor.knowledge import validated

    with open(damaged_resources / validated.MANIFEST, "r+b") as fh:
        fh.truncate(3 << 30)
    with deadline(30):
        assert validated.listed() == {}                # nothing trusted: every file is validated instead


def test_the_commands_say_a_knowledge_error_in_one_line(monkeypatch, capsys):
    from cpudoctor.commands import explain
    from cpudoctor.knowledge import KnowledgeError

    def broken(args):
        raise KnowledgeError("resources/flags.json does not match its schema: $.flags must be object")

    monkeypatch.setattr(explain, "run", broken)
    from cpudoctor.cli import build_parser

    parser = build_parser("explain")
    monkeypatch.setattr("cpudoctor.cli.build_parser", lambda *_a, **_k: parser)
    for action in parser._subparsers._group_actions[0].choices.values():
        if action.prog.endswith("explain"):
            action.set_defaults(func=broken)
    code, out, err = run_cli(capsys, "explain", "ISA001")
    assert code == 1 and out == "" and err.count("\n") == 1 and "resources/flags.json" in err, err
    assert "Traceback" not in err


# ---------------------------------------------------------------------------- fileio: checked before the work


def test_check_writable_refuses_what_atomic_write_would(tmp_path):
    from cpudoctor.fileio import WriteError, check_writable

    (tmp_path / "sock").touch()
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    assert check_writable(tmp_path / "new.txt") == tmp_path / "new.txt"
    assert check_writable(fifo) == fifo                          # -o into a pipe a reader holds is fine
    for bad, words in ((tmp_path, "folder"), (tmp_path / "missing" / "x", "does not exist"),
                       (str(tmp_path) + "/", "folder"), ("", "empty")):
        with pytest.raises(WriteError, match=words):
            check_writable(bad)
    with pytest.raises(WriteError, match="named pipe"):
        check_writable(fifo, "--plot", pipes=False)
    assert sys.platform != "win32"


def test_the_offline_node_launches_of_scattered_cpus_fit_a_reports_field():
    """The same bound for TOPO's CPUs-without-memory finding, which listed a launch per node without any: 64 nodes
    of scattered CPUs beside CPUs of no node made a snippet no saved report could hold."""
    from cpudoctor import advisor
    from cpudoctor.advisor import snippets
    from cpudoctor.model.topology import NumaNode
    from cpudoctor.report_file import MAX_STRING, report_from_json

    report, cpus = _report_of_8192_cpus()
    topo = report.topology
    topo.numa_nodes = [NumaNode(i, cpus[i:8000:64], [10] * 64) for i in range(64)]     # 192 CPUs of no node
    report.findings = advisor.diagnose(report)
    offline = [f for f in report.findings if "no local memory" in f.title]
    assert offline and "more NUMA nodes and L3 domains" in offline[0].snippet
    assert all(len(f.snippet) <= snippets.MAX_LAUNCH_CHARS + 200 for f in offline)
    assert all(len(f.snippet) < MAX_STRING for f in report.findings)
    report_from_json(report.to_json())
