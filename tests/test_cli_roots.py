"""--root mistakes people make with a capture: the archive itself, the folder above it, an empty folder."""

from __future__ import annotations

import shutil
import tarfile

import pytest
from conftest import machine_root, run_cli


@pytest.fixture
def unpacked(tmp_path):
    """A corpus tree as `tar xzf` leaves it: <tmp>/cpudoctor-capture/{proc,sys}."""
    dest = tmp_path / "cpudoctor-capture"
    shutil.copytree(machine_root("hwloc-32amd64-4s2n4c-cgroup2"), dest, symlinks=True)
    return dest


@pytest.mark.parametrize("command", ["report", "doctor"])
def test_folder_above_the_capture_names_the_right_one(command, unpacked, capsys):
    code, out, err = run_cli(capsys, command, "--root", str(unpacked.parent))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"use --root {unpacked}" in err


@pytest.mark.parametrize("command", ["report", "doctor"])
def test_the_archive_itself_says_how_to_unpack(command, unpacked, tmp_path, capsys):
    archive = tmp_path / "x.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(unpacked, arcname="cpudoctor-capture")
    code, _, err = run_cli(capsys, command, "--root", str(archive))
    assert code == 2 and err.count("\n") == 1
    assert f"tar xf {archive} && use --root cpudoctor-capture" in err


def test_doctor_on_a_folder_without_proc_or_sys_is_an_error_not_a_clean_bill(tmp_path, capsys):
    code, out, err = run_cli(capsys, "doctor", "--root", str(tmp_path))
    assert code == 2 and "No issues found" not in out
    assert "no proc/cpuinfo or sys/devices/system/cpu there" in err


@pytest.mark.parametrize("argv,prog", [
    (["report", "--force"], "cpudoctor report"),
    (["bench", "train", "--bogus"], "cpudoctor bench train"),
    (["doctor", "extra"], "cpudoctor doctor"),
    (["--bogus"], "cpudoctor"),
])
def test_unknown_arguments_name_the_subcommand(argv, prog, capsys):
    """Leftover arguments point at the subcommand's own --help, not the top-level one."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"{prog}: error: unrecognized arguments: ") and err.endswith(f"(see {prog} --help)\n")
