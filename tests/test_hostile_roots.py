"""`--root` that is no folder, or a tree no kernel makes: one line, at once, and a bounded walk (issue 29,
items 6 and 11).

A FIFO given as ``--root`` used to be opened as a possible tar archive (the
"unpack it first" hint) and blocked for ever; ``/dev/zero`` was read for ever.
A tree with 100,000 ``cpuN`` folders made ``report`` read every one of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import machine_root, run_cli

# A CLI that hangs must not hang the suite: each run has this long (it answers in well under a second).
PATIENCE_S = 60


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpudoctor", *argv], capture_output=True, text=True,
                          timeout=PATIENCE_S, stdin=subprocess.DEVNULL)


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "not-a-tree"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/null"])
@pytest.mark.parametrize("argv", [["report", "--fast"], ["doctor", "--fast"], ["capture", "--force", "-o", "{out}"]],
                         ids=["report", "doctor", "capture"])
def test_a_root_that_is_a_fifo_or_a_device_is_not_a_folder_at_once(argv, special, fifo, tmp_path):
    root = str(fifo) if special == "fifo" else special
    if not os.path.exists(root):
        pytest.skip(f"no {root} here")
    argv = [a.replace("{out}", str(tmp_path / "c.tar.gz")) for a in argv]
    done = _cli(*argv, "--root", root)
    assert done.returncode == 2, done.stderr
    assert "not a folder" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "c.tar.gz").exists()


def test_an_archive_still_gets_the_unpack_hint(tmp_path, capsys):
    import tarfile

    archive = tmp_path / "x.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(machine_root("hwloc-16amd64-8n2c") / "proc", arcname="cpudoctor-capture/proc")
    code, out, err = run_cli(capsys, "report", "--fast", "--root", str(archive))
    assert code == 2 and "tar xf" in err


# ---------------------------------------------------------------------------- a tree with too many cpuN folders

@pytest.fixture(scope="module")
def crowded_tree(tmp_path_factory) -> Path:
    """A real 16-CPU tree plus 12,000 empty cpuN folders and 2,000 nodeN folders (no kernel makes that many)."""
    from cpudoctor.kits.rooted import MAX_NUMBERED_DIRS

    tree = tmp_path_factory.mktemp("crowded") / "tree"
    shutil.copytree(machine_root("hwloc-16amd64-8n2c"), tree, symlinks=True)
    for p in [tree, *tree.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    cpus = tree / "sys/devices/system/cpu"
    for n in range(16, MAX_NUMBERED_DIRS + 4000):
        (cpus / f"cpu{n}").mkdir()
    nodes = tree / "sys/devices/system/node"
    for n in range(8, 2000):
        (nodes / f"node{n}").mkdir()
    return tree


def _opened_cpu_folders(tree: Path, run) -> set[int]:
    """The numbers of the cpuN folders ``run()`` opened or listed anything in (audit hook)."""
    import re

    base = str(tree.resolve() / "sys/devices/system/cpu") + "/cpu"
    seen: set[int] = set()

    def hook(event, args):
        if event in ("open", "os.listdir", "os.scandir", "os.lstat", "os.stat") and args \
                and isinstance(args[0], (str, os.PathLike)):
            m = re.match(re.escape(base) + r"([0-9]+)(/|$)", os.fspath(args[0]))
            if m:
                seen.add(int(m.group(1)))

    _HOOKS.append(hook)
    try:
        run()
    finally:
        _HOOKS.remove(hook)
    return seen


_HOOKS: list = []
sys.addaudithook(lambda event, args: [h(event, args) for h in list(_HOOKS)] if _HOOKS else None)


def test_the_walk_of_a_tree_with_too_many_cpu_folders_is_bounded(crowded_tree):
    from conftest import probe_tree
    from cpudoctor.kits.rooted import MAX_NUMBERED_DIRS

    report = None

    def run():
        nonlocal report
        report = probe_tree(crowded_tree, software=True)

    seen = _opened_cpu_folders(crowded_tree, run)
    assert seen and max(seen) < MAX_NUMBERED_DIRS, max(seen)
    assert report.topology.logical_cpus == 16
    notes = " ".join(report.topology.notes + report.cpu.notes + report.notes)
    assert f"only the first {MAX_NUMBERED_DIRS:,} were read" in notes, notes


def test_capture_of_a_tree_with_too_many_cpu_folders_is_bounded(crowded_tree, tmp_path):
    import tarfile

    from cpudoctor.capture import capture
    from cpudoctor.kits.rooted import MAX_NUMBERED_DIRS

    result = None

    def run():
        nonlocal result
        result = capture(tmp_path / "c.tar.gz", root=crowded_tree, force=True, trace=False)

    seen = _opened_cpu_folders(crowded_tree, run)
    assert seen and max(seen) < MAX_NUMBERED_DIRS, max(seen)
    with tarfile.open(result.path) as tar:
        names = tar.getnames()
    assert any(n.endswith("sys/devices/system/cpu/cpu15/topology/core_id") for n in names)


@pytest.mark.parametrize("argv", [["doctor", "--from-report", "\x00"], ["compare", "a\x00.json", "b.json"],
                                  ["bench", "train", "--into", "r\x00.json"]])
def test_a_file_name_with_a_nul_is_one_line(argv, capsys):
    """A NUL cannot reach us from a shell, but it can from a caller of cli.main or a pasted path: Python's
    'embedded null byte' ValueError was a traceback (found by the argument fuzz family)."""
    from conftest import run_cli

    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "Traceback" not in err and "NUL" in err
