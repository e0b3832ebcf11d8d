"""One sanitiser for every text sink (issue 29, items 15-18).

Report data (a CPU brand, a note, a process name, an environment variable)
may carry terminal controls, bidirectional overrides and marks, line
separators, lone surrogates. Whatever CPU Doctor writes, to the terminal or
with ``-o`` to a file, in text, Markdown, JSON, HTML or SVG, carries none of
them raw: text drops them, JSON escapes them (the data survives), SVG stays
well-formed XML. Commands a page suggests name the real file (quoted for the
shell), and argv never shows a URL's password.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from xml.dom import minidom

import pytest

from conftest import run_cli
from export_samples import sample_report
from inspect_fakes import FakeProc

# Everything no output may hold raw: C0 but tab/newline, DEL, C1, bidi marks/embeddings/overrides/isolates,
# the line and paragraph separators, lone surrogates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                    "\ud800-\udfff]")
PAYLOADS = ["\x1b]52;c;aGk=\x07", "\x1b[2J", "\x07", "\x00", "\r", "\x9b31m", "\x85", "\u202e", "\u200f",
            "\u061c", "\u200e", "\u2028", "\u2029", "\u2066", "\udcff", "\ufffe", "]]>", "<!--", "&amp;", "'\"<>"]
EVIL = "AMD Evil " + "|".join(PAYLOADS) + " CPU"


def _hostile_report(path: Path) -> Path:
    report = sample_report()
    report.cpu.brand = EVIL
    report.notes = [f"note {p} end" for p in PAYLOADS]
    report.topology.notes = [EVIL]
    path.write_text(report.to_json(), errors="surrogateescape")
    return path


def test_the_sanitiser_drops_bidi_marks_and_line_separators():
    from cpudoctor.kits.escape import html_escape, md_code, md_escape, strip_controls, terminal_safe

    for ch in ("\u200e", "\u200f", "\u061c", "\u2028", "\u2029", "\u202e", "\u2067", "\x9b", "\x1b"):
        for clean in (strip_controls, terminal_safe, md_escape, md_code, html_escape):
            assert not UNSAFE.search(clean(f"a{ch}b")), (clean.__name__, ch)
    assert strip_controls("one\u2028two") == "one two"          # a separator still separates words


def test_json_writes_no_raw_c1_or_bidi_and_the_data_survives():
    from cpudoctor.model.report import JSON_UNSAFE
    from cpudoctor.report_file import report_from_json

    report = sample_report()
    report.cpu.brand = "x\x9by\u202ez\u2028\u200f®"
    text = report.to_json()
    assert not UNSAFE.search(text) and "®" in text and "\\u009b" in text
    assert report_from_json(text).cpu.brand == report.cpu.brand
    assert re.compile(f"[{JSON_UNSAFE}]").pattern[1:-1] == JSON_UNSAFE


def test_the_json_export_keeps_noncharacters_as_escapes():
    """U+FFFE/U+FFFF are stripped from text (XML forbids them); the JSON export escapes them, so the data
    survives the sink (the fuzz family found a brand ending in U+FFFF come back without it)."""
    from cpudoctor.export import render_export
    from cpudoctor.report_file import report_from_json

    report = sample_report()
    report.cpu.brand = "\x00x\ufffey\uffff"
    text = render_export(report, "json", include_identifying=True).decode("utf-8")
    assert "\ufffe" not in text and "\uffff" not in text
    assert report_from_json(text).cpu.brand == report.cpu.brand


@pytest.mark.parametrize("fmt", ["text", "md", "json"])
def test_doctor_writes_the_same_clean_text_to_a_file_as_to_the_terminal(fmt, tmp_path, capsys):
    report = _hostile_report(tmp_path / "evil.json")
    code, out, err = run_cli(capsys, "doctor", "--from-report", str(report), "--format", fmt)
    assert code == 0, err
    target = tmp_path / f"out.{fmt}"
    code, _, err = run_cli(capsys, "doctor", "--from-report", str(report), "--format", fmt, "-o", str(target))
    assert code == 0, err
    written = target.read_text()
    assert not UNSAFE.search(written) and not UNSAFE.search(out)
    assert written.rstrip("\n") == out.rstrip("\n")
    if fmt == "json":
        json.loads(written)


@pytest.mark.parametrize("fmt", ["text", "md", "json"])
def test_compare_writes_clean_text_to_a_file(fmt, tmp_path, capsys):
    evil = _hostile_report(tmp_path / "evil.json")
    plain = tmp_path / "plain.json"
    plain.write_text(sample_report().to_json())
    target = tmp_path / f"cmp.{fmt}"
    code, _, err = run_cli(capsys, "compare", str(plain), str(evil), "--format", fmt, "-o", str(target),
                           "--include-identifying")
    assert code == 0, err
    assert not UNSAFE.search(target.read_text())


@pytest.mark.parametrize("fmt", ["md", "text", "json", "html"])
def test_report_exports_hold_no_raw_controls(fmt, tmp_path):
    from cpudoctor.export import render_export
    from cpudoctor.report_file import load_report

    report = load_report(_hostile_report(tmp_path / "evil.json"))
    out = render_export(report, fmt, include_identifying=True).decode("utf-8")
    assert not UNSAFE.search(out), UNSAFE.search(out)


def test_the_html_export_topology_svg_escapes_the_brand(tmp_path):
    from cpudoctor.export import render_export
    from cpudoctor.report_file import load_report

    report = load_report(_hostile_report(tmp_path / "evil.json"))
    page = render_export(report, "html", include_identifying=True).decode("utf-8")
    svg = page[page.index("<svg"):page.index("</svg>") + 6]
    minidom.parseString(svg)                                   # well-formed XML
    label = re.search(r'aria-label="([^"]*)"', svg).group(1)
    assert not UNSAFE.search(label) and "&lt;" in label


@pytest.mark.parametrize("payload", PAYLOADS + ["\ud800", "\x0b\x0c", "a" * 5000, "\U0001f600", "\ufeff"])
def test_render_svg_is_well_formed_xml_for_every_payload(payload):
    from cpudoctor.render.svg_chart import Chart, Series, render_chart
    from cpudoctor.render.svg_topology import render_svg

    topo = sample_report().topology
    topo.notes = [payload]
    for svg in (render_svg(topo, title=f"Topology of {payload}"),
                render_svg(type(topo)(notes=[payload]), title=payload)):
        minidom.parseString(svg.encode("utf-8"))
        assert not UNSAFE.search(svg)
    chart = render_chart(Chart(title=payload, x_label=payload, y_label=payload,
                               series=[Series(name=payload, points=[(1.0, 2.0), (2.0, 3.0)])]))
    minidom.parseString(chart.encode("utf-8"))


# ---------------------------------------------------------------------------- inspect

@pytest.fixture
def hostile_process(tmp_path) -> Path:
    home = os.path.expanduser("~")
    fp = FakeProc(tmp_path)
    venv = f"{home}/ve\x1b[31mnv\u202e"
    fp.add_process(4321, "py\x1b]0;x\x07thon", cmdline=[f"{venv}/bin/python", "-c", "import train",
                                                         "postgres://u:secret@h/x", "--db",
                                                         "mysql://root:hunter2@db:3306/x"],
                   environ={"OMP_NUM_THREADS": "2\x1b[2J\u2028", "VIRTUAL_ENV": venv})
    os.symlink(f"{venv}/bin/python", fp.pdir(4321) / "exe")
    return tmp_path


def test_inspect_text_and_file_are_clean_and_the_python_is_shortened(hostile_process, tmp_path, capsys):
    code, out, err = run_cli(capsys, "inspect", "4321", "-s", "0.2", "--root", str(hostile_process))
    assert code == 0, err
    target = tmp_path / "insp.txt"
    code, _, err = run_cli(capsys, "inspect", "4321", "-s", "0.2", "--root", str(hostile_process), "-o", str(target))
    assert code == 0, err
    for text in (out, target.read_text()):
        assert not UNSAFE.search(text)
        assert "secret" not in text and "hunter2" not in text
        home = os.path.expanduser("~")
        if home not in ("/", ""):
            assert home + "/" not in text, text
    python_line = next(line for line in out.splitlines() if line.startswith("Python"))
    assert python_line.startswith("Python       ~/ve")


def test_inspect_suggests_a_command_that_names_the_real_interpreter(hostile_process, capsys):
    import shlex
    import subprocess

    code, out, err = run_cli(capsys, "inspect", "4321", "-s", "0.2", "--root", str(hostile_process))
    line = next(line for line in out.splitlines() if "cpudoctor doctor --python" in line)
    quoted = line.split("cpudoctor doctor --python ", 1)[1]
    assert not UNSAFE.search(quoted)
    # bash reads the word back as the interpreter's real path (controls included)
    real = f"{os.path.expanduser('~')}/ve\x1b[31mnv\u202e/bin/python"
    shown = subprocess.run(["bash", "-c", f"printf %s {quoted}"], capture_output=True).stdout.decode("utf-8")
    assert shown == real, (quoted, shlex.quote(shown))


def test_inspect_json_shortens_the_python_and_keeps_no_raw_controls(hostile_process, tmp_path, capsys):
    target = tmp_path / "insp.json"
    code, _, err = run_cli(capsys, "inspect", "4321", "-s", "0.2", "-f", "json", "--root", str(hostile_process),
                           "-o", str(target))
    assert code == 0, err
    text = target.read_text()
    assert not UNSAFE.search(text) and "secret" not in text and "hunter2" not in text
    data = json.loads(text)
    assert data["inspection"]["python"].startswith("~/ve\x1b[31mnv")


@pytest.mark.parametrize("argv", [
    ["python", "-c", "import x", "postgres://u:secret@h/x"],
    ["postgres://u:secret@h/x"],
    ["python", "https://user:secret@example.com/train.py"],
    ["python", "train.py", "--threads", "http://u:secret@h"],
    ["python", "train.py", "URL=redis://:secret@h:6379/0"],
])
def test_argv_never_shows_a_urls_password(argv):
    from cpudoctor.probes.process.procfs import redact_args

    shown = " ".join(redact_args(argv))
    assert "secret" not in shown, shown


def test_inspect_list_redacts_url_passwords(hostile_process, capsys):
    code, out, err = run_cli(capsys, "inspect", "--list", "--root", str(hostile_process))
    assert code == 0, err
    assert "secret" not in out and "hunter2" not in out and not UNSAFE.search(out)


def test_envs_file_output_is_clean(tmp_path, capsys, monkeypatch):
    from cpudoctor.probes.software import envs

    fake = [envs.PythonEnv(python="/opt/e\x1b[2Jvil\u202e/bin/python", prefix="/opt/e\x1b[2Jvil\u202e",
                           kind="venv", name="e\x1b]52;c;aGk=\x07vil\u2028", version="3.12.1\x9b")]
    monkeypatch.setattr(envs, "discover", lambda **kw: fake)
    for fmt in ("text", "json"):
        target = tmp_path / f"envs.{fmt}"
        code, out, err = run_cli(capsys, "envs", "--format", fmt, "-o", str(target))
        assert code == 0, err
        assert not UNSAFE.search(target.read_text()), fmt


def test_the_inspectors_copy_is_as_clean_as_the_terminal(qtbot, hostile_process):
    """The clipboard is a text sink too: the Inspector's Copy holds no raw control from a process's name."""
    from cpudoctor.gui.inspector_page import InspectorPage
    from cpudoctor.gui.model import AppModel
    from cpudoctor.probes.process.inspect import inspect_process
    from cpudoctor.model import Topology

    page = InspectorPage(AppModel())
    qtbot.addWidget(page)
    page.inspection = inspect_process(4321, 0.2, hostile_process, Topology())
    page.findings = []
    text = page.text()
    assert "Process 4321" in text and not UNSAFE.search(text)


def test_the_time_breakdowns_process_tree_redacts_argv(tmp_path):
    """``cpudoctor run`` and the Inspector's Time tab show every process of the job's tree: a real child
    whose argv carries a URL's password and a key shows neither (nor a raw control)."""
    import subprocess
    import sys

    from conftest import wait_for
    from cpudoctor.probes.process.threadstates import TreeSampler

    script = tmp_path / "train.py"
    script.write_text("import sys\nsys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, str(script), "--db", "postgres://u:secret@h/x",
                              "--key", "sk-hunter2", "note\x1b[2J\u202e"], stdin=subprocess.PIPE)
    try:
        # the sampler reads a process's argv once: start it when the child runs the script (after exec)
        wait_for(lambda: b"train.py" in Path(f"/proc/{child.pid}/cmdline").read_bytes(), 60, "the child's exec")
        sampler = TreeSampler(child.pid)
        sampler._t0 = sampler.clock()
        proc = wait_for(lambda: sampler.take() and sampler.result.processes.get(child.pid), 60,
                        "the sampler to see the child")
        shown = proc.cmdline
    finally:
        child.stdin.close()
        child.wait(60)
    assert "secret" not in shown and "hunter2" not in shown and not UNSAFE.search(shown), shown
    assert "train.py" in shown and "--db" in shown


def test_run_json_escapes_controls_and_keeps_the_command(tmp_path):
    """``cpudoctor run --format json``: a command line with a bidi override and a C1 control is written with
    ``\\u`` escapes (the data survives, nothing raw), like every other JSON CPU Doctor writes. The odd text
    is the script's name: the command is shown as ``inspect`` shows one, other arguments redacted."""
    import subprocess
    import sys

    target = tmp_path / "run.json"
    odd = "x\u202ey\x9bz.py"
    (tmp_path / odd).write_text("pass\n")
    proc = subprocess.run([sys.executable, "-m", "cpudoctor", "run", "--format", "json", "-o",
                           str(target), "--", sys.executable, odd, "\u2028"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = target.read_text()
    assert not UNSAFE.search(text)
    assert odd in json.loads(text)["command"]


def test_a_string_escape_that_never_ends_takes_its_line_only():
    """A lone SOS/OSC/DCS byte (a lab run named "\\x98" in a damaged report) once took the whole rest of the
    report: its other runs and the notes saying what was left out. A terminal would wait for the string's end;
    stripped, the introducer is gone and the next lines are plain text again."""
    from cpudoctor.kits.escape import strip_controls

    for start in ("\x98", "\x9d", "\x90", "\x1b]", "\x1bP", "\x1b_"):
        assert strip_controls(f"kind {start}junk\nnext line\nNotes") == "kind \nnext line\nNotes"
    assert strip_controls("a\x1b]52;c;aGk=\x07b\nc") == "ab\nc"          # ended strings go as before
    assert strip_controls("a\x9d0;title\x9cb") == "ab"
