"""Fuzzing the hostile-input families of issue 19 with hypothesis: trees, reports, arguments.

Each family throws random variations at the real code paths and counts, per
example: an **attempt**; a **traceback** (any exception but the one-line error
the code promises); a **hang** (an example past ``CPUDOCTOR_FUZZ_TIMEOUT``
seconds, FIFOs and /dev/zero included); a **leak** (a file outside the tree
opened, its secret in an output or a tarball, a tar member outside its folder,
an escape sequence on the terminal). All but attempts must stay 0.

``make test`` runs a few examples per family (``CPUDOCTOR_FUZZ_EXAMPLES``,
default 8) so the suite stays fast; ``make fuzz`` runs hundreds and prints the
figures from ``test-output/fuzz-summary.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import sys
import tarfile
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, alarm, machine_root
from cpudoctor.report_file import load_report, report_from_json

EXAMPLES = int(os.environ.get("CPUDOCTOR_FUZZ_EXAMPLES", "8"))
TIMEOUT = float(os.environ.get("CPUDOCTOR_FUZZ_TIMEOUT", "30"))
SUMMARY = REPO / "test-output" / "fuzz-summary.json"
CANARY = "CANARY-4b1d-OUTSIDE-THE-TREE"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
STATS: dict[str, Counter] = {}


class Hang(Exception):
    """An example ran past the time limit."""


class Leak(AssertionError):
    """Something from outside the tree, or a raw escape sequence, got out."""


class Destroyed(AssertionError):
    """A device node or FIFO the app was pointed at is no longer one (it was replaced by a file)."""


def watchdog(seconds: float = TIMEOUT):
    """Raise Hang in the main thread after ``seconds`` (interrupts a blocking open of a FIFO too)."""
    return alarm(seconds, Hang)


@contextlib.contextmanager
def counted(family: str):
    """Count one attempt of ``family`` and classify how it ended; failures are re-raised."""
    stats = STATS.setdefault(family, Counter())
    stats["attempts"] += 1
    try:
        yield
    except Hang:
        stats["hangs"] += 1
        raise
    except Leak:
        stats["leaks"] += 1
        raise
    except Destroyed:
        stats["destroyed"] += 1
        raise
    except BaseException:
        stats["tracebacks"] += 1
        raise


@pytest.fixture(scope="module", autouse=True)
def summary():
    """Write the figures of this run for ``make fuzz`` (test-output/ is ignored by git)."""
    yield
    SUMMARY.parent.mkdir(exist_ok=True)
    figures = {family: {k: c.get(k, 0) for k in ("attempts", "tracebacks", "hangs", "leaks", "destroyed")}
               for family, c in sorted(STATS.items())}
    SUMMARY.write_text(json.dumps({"examples_per_test": EXAMPLES, "families": figures}, indent=2) + "\n")


# ---------------------------------------------------------------------------- opened files outside the tree

_OPENED_OUTSIDE: list[str] = []
_WATCHED: list[str] = []          # folders no read may touch while a tree is probed
_HOOK_LOCK = threading.Lock()


def _audit(event: str, args: tuple) -> None:
    if event not in ("open", "os.listdir", "os.scandir") or not _WATCHED or not args \
            or not isinstance(args[0], (str, os.PathLike)):
        return
    path = os.path.abspath(os.fspath(args[0]))
    for folder in _WATCHED:
        if path == folder or path.startswith(folder + os.sep):
            _OPENED_OUTSIDE.append(path)


sys.addaudithook(_audit)          # audit hooks cannot be removed; it does nothing unless _WATCHED is set


@contextlib.contextmanager
def forbid_reads(folder: Path):
    with _HOOK_LOCK:
        _OPENED_OUTSIDE.clear()
        _WATCHED[:] = [str(folder.resolve())]
    try:
        yield
    finally:
        _WATCHED.clear()
    if _OPENED_OUTSIDE:
        raise Leak(f"opened outside the tree: {_OPENED_OUTSIDE[:3]}")


def _no_escapes(text: str, where: str) -> None:
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text):
        raise Leak(f"a control character reached the {where} output")


# ---------------------------------------------------------------------------- family 1: mutated trees

TREES = ["hwloc-16amd64-8n2c", "hwloc-16amd64-4n4c-cgroup-distance-merge", "hwloc-x86linux-5intel64-hybrid-lakefield",
         "archspec-rocky8-a64fx", "hwloc-32amd64-4s2n4c-cgroup2"]
# The files the probes parse, named so every example can hit one of them.
HOT_FILES = ["proc/cpuinfo", "proc/meminfo", "proc/self/cgroup", "proc/self/mounts", "proc/self/status",
             "sys/devices/system/cpu/online", "sys/devices/system/cpu/offline", "sys/devices/system/cpu/possible",
             "sys/devices/system/cpu/cpu0/topology/core_cpus_list", "sys/devices/system/cpu/cpu0/topology/core_id",
             "sys/devices/system/cpu/cpu0/topology/thread_siblings", "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
             "sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_map", "sys/devices/system/cpu/cpu0/cache/index2/size",
             "sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list", "sys/devices/system/cpu/cpu0/cache/index3/size",
             "sys/devices/system/node/online", "sys/devices/system/node/node0/cpulist",
             "sys/devices/system/node/node0/distance", "sys/devices/system/node/node0/meminfo",
             "sys/fs/cgroup/cpu.max", "sys/fs/cgroup/cpuset.cpus.effective", "etc/os-release",
             "sys/class/dmi/id/product_name", "sys/devices/system/cpu/cpu1/online"]

HOSTILE_TEXT = st.one_of(
    st.sampled_from(["", "\0", "0-100000000", "5-2", "0-65536", "-1", "inf", "-inf", "nan", "1e999K", "-512K",
                     "²", "٣", "cpu²", "10 ² 20", "0-3,,,8-", ":", "0-63:0", "0-63:100000000", "f" * 70_000,
                     "9" * 5000, "0x" + "f" * 40, "max max", "0::/../../../../outside", "processor\t: 99999999",
                     "siblings\t: 99999999999", "model name\t: \x1b]52;c;aGk=\x07\x1b[2J`rm -rf ~`",
                     "cpu MHz\t: 1e999", "flags\t: " + " ".join(f"f{i}" for i in range(5000)),
                     "cgroup2 /sys/fs/../../outside cgroup2 rw 0 0", "Serial\t: 100000003a8bd6f5",
                     "\udcff\udcfe", "\u202e\u2066", "NaN", "Infinity", "[[[[", "{}" * 1000]),
    st.text(max_size=120),
    st.builds(lambda a, b: f"{a}-{b}", st.integers(-10, 10 ** 12), st.integers(-10, 10 ** 12)),
    st.builds(lambda n: "f" * n, st.integers(0, 300_000)),
)


@st.composite
def tree_mutation(draw, files: list[str]):
    target = draw(st.sampled_from(HOT_FILES) | st.sampled_from(files))
    kind = draw(st.sampled_from(["text", "text", "text", "fifo", "zero", "outside-abs", "outside-rel", "loop",
                                 "dir", "huge", "odd-dirs"]))
    return kind, target, draw(HOSTILE_TEXT) if kind == "text" else ""


def _apply(tree: Path, outside: Path, kind: str, rel: str, text: str) -> None:
    path = tree / rel
    if not (tree / rel).parent.resolve().is_relative_to(tree.resolve()):
        return                                          # an earlier mutation made a parent a link out
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return                                          # the folder is a dangling link in this corpus tree
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        shutil.rmtree(path)
    elif mode is not None:
        path.unlink()                                   # a file, a link or a FIFO (never opened here)
    if kind == "text":
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "outside-abs":
        path.symlink_to(outside / "secret")
    elif kind == "outside-rel":
        path.symlink_to("../" * (rel.count("/") + 1) + "outside/secret")
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dir":
        path.mkdir()
    elif kind == "huge":
        with open(path, "wb") as fh:                    # sparse: 17 MiB of zeros, above the read cap
            fh.truncate(17 << 20)
    elif kind == "odd-dirs":
        path.write_text("0\n")
        for d in ("sys/devices/system/cpu/cpu²", "sys/devices/system/node/node٣",
                  "sys/devices/system/cpu/cpu99999999999", "sys/devices/system/cpu/cpu0/cache/index²"):
            (tree / d).mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
def base_trees(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fuzz-base")
    for name in TREES:
        shutil.copytree(machine_root(name), base / name, symlinks=True)
        for p in (base / name).rglob("*"):              # corpus files are read-only: let examples replace them
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
    return base


def _check_tree_outputs(tree: Path, outside: Path, work: Path) -> None:
    from cpudoctor import advisor
    from cpudoctor.capture import TOP, CaptureError, capture
    from conftest import probe_tree
    from cpudoctor.render.doctor import render_json, render_md, render_text
    from cpudoctor.export import render_export
    from cpudoctor.kits.escape import terminal_safe
    from cpudoctor.model import Report

    with forbid_reads(outside):
        report = probe_tree(tree, software=True)
        report.findings = advisor.diagnose(report)
        outputs = {fmt: render_export(report, fmt).decode() for fmt in ("md", "text", "json", "html")}
        outputs["doctor"] = render_text(report, report.findings, "tree") + render_md(report, report.findings, "tree")
        outputs["doctor-json"] = render_json(report, report.findings, "tree")
        back = report_from_json(report.to_json())          # what was written reads back
        assert back.topology.logical_cpus == report.topology.logical_cpus
        try:
            result = capture(work / "c.tar.gz", root=tree, force=True)
        except CaptureError as exc:
            assert "\n" not in str(exc)
            result = None
    for fmt, text in outputs.items():
        if CANARY in text:
            raise Leak(f"the secret outside the tree is in the {fmt} output")
    _no_escapes(terminal_safe(outputs["text"]), "terminal")
    if result is not None:
        with tarfile.open(result.path) as tar:
            for m in tar.getmembers():
                parts = m.name.split("/")
                if parts[0] != TOP or ".." in parts or m.name.startswith("/"):
                    raise Leak(f"tar member outside its folder: {m.name!r}")
                if m.issym() and not os.path.normpath(os.path.join(os.path.dirname(m.name), m.linkname)).startswith(
                        TOP + "/"):
                    raise Leak(f"symlink out of the capture: {m.name} -> {m.linkname}")
                if m.isfile() and CANARY.encode() in tar.extractfile(m).read():
                    raise Leak(f"the secret outside the tree was packed as {m.name}")


@FUZZ
@given(data=st.data())
def test_mutated_trees(base_trees, tmp_path_factory, data):
    name = data.draw(st.sampled_from(TREES), label="machine")
    files = sorted(str(p.relative_to(base_trees / name)) for p in (base_trees / name).rglob("*") if p.is_file())
    mutations = data.draw(st.lists(tree_mutation(files), min_size=1, max_size=4), label="mutations")
    work = tmp_path_factory.mktemp("fuzz-tree")
    tree, outside = work / "tree", work / "outside"
    shutil.copytree(base_trees / name, tree, symlinks=True)
    outside.mkdir()
    (outside / "secret").write_text(CANARY + "\n")
    for kind, rel, text in mutations:
        _apply(tree, outside, kind, rel, text)
    with counted("trees"), watchdog():
        _check_tree_outputs(tree, outside, work)
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 2: mutated reports

SCENARIOS = sorted((REPO / "tests/fixtures/scenarios").glob("*.json"))

RAW_VALUES = st.one_of(
    st.sampled_from(["null", "NaN", "-Infinity", "Infinity", "1e400", "-1e400", "9" * 5000, "-1", "0", "65535",
                     "65536", "1e15", "1e300", "4.5", "true", "[]", "{}", '""', "[null]", "[-1]", "[1e400]",
                     "[" * 80 + "]" * 80, "[" * 3000 + "]" * 3000, json.dumps("A" * 70_000), json.dumps("A" * 300),
                     json.dumps("\x1b]52;c;aGk=\x07\x1b[2Jevil`code` <img src=x onerror=alert(1)> |x| [l](j:x)"),
                     json.dumps("\u202e\u0000\x9b31m"), json.dumps(list(range(70_000))), '{"a": NaN}']),
    st.integers(-(10 ** 20), 10 ** 20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: json.dumps(f)),
    st.text(max_size=80).map(json.dumps),
    st.lists(st.integers(-5, 70_000), max_size=20).map(json.dumps),
)


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data[:6]):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated_report(draw) -> tuple[str, str]:
    from export_samples import sample_report

    source = draw(st.sampled_from(["sample", *range(len(SCENARIOS))]))
    text = sample_report().to_json() if source == "sample" else SCENARIOS[source].read_text()
    data = json.loads(text)
    for n in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if op == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=20))] = f"__FUZZ{n}__"
        else:
            parent[path[-1]] = f"__FUZZ{n}__"
    text = json.dumps(data)
    for n in range(4):
        text = text.replace(f'"__FUZZ{n}__"', draw(RAW_VALUES), 1)
    if draw(st.integers(0, 9)) == 0:                    # sometimes the text itself is damaged
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.text(max_size=10)) + text[cut + draw(st.integers(0, 20)):]
    return text, sample_report().to_json()


def _check_report(text: str, original: str, work: Path) -> None:
    from cpudoctor import advisor
    from cpudoctor.render.doctor import render_json, render_md, render_text
    from cpudoctor.compare import RENDERERS, compare
    from cpudoctor.export import render_export
    from cpudoctor.privacy import redact_report
    from cpudoctor.kits.escape import terminal_safe
    from cpudoctor.model import Report, ReportError

    path = work / "r.json"
    path.write_text(text, errors="surrogateescape")
    try:
        report = load_report(path)
    except ReportError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 400, message
        return
    report.findings = advisor.diagnose(report)
    outputs = {fmt: render_export(report, fmt).decode() for fmt in ("md", "text", "json", "html")}
    outputs["doctor"] = render_text(report, report.findings, "saved") + render_md(report, report.findings, "saved")
    outputs["doctor-json"] = render_json(report, report.findings, "saved")
    cmp = compare(redact_report(report_from_json(original)), redact_report(report))
    outputs.update({f"compare-{k}": r(cmp) for k, r in RENDERERS.items()})
    for fmt in ("text", "doctor", "compare-text"):
        _no_escapes(terminal_safe(outputs[fmt]), fmt)
    if re.search(r"<img src=x", outputs["html"]):
        raise Leak("report data became HTML markup")
    report_from_json(report.to_json())                  # what it writes, it reads back


@FUZZ
@given(case=mutated_report())
def test_mutated_reports(tmp_path_factory, case):
    work = tmp_path_factory.mktemp("fuzz-report")
    with counted("reports"), watchdog():
        _check_report(*case, work)
    shutil.rmtree(work, ignore_errors=True)


@FUZZ
@given(raw=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bytes_as_reports(tmp_path_factory, raw):
    from cpudoctor.model import Report, ReportError

    path = tmp_path_factory.mktemp("fuzz-bytes") / "r.json"
    path.write_bytes(raw)
    with counted("reports"), watchdog():
        with contextlib.suppress(ReportError):
            load_report(path)


# ---------------------------------------------------------------------------- family 3: argument strings

NASTY_ARGS = st.one_of(
    st.sampled_from(["", "-", "--", "nan", "inf", "-inf", "1e999", "0", "-1", "0-100000000000", "5-2", "²", "٣",
                     "9" * 5000, "x" * 300, "\x1b[2J", "$(id)", "`id`", "a,b", "1,,2", "0x10", "1_000", " 4 ",
                     "ISA001", "THR002,threads", "all", "md", "json", "text", "pdf", "html"]),
    st.text(max_size=30),
    st.integers(-(10 ** 15), 10 ** 15).map(str),
    st.floats().map(str),
)
BENCH_FLAGS = ["--seconds", "--steps", "--threads", "--interop-threads", "--cpus", "--batch-size", "--size",
               "--min-seconds", "--clock-mhz", "--hidden", "--batches", "--model", "--dtype", "--backend"]


@st.composite
def cli_args(draw, tree: str, report: str, out_dir: str) -> list[str]:
    cmd = draw(st.sampled_from(["report", "doctor", "compare", "explain", "capture", "inspect", "bench"]))
    nasty = draw(NASTY_ARGS)
    out_name = draw(st.sampled_from(["out.txt", "out.json", "x" * 300, "newdir/", "missing/dir/out.md",
                                     "out.tar.gz", "ünï code.md", "a\nb.txt", "out.pdf", "", "fifo"]))
    out = os.path.join(out_dir, out_name)
    fifo = os.path.join(out_dir, "fifo")                # a named pipe nobody writes: --root must not open it
    if cmd == "report":
        args = ["report", "--fast", "--root",
                draw(st.sampled_from([tree, tree, "", out_dir, nasty, fifo, "/dev/zero"]))]
        args += draw(st.sampled_from([[], ["--format", nasty], ["--format", "md"], ["-o", out], ["-o", ""],
                                      ["--no-findings"]]))
    elif cmd == "doctor":
        args = ["doctor"] + draw(st.sampled_from([["--root", tree], ["--from-report", report],
                                                  ["--from-report", nasty], ["--root", nasty], ["--root", fifo]]))
        args += draw(st.sampled_from([[], ["--only", nasty], ["--format", nasty], ["-o", out], ["-o", ""],
                                      ["--list-rules"]]))
    elif cmd == "compare":
        args = ["compare", report, draw(st.sampled_from([report, nasty, out]))]
        args += draw(st.sampled_from([[], ["--format", nasty], ["-o", out]]))
    elif cmd == "explain":
        args = ["explain", nasty]
    elif cmd == "capture":
        args = ["capture", "-o", draw(st.sampled_from([out, out + ".tar.gz", f"{out_dir}/{nasty.replace('/', '_')}"])),
                "--root",
                draw(st.sampled_from([tree, nasty, fifo, "/dev/zero"])), "--force"]
    elif cmd == "inspect":
        args = ["inspect", nasty, "--seconds", draw(NASTY_ARGS)]          # parsed only
    else:
        job = draw(st.sampled_from(["train", "sweep", "gemm", "quant", nasty]))
        args = ["bench", job] + [x for f in draw(st.lists(st.sampled_from(BENCH_FLAGS), max_size=3))
                                 for x in (f, draw(NASTY_ARGS))]
    return args


def _run_cli(argv: list[str], capsys) -> None:
    from cpudoctor.cli import build_parser, main

    if argv[0] in ("bench", "inspect"):                 # never start a job or sample a real process here
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            assert exc.code in (0, 2)
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (argv, code)
    assert "Traceback" not in err and err.count("\n") <= 1, err
    if "pdf" not in argv:                               # a PDF on stdout is binary on purpose
        _no_escapes(out, "terminal")


@FUZZ
@given(data=st.data())
def test_argument_strings(base_trees, tmp_path_factory, capsys, data):
    from export_samples import sample_report

    work = tmp_path_factory.mktemp("fuzz-args")
    report = work / "r.json"
    report.write_text(sample_report().to_json())
    os.mkfifo(work / "fifo")
    argv = data.draw(cli_args(str(base_trees / "hwloc-16amd64-8n2c"), str(report), str(work)), label="argv")
    with counted("arguments"), watchdog():
        _run_cli(argv, capsys)
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 2b: odd but valid reports in the window

EXTREMES = {
    int: [0, 1, 65535, 65536, 2 ** 53, 2 ** 63 - 1, -1],
    float: [0.0, 1e-300, 0.5, 65536.0, 100_000.0, float(2 ** 53), 9.2e18],
    str: ["", "A" * 256, "\x1b]52;c;aGk=\x07\x1b[2J`x` <b>bold</b> | [l](javascript:x)", "N" * 65_536, "\u202e٣²"],
    list: [[], list(range(4096)), [0] * 3, [65535]],
}


@st.composite
def odd_valid_report(draw):
    """The sample report with up to 4 fields set to edge values; only ones the checks accept are kept."""
    from export_samples import sample_report

    from cpudoctor import report_file as report_check
    from cpudoctor.model import ReportError

    base = json.loads(sample_report().to_json())
    for _ in range(5):
        data = json.loads(json.dumps(base))
        for _ in range(draw(st.integers(1, 4))):
            path = draw(st.sampled_from([p for p in _paths(data) if p]))
            parent = data
            for key in path[:-1]:
                parent = parent[key]
            old = parent[path[-1]]
            kind = type(old) if type(old) in EXTREMES else draw(st.sampled_from(list(EXTREMES)))
            parent[path[-1]] = draw(st.sampled_from(EXTREMES[kind]))
        try:
            report_check.check(data)
        except ReportError:
            continue
        return json.dumps(data)
    return json.dumps(base)


@settings(max_examples=max(3, EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(text=odd_valid_report())
def test_odd_reports_in_the_window(qtbot, tmp_path_factory, text):
    """Every page of the window shows a report with edge values (the GUI Advisor page died on one)."""
    from PySide6.QtCore import QSettings, QThreadPool
    from PySide6.QtWidgets import QApplication, QMessageBox

    from cpudoctor.gui.main_window import MainWindow
    from cpudoctor.gui.model import AppModel

    work = tmp_path_factory.mktemp("fuzz-gui")
    path = work / "r.json"
    path.write_text(text)
    win = MainWindow(AppModel(), settings=QSettings(str(work / "s.ini"), QSettings.Format.IniFormat), collect=False)
    qtbot.addWidget(win)
    win.show()
    shown: list[str] = []
    old_warning = QMessageBox.warning
    QMessageBox.warning = staticmethod(lambda *a, **k: shown.append(a[2]))   # no modal box in a test
    try:
        with counted("reports in the window"), watchdog(TIMEOUT * 2):
            # Opening runs the report pipeline off the GUI thread; the report arrives as a signal.
            with qtbot.waitSignal(win.collector.opened, timeout=int(TIMEOUT * 1000)):
                win.open_report(path)
            assert shown == [] and win.model.read_only, shown
            for title in list(win.pages):
                win.show_page(title)
                QApplication.processEvents()
            assert QThreadPool.globalInstance().waitForDone(30_000)
            QApplication.processEvents()
    finally:
        QMessageBox.warning = old_warning
        win.close()
        QThreadPool.globalInstance().waitForDone(30_000)
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 4: interpreters that lie

def _json_values():
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-(10 ** 20), 10 ** 20), st.floats(allow_nan=False),
                       st.text(max_size=40), st.sampled_from(["3.11.2", "/usr", "", "\x1b[2J", "a\nb", "x" * 5000]))
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8),
                                                                                            inner, max_size=4),
                        max_leaves=12)


FIELDS = ["version", "implementation", "prefix", "base_prefix", "executable", "site", "usersite"]


@st.composite
def interpreter_answer(draw) -> tuple[bytes, int]:
    """What a program posing as a Python prints (and its exit code): a real answer with fields of random
    types, any JSON, or any bytes."""
    kind = draw(st.sampled_from(["fields", "fields", "json", "bytes", "lines"]))
    if kind == "fields":
        answer = {"version": "3.11.2", "implementation": "cpython", "prefix": "/opt/py", "base_prefix": "/opt/py",
                  "executable": "/opt/py/bin/python", "site": ["/opt/py/lib/site-packages"], "usersite": None}
        for name in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3)):
            if draw(st.booleans()):
                answer[name] = draw(_json_values())
            else:
                answer.pop(name, None)
        payload = json.dumps(answer).encode()
    elif kind == "json":
        payload = json.dumps(draw(_json_values())).encode()
    elif kind == "lines":
        payload = "\n".join(draw(st.lists(st.text(max_size=60), max_size=3))).encode("utf-8", "surrogateescape")
    else:
        payload = draw(st.binary(max_size=400))
    return payload, draw(st.sampled_from([0, 0, 0, 1, 2, 139]))


def _lying_python(folder: Path, payload: bytes, code: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answer").write_bytes(payload)
    python = folder / "bin" / "python"
    python.parent.mkdir(exist_ok=True)
    python.write_text(f'#!/bin/sh\ncat "{folder / "answer"}"\necho "stderr \\033[2J noise" >&2\nexit {code}\n')
    python.chmod(0o755)
    (folder / "pyvenv.cfg").write_text("home = /nowhere\n")
    return python


@FUZZ
@given(case=interpreter_answer())
def test_lying_interpreters(tmp_path_factory, case):
    from cpudoctor.probes.software.envs import EnvError, describe, discover, resolve
    from cpudoctor.render.envs import render_json, render_text

    work = tmp_path_factory.mktemp("fuzz-python")
    home = work / "home"
    python = _lying_python(home / ".virtualenvs" / "liar", *case)
    where = dict(environ={"HOME": str(home), "PATH": "/nonexistent"}, home=home, cwd=work)
    with counted("interpreters"), watchdog():
        for _ in range(2):                                  # the second time from the cache
            env = describe(python, cache=work / "cache")
            assert env.error is None or "\n" not in env.error
            assert env.version is None or isinstance(env.version, str)
            assert all(isinstance(d, str) for d in env.site_dirs)
            try:
                resolve(str(python), **where, cache=work / "cache")
            except EnvError as exc:
                assert "\n" not in str(exc) and len(str(exc)) < 1000
            found = discover(**where, run_conda=False, cache=work / "cache")
            _no_escapes(render_text(found), "envs")
            json.loads(render_json(found))
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 5: environments.txt

ENV_LINES = st.one_of(
    st.sampled_from(["", "#", "/", ".", "..", "~", "/dev/zero", "/proc/self/fd/0", "/nonexistent/env", "x" * 5000,
                     "/" + "y" * 100_000, "\x00", "/tmp/\x00nul", "\x1b]52;c;aGk=\x07", "\u2028", "\r", "FIFO",
                     "LOOP", "DIR", "FILE", "ENV"]),
    st.text(max_size=60),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)


@FUZZ
@given(lines=st.lists(ENV_LINES, max_size=8), raw=st.binary(max_size=200))
def test_environments_txt(tmp_path_factory, lines, raw):
    from cpudoctor.probes.software.envs import discover, training_environment
    from cpudoctor.render.envs import render_text

    work = tmp_path_factory.mktemp("fuzz-envtxt")
    home = work / "home"
    (home / ".conda").mkdir(parents=True)
    special = {"FIFO": work / "fifo", "LOOP": work / "loop", "DIR": work / "dir", "FILE": work / "file",
               "ENV": work / "env"}
    os.mkfifo(special["FIFO"])
    special["LOOP"].symlink_to(special["LOOP"].name)
    special["DIR"].mkdir()
    special["FILE"].write_text("x")
    (special["ENV"] / "conda-meta").mkdir(parents=True)
    (special["ENV"] / "bin").mkdir()
    os.mkfifo(special["ENV"] / "bin" / "python")
    text = "\n".join(str(special.get(line, line)) for line in lines).encode("utf-8", "surrogateescape") + raw
    (home / ".conda" / "environments.txt").write_bytes(text)
    where = dict(environ={"HOME": str(home), "PATH": "/nonexistent"}, home=home, cwd=work)
    with counted("environments.txt"), watchdog():
        found = discover(**where, run_conda=False, cache=False, deadline=5.0)
        _no_escapes(render_text(found), "envs")
        training_environment(**where, cache=False, fast=True)
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 6: METADATA and friends

DIST_FILES = ["METADATA", "RECORD", "INSTALLER", "PKG-INFO", "top_level.txt"]


@st.composite
def dist_folder(draw) -> tuple[str, dict[str, str | bytes]]:
    name = draw(st.sampled_from(["torch-2.4.0+cpu.dist-info", "numpy-1.26.4.dist-info", "opencv_python-4.8.dist-info",
                                 "torch.egg-info", "numpy-1.26.4-py3.11.egg-info", "-.dist-info", ".dist-info",
                                 "tensorflow-2.16.1.dist-info", "weird\nname-1.0.dist-info", "x" * 200 + ".dist-info"]))
    files: dict[str, str | bytes] = {}
    for file in draw(st.lists(st.sampled_from(DIST_FILES), max_size=4, unique=True)):
        files[file] = draw(st.one_of(
            st.sampled_from(["FIFO", "ZERO", "HUGE", "DIR", "LOOP"]),
            st.binary(max_size=300),
            st.builds(lambda n, v, extra: f"Metadata-Version: 2.1\nName: {n}\nVersion: {v}\n{extra}".encode(
                "utf-8", "surrogateescape"), st.text(max_size=30), st.text(max_size=30), st.text(max_size=200)),
            st.builds(lambda rows: "\n".join(rows).encode(), st.lists(st.sampled_from(
                ["torch/_C.so,sha256=x,1", "a.py,,", "lib.so.1.2,,", ",,,", "x" * 5000]), max_size=5))))
    return name, files


def _write_dist(site: Path, name: str, files: dict[str, str | bytes]) -> None:
    info = site / name.replace("/", "_")
    try:
        info.mkdir()
    except (FileExistsError, OSError):
        return
    for file, content in files.items():
        path = info / file
        if content == "FIFO":
            os.mkfifo(path)
        elif content == "ZERO":
            path.symlink_to("/dev/zero")
        elif content == "HUGE":
            with open(path, "wb") as fh:
                fh.truncate(8 << 30)
        elif content == "DIR":
            path.mkdir()
        elif content == "LOOP":
            path.symlink_to(path.name)
        else:
            path.write_bytes(content)


@FUZZ
@given(folders=st.lists(dist_folder(), min_size=1, max_size=5),
       pth=st.lists(st.sampled_from(["import site; site.addsitedir('/nonexistent')", "import os; os._exit(3)",
                                     "import site; site.addsitedir(", "../..", "/dev/zero", "SELF", "#",
                                     "import sys; sys.path.insert(0, '/tmp')", "x" * 5000]), max_size=3))
def test_metadata_files(tmp_path_factory, folders, pth):
    from cpudoctor.probes.software.dists import distributions, versions
    from cpudoctor.probes.software.envs import describe
    from cpudoctor.probes.software.packages import compiled_distributions, probe_packages

    work = tmp_path_factory.mktemp("fuzz-dist")
    venv = work / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("version = 3.11.7\n")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
    (venv / "bin" / "python").chmod(0o755)
    for name, files in folders:
        _write_dist(site, name, files)
    (site / "extra.pth").write_text("\n".join(str(site) if line == "SELF" else line for line in pth) + "\n")
    with counted("METADATA"), watchdog():
        dists = distributions([site])
        probe_packages(dists)
        compiled_distributions(dists)
        versions([site], ["torch", "numpy"])
        env = describe(venv, ask=False, cache=False)
        assert env.from_files and env.version == "3.11.7"
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 7: `bench --into` races

INTO_EVENTS = ["edit", "regenerate", "delete", "damage", "link-swap", "unknown-field", "hard-link", "nothing"]


def _into_report(path: Path, **extra) -> None:
    from cpudoctor.model import Report
    from cpudoctor.probes import probe_cpu

    data = json.loads(Report(cpu=probe_cpu(Path("/"))).to_json())
    data.update(extra)
    path.write_text(json.dumps(data))


def _into_event(event: str, path: Path, work: Path) -> None:
    """Something that happens to the report while the benches measure."""
    if event == "edit":
        data = json.loads(path.read_text())
        data["notes"] = ["edited while the jobs ran"]
        path.write_text(json.dumps(data))
    elif event == "regenerate":
        tmp = work / "fresh.json"
        _into_report(tmp, notes=["regenerated"])
        os.replace(tmp, path)
    elif event == "delete":
        path.unlink()
    elif event == "damage":
        path.write_text('{"schema_version": 1, "meta": {"kind": "cpudo')
    elif event == "link-swap":
        path.unlink()
        path.symlink_to(work / "victim.json")
    elif event == "unknown-field":
        data = json.loads(path.read_text())
        data["from_the_future"] = {"kept": [1, 2, 3]}
        path.write_text(json.dumps(data))
    elif event == "hard-link":
        with contextlib.suppress(FileNotFoundError):
            (work / "other-name.json").unlink()
        os.link(path, work / "other-name.json")


@FUZZ
@given(benches=st.integers(1, 6), events=st.lists(st.sampled_from(INTO_EVENTS), min_size=1, max_size=2))
def test_into_races(tmp_path_factory, benches, events):
    """Several `bench --into` at once, while the report is edited, replaced, deleted, damaged or swapped for a
    link: every result either lands in the report with "added" or is refused in one line; nothing else is
    written; an edit or an unknown field made meanwhile survives."""
    from cpudoctor.commands.into import NotAdded, add_run, open_target
    from cpudoctor.model import BenchRun
    from cpudoctor.report_file import load_report

    work = tmp_path_factory.mktemp("fuzz-into")
    path, victim = work / "r.json", work / "victim.json"
    _into_report(path)
    _into_report(victim, notes=["someone else's file"])
    victim_before = victim.read_bytes()
    with counted("into races"), watchdog():
        targets = [open_target(str(path)) for _ in range(benches)]
        applied: list[str] = []
        for event in events:
            gone = not os.path.lexists(path) or path.is_symlink()     # deleted or swapped: only a new file now
            damaged = "damage" in applied and "regenerate" not in applied[applied.index("damage"):]
            if (gone and event != "regenerate") or (damaged and event in ("edit", "unknown-field")):
                continue
            _into_event(event, path, work)
            applied.append(event)
        linked = (work / "other-name.json").exists() and os.path.samefile(work / "other-name.json", path) \
            if os.path.lexists(path) and not path.is_symlink() else False
        barrier = threading.Barrier(benches)
        said: dict[int, str] = {}

        def bench(i: int) -> None:
            barrier.wait()
            try:
                add_run(targets[i], BenchRun(kind="train", metrics={"samples_per_s": float(i)}))
                said[i] = "added"
            except NotAdded as exc:
                assert "\n" not in str(exc) and "not added" in str(exc), exc
                said[i] = "not added"

        threads = [threading.Thread(target=bench, args=(i,)) for i in range(benches)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert victim.read_bytes() == victim_before, "a file other than the report was written"
        added = sorted(i for i, word in said.items() if word == "added")
        if added:
            final = load_report(path)
            assert sorted(int(b.metrics["samples_per_s"]) for b in final.benchmarks) == added
            raw = json.loads(path.read_text())
            if "unknown-field" in applied and "regenerate" not in applied[applied.index("unknown-field"):]:
                assert raw.get("from_the_future") == {"kept": [1, 2, 3]}
            if applied and applied[-1] == "edit":
                assert final.notes == ["edited while the jobs ran"]
        if applied and applied[-1] in ("delete", "link-swap", "damage"):
            assert not added, applied
        if linked and added:
            assert (work / "other-name.json").read_bytes() == path.read_bytes()   # written through, like >
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 8: hostile text in every sink

NASTY_CHARS = st.sampled_from(list("\x00\x07\x08\x0b\x0c\r\x1b\x7f\x85\x9b\x9c\x9d\u061c\u200e\u200f\u2028\u2029"
                                   "\u202a\u202e\u2066\u2069\ud800\udcff\ufffe\uffff<>&'\"`|[]*_#\\")
                              + ["\x1b]52;c;aGk=\x07", "\x1b[2J", "]]>", "<!--", "-->", "&amp;", "\U0001f600"])
NASTY_TEXT = st.lists(NASTY_CHARS | st.text(max_size=3), min_size=1, max_size=12).map("".join)
UNSAFE_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                        "\ud800-\udfff]")


def _string_paths(data, prefix=()):
    if isinstance(data, str):
        yield prefix
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _string_paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data[:4]):
            yield from _string_paths(v, prefix + (i,))


@FUZZ
@given(data=st.data())
def test_hostile_text_in_every_sink(data):
    """Hostile strings in any text field of a valid report: no output holds a raw control, bidi mark or
    separator; the SVGs are well-formed XML; JSON keeps the data; diagnosing changes nothing."""
    from xml.dom import minidom

    from export_samples import sample_report

    from cpudoctor import advisor
    from cpudoctor.compare import RENDERERS, compare
    from cpudoctor.export import render_export
    from cpudoctor.kits.escape import terminal_safe
    from cpudoctor.model import ReportError
    from cpudoctor.render.doctor import render_json, render_md, render_text
    from cpudoctor.render.svg_topology import render_svg
    from cpudoctor.report_file import report_from_dict

    raw = json.loads(sample_report().to_json())
    paths = [p for p in _string_paths(raw) if p and p[0] not in ("schema_version", "meta")]
    for path in data.draw(st.lists(st.sampled_from(paths), min_size=1, max_size=5), label="fields"):
        parent = raw
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(NASTY_TEXT, label=".".join(map(str, path)))
    with counted("hostile text in every sink"), watchdog():
        try:
            report = report_from_dict(raw)
        except ReportError as exc:
            assert "\n" not in str(exc)
            return
        report.findings = []
        before = report.to_json()
        advisor.diagnose(report)
        if report.to_json() != before:
            raise Leak("diagnosing changed the report")
        report.findings = advisor.diagnose(report)
        outputs = {fmt: render_export(report, fmt, include_identifying=True).decode("utf-8")
                   for fmt in ("md", "text", "json", "html")}
        outputs["doctor"] = terminal_safe(render_text(report, report.findings, "saved")
                                          + render_md(report, report.findings, "saved")
                                          + render_json(report, report.findings, "saved"))
        cmp = compare(sample_report(), report)
        outputs.update({f"compare-{k}": terminal_safe(r(cmp)) for k, r in RENDERERS.items()})
        svg = render_svg(report.topology, title=f"Topology of {report.cpu.brand}")
        outputs["svg"] = svg
        for where, text in outputs.items():
            found = UNSAFE_RAW.search(text)
            if found:
                raise Leak(f"{found.group()!r} reached the {where} output raw")
        minidom.parseString(svg.encode("utf-8"))
        page = outputs["html"]
        for start in (m.start() for m in re.finditer("<svg", page)):
            minidom.parseString(page[start:page.index("</svg>", start) + 6].encode("utf-8"))
        back = report_from_dict(json.loads(outputs["json"]))
        assert back.cpu.brand == report.cpu.brand           # JSON escapes, the data survives


# ---------------------------------------------------------------------------- family 9: lab-run metrics

METRIC_VALUES = st.one_of(
    st.sampled_from(['"abc"', "null", "[]", "{}", "-1", "0", "1e18", "-1e18", "true", "false", '""', '"1e999"',
                     "[1, 2]", "[null]", "[[1]]", '{"a": 1}', str(2 ** 62), str(-2 ** 62), "0.5", "1e-300",
                     "NaN", "1e400", '"all"', '"fp32"', '"\\" onmouseover=\\"alert(1)"',
                     json.dumps('x" onmouseover="alert(1)" y="'), json.dumps("<svg onload=alert(1)>")]),
    RAW_VALUES,
)


def _lab_report() -> dict:
    from export_samples import sample_report
    from lab_samples import infer_run, kernel_run, lab_runs
    from roofline_samples import runs as roofline_runs

    report = sample_report()
    # the mutations reach the first 6 runs (_paths): one of each kind, the inference run first
    report.benchmarks = [infer_run()] + lab_runs() + roofline_runs() + [kernel_run()] + report.benchmarks
    return json.loads(report.to_json())


_LAB_REPORT: list[dict] = []


def _lab_paths() -> list[tuple]:
    if not _LAB_REPORT:
        _LAB_REPORT.append(_lab_report())
    return [p for p in _paths(_LAB_REPORT[0]["benchmarks"], ("benchmarks",))
            if len(p) > 2 and p[2] in ("metrics", "settings", "kind", "status")]


@st.composite
def lab_run_mutations(draw) -> list[tuple]:
    """1-4 settings or metrics of the sample lab runs replaced, deleted or added (any JSON, NaN too)."""
    paths = _lab_paths()
    return [(draw(st.sampled_from(paths)), draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"])),
             draw(st.sampled_from(["gflops", "threads", "dtype", "points", "x", "kernels", "compute"])),
             draw(METRIC_VALUES)) for _ in range(draw(st.integers(1, 4)))]


def _mutated_lab_report(mutations: list[tuple]) -> str:
    data = json.loads(json.dumps(_LAB_REPORT[0]))
    values = []
    for n, (path, op, key, raw) in enumerate(mutations):
        parent = data
        try:
            for step in path[:-1]:
                parent = parent[step]
            if op == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
                continue
            if op == "add" and isinstance(parent, dict):
                parent[key] = f"__FUZZ{n}__"
            else:
                parent[path[-1]] = f"__FUZZ{n}__"
        except (KeyError, IndexError, TypeError):
            continue                                    # an earlier mutation removed the way there
        values.append((n, raw))
    text = json.dumps(data)
    for n, raw in values:
        text = text.replace(f'"__FUZZ{n}__"', raw, 1)
    return text


@FUZZ
@given(mutations=lab_run_mutations())
def test_lab_run_metrics(mutations):
    """Lab runs of any shape in a saved report: every renderer, the advisor, compare and the window's run table
    either show a run or leave it out with a note, never a traceback; no value becomes markup."""
    from export_samples import sample_report

    from cpudoctor import advisor
    from cpudoctor.compare import RENDERERS, compare
    from cpudoctor.export import render_export
    from cpudoctor.model import ReportError
    from cpudoctor.render.roofline import picture_from_runs, roof_lines
    from cpudoctor.render.svg_roofline import render_svg
    from cpudoctor.render.training import no_best_text, run_cells

    text = _mutated_lab_report(mutations)
    with counted("lab-run metrics"), watchdog():
        try:
            report = report_from_json(text)
        except ReportError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400, exc
            return
        left_out = [n for n in report.notes if "is damaged and is not shown" in n]
        report.findings = advisor.diagnose(report)
        outputs = {fmt: render_export(report, fmt).decode("utf-8") for fmt in ("md", "text", "json", "html")}
        for run in report.benchmarks:
            run_cells(run)
        no_best_text(report.benchmarks)
        roof_lines(report.benchmarks)
        picture = picture_from_runs(report.benchmarks)
        if picture is not None:
            outputs["svg"] = render_svg(picture)
        cmp = compare(sample_report(), report)
        outputs.update({f"compare-{k}": r(cmp) for k, r in RENDERERS.items()})
        # Markup can only be made in the formats that are markup: Markdown, HTML, SVG. The text and JSON outputs
        # carry a value as the data it is (the JSON must read back the same; raw controls are checked elsewhere).
        for where, out in outputs.items():
            if where in ("text", "json") or where.endswith(("-text", "-json")):
                continue
            if re.search(r"(?<!\\)<[a-z]+[^<>]*\bon(mouseover|load)=", out, re.I):      # \< is Markdown's escape
                raise Leak(f"a lab-run value became markup in the {where} output")
        shown = " ".join(outputs["text"].split())
        for note in left_out:
            assert "\n" not in note and note[:60] in shown, note


# ---------------------------------------------------------------------------- family 10: persistence files

PERSISTENT = ["settings", "lab-runs.json", "python-envs.json", "software-children.json", "compiled schema",
              "desktop entry"]
FILE_KINDS = ["bytes", "json", "valid-damaged", "fifo", "null-node", "zero-node", "dir", "loop", "sparse 3 GB",
              "deep", "missing"]


def _node(folder: Path, name: str, device: tuple[int, int]) -> Path:
    """A character device made for the example (a FIFO where nodes are not allowed)."""
    from test_writers_on_devices import make_node

    return make_node(folder, name, device)


def _is_node(path: Path) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _persistent_file(which: str, work: Path) -> Path:
    import fastjsonschema

    from cpudoctor.kits import compiled_schema
    from cpudoctor.probes.child.cache import FILE_NAME
    from cpudoctor.probes.software.envcache import EnvCache

    return {"settings": work / "config" / "CPU Doctor.conf", "lab-runs.json": work / "config" / "lab-runs.json",
            "python-envs.json": work / "cache" / EnvCache.FILE, "software-children.json": work / "cache" / FILE_NAME,
            "compiled schema": work / "cache" / (f"t-{compiled_schema._digest({'type': 'object'}, fastjsonschema.VERSION)}"
                                                 f"{compiled_schema.SUFFIX}"),
            "desktop entry": work / "data" / "applications" / "cpudoctor.desktop"}[which]


def _plant(path: Path, kind: str, content: bytes, nodes: dict[str, Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "bytes":
        path.write_bytes(content)
    elif kind == "json":                       # the right top-level keys, each holding something else
        text = content.decode("latin-1")
        path.write_text(json.dumps({"version": 1, "format": 2, "key": "k", "runs": text, "results": [text],
                                    "answers": {"x": text}, "window": text}))
    elif kind == "valid-damaged":
        good = {"version": 1, "format": 2, "key": "k", "runs": {"k": [{"kind": "gemm", "metrics": {"points": [
            {"gflops": content.decode("latin-1")}]}}]}, "results": [{"returncode": content.decode("latin-1")}]}
        path.write_text(json.dumps(good))
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("null-node", "zero-node"):
        path.symlink_to(nodes[kind])
    elif kind == "dir":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "sparse 3 GB":
        with open(path, "wb") as fh:
            fh.truncate(3 << 30)
    elif kind == "deep":
        path.write_text("[" * 200_000 + "]" * 200_000)


def _use_persistent(which: str, path: Path, work: Path) -> None:
    """Read the file as CPU Doctor does, then write it as CPU Doctor does."""
    if which == "settings":
        from cpudoctor.gui.settings_file import WindowSettings

        settings = WindowSettings(path)
        settings.value("window/geometry")
        settings.setValue("window/page", "Flags")
        settings.sync()
    elif which == "lab-runs.json":
        from lab_samples import train_run

        from cpudoctor.gui.training_runs import RunStore

        store = RunStore(path)
        store.load("k")
        store.save("k", [train_run()])
    elif which == "python-envs.json":
        from cpudoctor.probes.software.envcache import EnvCache

        cache = EnvCache(path)
        cache.get("answers", "x")
        cache.put("answers", "x", {"version": "3.11"})
        cache.save()
    elif which == "software-children.json":
        from cpudoctor.kits.child.runner import ChildResult, ChildSpec
        from cpudoctor.probes.child import cache

        cache.load(path.parent, "k", [ChildSpec(["true"], what="x")])
        cache.save(path.parent, "k", [ChildResult(what="x", returncode=0)])
    elif which == "compiled schema":
        from cpudoctor.kits import compiled_schema

        compiled_schema.validator({"type": "object"}, "t", path.parent)({})
    else:
        from cpudoctor.desktop import DesktopError, install, uninstall

        env = {"XDG_DATA_HOME": str(work / "data")}
        with contextlib.suppress(DesktopError):
            install(env, ["cpudoctor-gui"])
        with contextlib.suppress(DesktopError):
            uninstall(env)


@FUZZ
@given(which=st.sampled_from(PERSISTENT), kind=st.sampled_from(FILE_KINDS), content=st.binary(max_size=300))
def test_persistence_files(qapp, tmp_path_factory, which, kind, content):
    """The files CPU Doctor keeps between runs (the window's settings, kept lab runs, caches, the desktop
    entry) of any content or kind: read and written in bounded time, no traceback, and a device node or
    FIFO there is still one afterwards."""
    work = tmp_path_factory.mktemp("fuzz-persist")
    nodes = {"null-node": _node(work, "null", (1, 3)), "zero-node": _node(work, "zero", (1, 5))}
    path = _persistent_file(which, work)
    _plant(path, kind, content, nodes)
    with counted("persistence files"), watchdog():
        _use_persistent(which, path, work)
        for name, node in nodes.items():
            if not _is_node(node):
                raise Destroyed(f"the {which} writer replaced the {name}")
        if kind == "fifo" and not _is_node(path):
            raise Destroyed(f"the {which} writer replaced a FIFO")
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 11: Windows and macOS captures

WIN_FILES = ["windows/logical-processor-information-ex.bin", "windows/system.json", "windows/cpu.json",
             "windows/powercfg.txt"]


RECORD_SPECS = st.tuples(st.sampled_from(["core", "package", "numa", "cache", "groups", "raw", "many"]),
                         st.lists(st.tuples(st.integers(0, 65535), st.integers(0, (1 << 64) - 1)), max_size=4),
                         st.integers(1, 5000), st.integers(0, 2 ** 32 - 1), st.binary(max_size=64))


def lpi_records(specs: list[tuple]) -> bytes:
    """Records of any relationship, size, group count and masks (what a damaged or made-up buffer holds), built
    from small specs (so a failing example prints in a few lines)."""
    import struct

    from cpudoctor.probes.platforms import _windows_lpi as lpi

    out = b""
    for shape, raw_masks, count, number, tail in specs:
        masks = [lpi.GroupMask(g, m) for g, m in raw_masks]
        if shape in ("core", "package"):
            out += lpi.encode_processor(shape, masks, efficiency_class=number % 256) * count
        elif shape == "numa":
            out += b"".join(lpi.encode_numa((number + i) % 2 ** 32, masks) for i in range(count))
        elif shape == "cache":
            out += lpi.encode_cache(number % 256, ("unified", "data", "trace")[number % 3], number, masks) * min(count, 500)
        elif shape == "groups":
            out += lpi.encode_groups([lpi.GroupInfo((number + i) % 256, i % 256, (number * (i + 1)) % (1 << 64))
                                      for i in range(count)], number % 65536)
        elif shape == "many":
            out += lpi.encode_processor("core", [lpi.GroupMask(g % 65536, (1 << 64) - 1) for g in range(count * 13)])
        else:
            out += struct.pack("<II", number % 0x10000, number) + tail
    return out


SYSCTL_LINES = st.one_of(
    st.builds(lambda level, key, value: f"hw.perflevel{level}.{key}: {value}", st.integers(0, 40),
              st.sampled_from(["physicalcpu", "logicalcpu", "cpusperl2", "cpusperl3", "l2cachesize", "l3cachesize",
                               "l1dcachesize", "name"]),
              st.sampled_from(["0", "1", "4096", "65536", "9" * 30, "-1", "x", "", "\x1b[2J"])),
    st.builds(lambda key, value: f"{key}: {value}",
              st.sampled_from(["hw.nperflevels", "hw.ncpu", "hw.logicalcpu", "hw.physicalcpu", "hw.cacheconfig",
                               "hw.cachesize", "hw.packages", "hw.memsize", "machdep.cpu.brand_string",
                               "machdep.cpu.features", "hw.optional.arm.FEAT_BF16", "kern.osproductversion"]),
              st.sampled_from(["0", "1", "16", "4096", "1 " * 5000, "99999999999999999999", "-3", "<b>x</b>",
                               "\u202e", "4096 4096 4096 4096"])),
    st.text(max_size=80),
)


@st.composite
def capture_mutation(draw) -> tuple[str, list[tuple[str, object]]]:
    system = draw(st.sampled_from(["windows", "macos"]))
    changes: list[tuple[str, bytes]] = []
    if system == "windows":
        for _ in range(draw(st.integers(1, 3))):
            rel = draw(st.sampled_from(WIN_FILES))
            if rel.endswith(".bin"):
                changes.append((rel, ("APPEND", draw(st.lists(RECORD_SPECS, min_size=1, max_size=6)))))
            elif rel.endswith(".json"):
                raw = draw(RAW_VALUES)
                key = draw(st.sampled_from(["pycpuinfo", "cpuid", "memory", "affinity", "processor_identifier",
                                            "version", "flags"]))
                changes.append((rel, f'{{"{key}": {raw}, "pycpuinfo": {{"flags": {raw}, "family": {raw}}}}}'.encode()))
            else:
                changes.append((rel, draw(HOSTILE_TEXT).encode("utf-8", "surrogateescape")))
    else:
        lines = draw(st.lists(SYSCTL_LINES, min_size=1, max_size=40))
        changes.append(("macos/sysctl.txt", "\n".join(lines).encode("utf-8", "surrogateescape")))
    return system, changes


@FUZZ
@given(case=capture_mutation())
def test_windows_and_macos_capture_files(tmp_path_factory, case):
    """A Windows or Mac capture with damaged, made-up or enormous files: the report is made in bounded time, with
    no more CPUs or nodes than a machine has, no traceback, and no markup or control reaching an output."""
    from hostile_captures import MACOS, WINDOWS, copy_of

    from cpudoctor import advisor
    from cpudoctor.export import render_export
    from cpudoctor.kits.escape import terminal_safe
    from cpudoctor.pipeline import Source, build_report

    system, changes = case
    work = tmp_path_factory.mktemp("fuzz-capture")
    root = copy_of(WINDOWS if system == "windows" else MACOS, work / "capture")
    for rel, data in changes:
        path = root / rel
        if isinstance(data, tuple):
            path.write_bytes(path.read_bytes() + lpi_records(data[1]))
        else:
            path.write_bytes(data)
    with counted("Windows/macOS capture files"), watchdog():
        report = build_report(Source.tree(root), children=False, findings=False)
        report.findings = advisor.diagnose(report)
        topo = report.topology
        assert (topo.logical_cpus or 0) <= 8192 and len(topo.numa_nodes) <= 1024
        text = render_export(report, "text").decode()
        html = render_export(report, "html").decode()
        _no_escapes(terminal_safe(text), "terminal")
        if re.search(r"<b>x</b>", html):
            raise Leak("capture text became HTML markup")
        report_from_json(report.to_json())
    shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------- family 12: `run` argv and output

RUN_CANARY = "CANARY-run-7f3a-SECRET"
SECRET_ARGS = st.sampled_from([
    [f"--api-key={RUN_CANARY}"], ["--password", RUN_CANARY], [f"-p{RUN_CANARY}"], ["--token", RUN_CANARY],
    [f"https://user:{RUN_CANARY}@example.com/data"], [f"postgres://u:{RUN_CANARY}@db/x"], [f"KEY={RUN_CANARY}"],
    ["--wandb-key", RUN_CANARY], [f"--hf_token={RUN_CANARY}"], ["--threads", "4", "--secret", RUN_CANARY]])
OUTPUT_LINES = st.one_of(
    # The job's own lines that merely look like the libraries' (a line in oneDNN's or PyTorch's exact log format
    # is the library's as far as anyone can tell, and may be held back): they must all pass through.
    st.sampled_from(["dnnl_verbose, said the job about its own settings", "the job says [__recompiles] itself",
                     "onednn_verbose,notes,the job's own line", "\x1b]52;c;aGk=\x07\x1b[2J", "\u202e",
                     "x" * 70_000, "", "\r", "Traceback (most recent call last):", "\udcff"]),
    st.text(max_size=60),
)


@FUZZ
@given(secret=SECRET_ARGS, out_lines=st.lists(OUTPUT_LINES, max_size=6), err_lines=st.lists(OUTPUT_LINES, max_size=6),
       code=st.sampled_from([0, 0, 1, 3, 42]), fmt=st.sampled_from(["text", "json", "md", "html"]),
       to_file=st.booleans())
def test_run_argv_and_output(tmp_path_factory, secret, out_lines, err_lines, code, fmt, to_file):
    """`cpudoctor run` of a job with a secret on its command line that prints hostile lines: the job's output and
    exit code pass through, the job's own lines are never held back, the secret reaches no report (stderr or
    -o, any format), and no control character reaches the terminal from CPU Doctor's report."""
    import subprocess

    work = tmp_path_factory.mktemp("fuzz-run")
    script = work / "job.py"
    payload = {"out": out_lines, "err": err_lines, "code": code}
    (work / "payload.json").write_text(json.dumps(payload))
    script.write_text("import json, sys\n"
                      f"p = json.load(open({str(work / 'payload.json')!r}))\n"
                      "o, e = sys.stdout.buffer, sys.stderr.buffer\n"
                      "for line in p['out']: o.write(line.encode('utf-8', 'surrogateescape') + b'\\n')\n"
                      "for line in p['err']: e.write(line.encode('utf-8', 'surrogateescape') + b'\\n')\n"
                      "o.flush(); e.flush(); sys.exit(p['code'])\n")
    target = work / f"report.{ {'text': 'txt', 'json': 'json', 'md': 'md', 'html': 'html'}[fmt] }"
    argv = [sys.executable, "-m", "cpudoctor", "run", "-f", fmt] + (["-o", str(target)] if to_file else []) + [
        "--", sys.executable, str(script)] + secret
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with counted("run argv and output"):
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=TIMEOUT * 2, env=env, cwd=work)
        except subprocess.TimeoutExpired:
            raise Hang(f"cpudoctor run did not end in {TIMEOUT * 2:g} s") from None
        expected_out = b"".join(line.encode("utf-8", "surrogateescape") + b"\n" for line in out_lines)
        assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
        assert proc.stderr.count(b"Traceback") == sum(line.count("Traceback") for line in err_lines), \
            proc.stderr[-2000:]
        assert proc.stdout == expected_out, "the job's stdout did not pass through unchanged"
        for line in err_lines:
            if line.strip():
                assert line.encode("utf-8", "surrogateescape") in proc.stderr, f"the job's line {line[:60]!r} was held back"
        report = (target.read_bytes() if to_file else b"") + proc.stderr
        if RUN_CANARY.encode() in report:
            raise Leak("a secret from the job's command line reached the report")
        if to_file and fmt == "text":
            _no_escapes(target.read_text(errors="replace"), "run -o")
    shutil.rmtree(work, ignore_errors=True)
