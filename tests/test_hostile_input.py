"""Issue 19: hostile files and bad input lose nothing, leak nothing, and give one line.

Each test is one case of the issue, kept as a regression test; tests/test_fuzz.py
throws random variations of the same families at the same code.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from conftest import machine_root, run_cli
import other_user
from cpudoctor.report_file import load_report
from cpudoctor.fileio import WriteError, atomic_write
from cpudoctor.kits.cpulist import parse_cpulist, parse_cpumask, parse_size
from cpudoctor.kits.rooted import read_text, refusal_notes, under
from cpudoctor.model import Report, ReportError

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
CANARY = "CANARY-7f3a-SECRET"


# ---------------------------------------------------------------------------- writes

def _device_clone(tmp_path: Path, name: str, minor: int) -> Path:
    """A char device under tmp with /dev/null's (1,3) or /dev/full's (1,7) numbers: the real ones stay untouched."""
    if not IS_ROOT:
        pytest.skip("creating a device node needs root")
    path = tmp_path / name
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    return path


def test_a_device_is_written_to_not_replaced(tmp_path):
    null = _device_clone(tmp_path, "null", 3)
    atomic_write(null, "report\n")
    assert stat.S_ISCHR(os.lstat(null).st_mode)            # still the device node
    full = _device_clone(tmp_path, "full", 7)
    with pytest.raises(WriteError) as exc:
        atomic_write(full, "report\n")
    assert exc.value.exit_code == 1 and "space" in exc.value.strerror
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_report_dash_o_on_a_device_keeps_it(tmp_path, capsys):
    null = _device_clone(tmp_path, "null", 3)
    code, out, err = run_cli(capsys, "report", "--fast", "--root", str(machine_root("hwloc-16amd64-8n2c")),
                             "-o", str(null))
    assert code == 0 and err == "" and stat.S_ISCHR(os.lstat(null).st_mode)


def test_a_fifo_is_written_to_while_read(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match="nothing is reading") as exc:
        atomic_write(fifo, "x")                             # no reader: an error at once, never a hang
    assert exc.value.exit_code == 1
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    for _ in range(200):                                    # wait until the reader has the FIFO open
        try:
            atomic_write(fifo, "through the pipe\n")
            break
        except WriteError:
            threading.Event().wait(0.01)
    reader.join(10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_symlink_written_through_mode_kept_umask_respected(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("old")
    target.chmod(0o600)
    link = tmp_path / "link.txt"
    link.symlink_to(target.name)
    atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600     # an existing file keeps its mode
    old = os.umask(0o077)
    try:
        fresh = atomic_write(tmp_path / "fresh.txt", "x")
        script = atomic_write(tmp_path / "run.sh", "x", executable=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600      # the umask decides, no chmod 0644
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_trailing_slash_and_long_names(tmp_path, capsys):
    code, _, err = run_cli(capsys, "report", "--fast", "-o", str(tmp_path / "newdir") + "/")
    assert code == 2 and "folder" in err and err.count("\n") == 1
    assert not (tmp_path / "newdir").exists()
    code, _, err = run_cli(capsys, "report", "--fast", "-o", str(tmp_path / ("x" * 300)))
    assert code == 2 and "too long" in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("how", ["closed", "full"])
def test_stdout_closed_or_full_is_one_line(how):
    if how == "full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    kwargs: dict = {"pass_fds": ()}
    if how == "closed":
        kwargs["preexec_fn"] = lambda: os.close(1)
    else:
        kwargs["stdout"] = open("/dev/full", "w")          # noqa: SIM115 - closed with the process
    proc = subprocess.run([sys.executable, "-m", "cpudoctor.cli", "explain", "ISA001"],
                          stderr=subprocess.PIPE, text=True, timeout=60, **kwargs)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert ("closed" if how == "closed" else "No space left") in proc.stderr


# ---------------------------------------------------------------------------- reads under --root

def _hostile_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A corpus tree with the issue's traps, and a secret file beside it that must never be read."""
    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    outside = tmp_path / "outside"
    (outside / "etc").mkdir(parents=True)
    for name in ("cpu.max", "cpuset.cpus", "cpuset.cpus.effective", "passwd"):
        (outside / "etc" / name).write_text(f"{CANARY}\n")
    (tree / "proc/self").mkdir(parents=True, exist_ok=True)
    (tree / "proc/self/cgroup").write_text("0::/../../../../outside/etc\n")
    (tree / "proc/self/mounts").write_text("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"
                                           "cgroup2 /sys/fs/../../../outside cgroup2 rw 0 0\n")
    (tree / "sys/fs/cgroup").mkdir(parents=True)
    (tree / "sys/fs/cgroup/cgroup.controllers").write_text("cpuset cpu\n")
    (tree / "proc/version").symlink_to(outside / "etc" / "passwd")        # absolute link out of the tree
    (tree / "proc/meminfo").symlink_to("../../outside/etc/passwd")         # relative link out of the tree
    return tree, outside


def test_reads_never_leave_the_root(tmp_path):
    tree, outside = _hostile_tree(tmp_path)
    assert read_text(under(tree, "/proc/version")) is None
    assert read_text(under(tree, "/sys/fs/cgroup/../../../../outside/etc/passwd")) is None
    from conftest import probe_tree

    report = probe_tree(tree, software=True)
    text = report.to_json()
    assert CANARY not in text
    assert report.topology.affinity.cpu_quota is None and report.topology.affinity.cgroup_cpuset is None
    assert any("which no kernel writes" in n for n in report.topology.notes)


def test_special_files_are_not_read(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    (tree / "proc/cpuinfo").unlink()
    os.mkfifo(tree / "proc/cpuinfo")                        # would block forever
    (tree / "sys/devices/system/cpu/online").unlink()
    (tree / "sys/devices/system/cpu/online").symlink_to("/dev/zero")   # inside the root: tree/dev/zero
    os.makedirs(tree / "dev")
    os.mkfifo(tree / "dev/zero")
    assert read_text(under(tree, "/proc/cpuinfo")) is None
    notes = refusal_notes(tree)
    assert notes == ["/proc/cpuinfo: not a regular file (a device, FIFO or socket): not read"]
    from conftest import probe_tree

    report = probe_tree(tree, software=False)
    assert report.topology.logical_cpus == 16              # the per-CPU files still answer
    assert any("not a regular file" in n for n in report.notes)


@pytest.mark.parametrize("text", ["0-100000000", "5-2", "0-3,x", "٣", "0-65536", "-1"])
def test_garbled_cpulists(text):
    assert parse_cpulist(text) is None


def test_bounded_masks_and_sizes():
    assert parse_cpumask("f" * 2_000_000) is None
    assert parse_cpumask("0" * 10_000 + "3") == [0, 1]     # a long zero prefix (NR_CPUS=8192 kernels) is fine
    for bad in ("inf", "1e999K", "-5K", "nan", "²K", "9" * 400):
        assert parse_size(bad) is None


def _garble(tree: Path, rel: str, text: str) -> None:
    path = tree / rel
    path.unlink()
    path.write_text(text)


def test_a_mask_file_too_large_to_be_one_is_refused_unread(tmp_path):
    """A 2 MB shared_cpu_map is no mask a kernel writes: refused before reading, and the collection says so."""
    from cpudoctor.pipeline import Source, build_report

    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    _garble(tree, "sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_map", "f" * 2_000_000)
    report = build_report(Source.tree(tree), children=False, software=False, findings=False)
    notes = report.topology.notes + report.notes
    assert any("shared_cpu_map" in n and "larger than" in n for n in notes), notes
    assert report.topology.logical_cpus == 16


@pytest.mark.parametrize("rel, text, note", [
    ("sys/devices/system/cpu/online", "5-2", "runs backwards"),
    ("sys/devices/system/cpu/online", "0-100000000", "below 65536"),
    # 2,000,000 CPUs in a mask; a larger file (over kits.rooted.MAX_LIST_BYTES) is refused unread, as below
    ("sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_map", "f" * 500_000, "beyond 65536"),
    ("sys/devices/system/cpu/cpu0/cache/index2/size", "1e999K", "not a size"),
    ("sys/devices/system/cpu/cpu0/cache/index2/size", "-512K", "not a size"),
    ("sys/devices/system/cpu/cpu0/cache/index2/size", "inf", "not a size"),
    ("sys/devices/system/node/node0/distance", "10 ² 20", "not a row of NUMA distances"),
    ("sys/devices/system/node/node0/distance", "10 20", "distances for 8 NUMA nodes"),
    ("sys/devices/system/node/node0/cpulist", "0-100000000", "below 65536"),
])
def test_garbled_tree_values_become_notes(tmp_path, rel, text, note):
    from cpudoctor.probes.cpu.topology import probe_topology

    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    _garble(tree, rel, text)
    topo = probe_topology(tree)
    assert any(note in n for n in topo.notes), topo.notes
    assert topo.logical_cpus == 16


def test_odd_cpu_and_node_folder_names_are_ignored(tmp_path):
    from cpudoctor.probes.cpu.topology import probe_topology

    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    (tree / "sys/devices/system/cpu/cpu²").mkdir()
    (tree / "sys/devices/system/node/node²").mkdir()
    (tree / "sys/devices/system/cpu/cpu99999999").mkdir()
    assert probe_topology(tree).logical_cpus == 16


def test_root_empty_is_an_error(capsys):
    code, out, err = run_cli(capsys, "report", "--fast", "--root", "")
    assert code == 2 and out == "" and err.count("\n") == 1 and "empty" in err


def test_unreadable_sys_as_another_user():
    """A non-root user on a tree whose sys/ it may not read: notes, not a PermissionError."""
    import tempfile

    other_user.require()                                           # root, setpriv, a reachable checkout
    base = Path(tempfile.mkdtemp(prefix="cpudoctor-nobody-"))      # pytest's tmp folders are 0700
    try:
        tree = base / "tree"
        shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
        for p in [base, *base.rglob("*")]:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        for blocked in ("sys", "proc"):
            (tree / blocked).chmod(0o000)
            proc = subprocess.run(other_user.as_user([sys.executable, "-m", "cpudoctor.cli", "report", "--fast",
                                                      "--root", str(tree)], reach=[base]),
                                  capture_output=True, text=True, timeout=120, cwd="/")
            (tree / blocked).chmod(0o755)
            assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, proc.stderr
            assert proc.stderr.count("\n") <= 1
            if blocked == "sys":
                assert proc.returncode == 0 and "CPU Doctor report" in proc.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------------------- capture

def test_capture_never_packs_outside_and_scrubs_identifiers(tmp_path):
    from cpudoctor.capture import TOP, CaptureError, capture

    tree, _ = _hostile_tree(tmp_path)
    (tree / "proc/cpuinfo").write_text((tree / "proc/cpuinfo").read_text() + "Serial\t\t: 100000003a8bd6f5\n")
    dmi = tree / "sys/class/dmi/id"
    (dmi / "board_serial").write_text("QX42BOARD\n")
    (dmi / "board_name").unlink()
    (dmi / "board_name").write_text("Board QX42BOARD rev 2\n")
    (dmi / "product_name").write_text("Box 4c4c4544-0042-3010-8052-b4c04f4e4b33\n")
    result = capture(tmp_path / "c.tar.gz", root=tree)
    with tarfile.open(result.path) as tar:
        members = tar.getmembers()
        blob = b"".join(tar.extractfile(m).read() for m in members if m.isfile())
        manifest = json.loads(tar.extractfile(f"{TOP}/capture.json").read())
    for m in members:
        assert m.name.startswith(TOP + "/") and ".." not in m.name.split("/")
        if m.issym():
            joined = os.path.normpath(os.path.join(os.path.dirname(m.name), m.linkname))
            assert joined.startswith(TOP + "/")
    assert CANARY.encode() not in blob
    for secret in (b"100000003a8bd6f5", b"QX42BOARD", b"4c4c4544"):
        assert secret not in blob
    assert manifest["scrubbed"]["proc/cpuinfo"] == {"serial": 1}
    assert "serial" in manifest["scrubbed"]["sys/class/dmi/id/board_name"]
    assert "uuid" in manifest["scrubbed"]["sys/class/dmi/id/product_name"]
    empty = tmp_path / "empty"
    (empty / "proc").mkdir(parents=True)
    with pytest.raises(CaptureError, match="nothing to pack"):
        capture(tmp_path / "e.tar.gz", root=empty)
    assert not (tmp_path / "e.tar.gz").exists()


# ---------------------------------------------------------------------------- saved reports

def _report_text() -> str:
    from export_samples import sample_report

    return sample_report().to_json()


def _cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    base = json.loads(_report_text())
    out: dict[str, tuple[Path, str]] = {}

    def add(name: str, text: str, expected: str) -> None:
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        out[name] = (path, expected)

    add("meta-null", json.dumps({**base, "meta": None}), "$.meta: expected an object, got null")
    add("int-4400-digits", json.dumps(base).replace('"schema_version": 1', '"schema_version": ' + "9" * 4400, 1),
        "$.schema_version: an integer of 4400 digits")
    clock = json.loads(json.dumps(base))
    clock["cpu"]["max_mhz"] = 10 ** 400
    add("clock-10e400", json.dumps(clock), "$.cpu.max_mhz: an integer of 401 digits")
    metric = json.loads(json.dumps(base))
    metric["benchmarks"] = [{"kind": "gemm", "settings": {}, "metrics": {"gflops": 1e400}, "status": "ok",
                             "started_at": None, "note": ""}]
    add("metric-1e400", json.dumps(metric).replace("Infinity", "1e400"), "$.benchmarks[0].metrics.gflops: 1e400")
    add("nested-200000", "[" * 200_000 + "]" * 200_000, "nested deeper than 64 levels")
    add("quota-nan", json.dumps(base).replace('"cpu_quota": null', '"cpu_quota": NaN'),
        "$.topology.affinity.cpu_quota: NaN is not a number")
    brand = json.loads(json.dumps(base))
    brand["cpu"]["brand"] = "A" * 1_000_000
    add("brand-1mb", json.dumps(brand), "$.cpu.brand: a string of 1,000,000 characters")
    huge = json.loads(json.dumps(base))
    huge["topology"]["logical_cpus"] = 10 ** 15
    add("cpus-1e15", json.dumps(huge), "$.topology.logical_cpus: 1000000000000000 is above the maximum")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    out["fifo"] = (fifo, "not a regular file")
    out["dev-zero"] = (Path("/dev/zero"), "not a regular file")
    return out


def test_every_issue_case_is_one_line_naming_the_path(tmp_path):
    assert '"cpu_quota": null' in _report_text()
    for name, (path, expected) in _cases(tmp_path).items():
        with pytest.raises(ReportError) as exc:
            load_report(path)
        message = str(exc.value)
        assert expected in message and "\n" not in message and len(message) < 300, (name, message)


@pytest.mark.parametrize("surface", ["doctor", "compare"])
def test_cli_surfaces_give_one_line(tmp_path, capsys, surface):
    good = tmp_path / "good.json"
    good.write_text(_report_text())
    for name, (path, expected) in _cases(tmp_path).items():
        argv = (["doctor", "--from-report", str(path)] if surface == "doctor" else ["compare", str(good), str(path)])
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and expected in err, (name, err)


def test_gui_open_paths_refuse_them(qtbot, tmp_path, monkeypatch):
    pytest.importorskip("PySide6")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from cpudoctor.gui.main_window import MainWindow
    from cpudoctor.gui.model import AppModel

    shown: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda *a, **k: shown.append(a[2]))
    win = MainWindow(AppModel(), settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                     collect=False)
    qtbot.addWidget(win)
    # Opening runs the report pipeline off the GUI thread: the refusal arrives as a signal, then one message box.
    for name, (path, expected) in _cases(tmp_path).items():
        shown.clear()
        with qtbot.waitSignal(win.collector.open_failed, timeout=60_000) as blocker:
            win.open_report(path)
        assert expected in blocker.args[0] and "\n" not in blocker.args[0], (name, blocker.args)
        qtbot.waitUntil(lambda: len(shown) == 1, timeout=30_000)
        assert expected in shown[0] and "\n" not in shown[0], (name, shown)
        actions = win.report_actions
        shown.clear()
        with qtbot.waitSignal(actions.failed, timeout=10_000) as blocker:
            actions.open_path(path)
        assert expected in blocker.args[0], name
        if actions.last_message is not None:
            actions.last_message.close()
    assert win.model.report is None or not win.model.read_only      # nothing bad was shown as a report
    win.close()


# ---------------------------------------------------------------------------- terminal and Markdown

def test_escape_sequences_never_reach_the_terminal(tmp_path, capsys):
    tree = tmp_path / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    text = (tree / "proc/cpuinfo").read_text()
    evil = "\x1b]8;;http://evil.example\x07Ryzen\x1b]8;;\x07 \x1b[2J\x1b[31mPWNED\x9b1m\u202e"
    (tree / "proc/cpuinfo").unlink()
    (tree / "proc/cpuinfo").write_text("\n".join(
        f"model name\t: {evil}" if line.startswith("model name") else line for line in text.splitlines()) + "\n")
    for fmt in ("text", "md", "html", "json"):
        code, out, _ = run_cli(capsys, "report", "--fast", "--root", str(tree), "--format", fmt)
        assert code == 0 and "\x1b" not in out and "\x9b" not in out and "\u202e" not in out, fmt
    code, out, _ = run_cli(capsys, "doctor", "--root", str(tree))
    assert "\x1b" not in out


def test_backticks_cannot_break_out_of_code_spans():
    import re

    from cpudoctor.kits.escape import md_code, md_fence

    for text in ("a`b", "`rm -rf ~`", "``", "x``y`z", "| pipe"):
        span = md_code(text, table=True)
        fence = re.match(r"`+", span).group(0)
        inner = span[len(fence):-len(fence)]
        assert span.endswith(fence) and fence not in inner.replace("\\|", "|")
    assert md_fence("```\nboom\n```", "bash")[0] == "````bash"


def test_schema_uses_only_keywords_fastjsonschema_reads_alike():
    """report_check compiles the 2020-12 schema with fastjsonschema (draft 7): only keywords that mean the same."""
    same_in_both = {"$schema", "$id", "$ref", "$defs", "title", "description", "type", "properties", "required",
                    "additionalProperties", "items", "anyOf", "enum", "const", "minimum", "maximum", "pattern",
                    "maxLength", "maxItems"}
    schema = json.loads((Path(__file__).resolve().parents[1] / "resources/report.schema.json").read_text())

    def keywords(node, inside_properties=False):
        if isinstance(node, dict):
            for k, v in node.items():
                if not inside_properties and k != "$defs":
                    yield k
                yield from keywords(v, inside_properties=k in ("properties", "$defs") and not inside_properties)
        elif isinstance(node, list):
            for v in node:
                yield from keywords(v)

    assert set(keywords(schema)) <= same_in_both


def test_anyof_errors_name_the_innermost_path():
    from cpudoctor.report_file import check_schema

    data = json.loads(_report_text())
    data["topology"]["affinity"]["allowed_cpus"] = [1, "x"]
    with pytest.raises(ReportError, match=r"\$\.topology\.affinity\.allowed_cpus\[1\]: expected an integer"):
        check_schema(data)
    data = json.loads(_report_text())
    data["software"]["os"] = 5
    with pytest.raises(ReportError, match=r"\$\.software\.os: expected an object, got an integer"):
        check_schema(data)
    data = json.loads(_report_text())
    data["topology"]["numa_memory_bytes"] = {"0": "x"}
    with pytest.raises(ReportError, match=r"\$\.topology\.numa_memory_bytes\[\"0\"\]: expected an integer"):
        check_schema(data)
