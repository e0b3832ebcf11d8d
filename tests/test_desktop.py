"""install-desktop: the .desktop entry and icon land in XDG_DATA_HOME; uninstall removes exactly them."""

from __future__ import annotations

import configparser
import shutil
import subprocess

import pytest

from cpudoctor import desktop


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "share"


def _entry(path):
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    cp.read(path)
    return cp["Desktop Entry"]


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_install_and_uninstall(xdg, tmp_path):
    other = xdg / "applications" / "someone-else.desktop"
    other.parent.mkdir(parents=True)
    other.write_text("[Desktop Entry]\nName=Other\n")
    p = desktop.install(command=[str(tmp_path / "bin dir" / "cpudoctor-gui")])
    assert p.entry == xdg / "applications" / "cpudoctor.desktop"
    assert p.icon == xdg / "icons/hicolor/scalable/apps/cpudoctor.svg"
    e = _entry(p.entry)
    assert e["Type"] == "Application" and e["Name"] == "CPU Doctor" and e["Terminal"] == "false"
    assert e["Exec"] == f'"{tmp_path}/bin dir/cpudoctor-gui" %f'
    assert e["Icon"] == str(p.icon)
    assert p.icon.read_bytes().lstrip().startswith((b"<svg", b"<?xml"))
    first = p.entry.read_bytes()
    desktop.install(command=[str(tmp_path / "bin dir" / "cpudoctor-gui")])        # idempotent
    assert p.entry.read_bytes() == first
    assert _tree(xdg) == ["applications/cpudoctor.desktop", "applications/someone-else.desktop",
                          "icons/hicolor/scalable/apps/cpudoctor.svg"]
    assert set(desktop.uninstall()) == {p.entry, p.icon}
    assert _tree(xdg) == ["applications/someone-else.desktop"]
    assert desktop.uninstall() == []


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate (desktop-file-utils) is not installed: a machine with it runs this test")
def test_entry_validates(xdg):
    p = desktop.install(command=["/usr/bin/cpudoctor-gui"])
    out = subprocess.run(["desktop-file-validate", str(p.entry)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_foreign_entry_is_left_alone(xdg):
    entry = xdg / "applications" / "cpudoctor.desktop"
    entry.parent.mkdir(parents=True)
    entry.write_text("[Desktop Entry]\nName=My own\n")
    with pytest.raises(desktop.DesktopError, match="not written by CPU Doctor"):
        desktop.install(command=["/x"])
    with pytest.raises(desktop.DesktopError):
        desktop.uninstall()
    assert entry.read_text() == "[Desktop Entry]\nName=My own\n"


def test_relative_xdg_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert desktop.paths().entry == tmp_path / ".local/share/applications/cpudoctor.desktop"


def test_exec_quoting():
    assert desktop._exec_quote("/usr/bin/cpudoctor-gui") == "/usr/bin/cpudoctor-gui"
    assert desktop._exec_quote('/a b/"x"$') == '"/a b/\\"x\\"\\$"'
    assert desktop._exec_quote("/100%/x") == "/100%%/x"


def test_gui_command_points_at_an_existing_launcher():
    cmd = desktop.gui_command()
    assert cmd and (cmd[0].endswith("cpudoctor-gui") or cmd[1:] == ["-m", "cpudoctor.gui.app"])


def test_cli(xdg, capsys):
    from cpudoctor.cli import main

    assert main(["install-desktop"]) == 0
    assert "Installed" in capsys.readouterr().out
    assert (xdg / "applications/cpudoctor.desktop").is_file()
    assert main(["install-desktop", "--uninstall"]) == 0
    assert "Removed" in capsys.readouterr().out
    assert not (xdg / "applications/cpudoctor.desktop").exists()


def test_unwritable_data_home_names_the_folder_and_the_way_out(tmp_path, monkeypatch):
    """A data home that cannot hold folders (here: under a plain file) is one clear error, not a bare errno."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker / "share"))
    with pytest.raises(desktop.DesktopError) as exc:
        desktop.install(command=["/x"])
    assert str(blocker) in str(exc.value) and "XDG_DATA_HOME" in str(exc.value)


def _expand(exec_line: str, file: str | None) -> list[str]:
    """The argv a desktop launcher makes of an Exec line (Desktop Entry spec: quoting, %f, %%)."""
    import shlex

    argv = []
    for arg in shlex.split(exec_line):
        if arg == "%f":
            argv += [file] if file else []
        else:
            argv.append(arg.replace("%%", "%"))
    return argv


def test_a_report_opened_from_the_file_manager_reaches_the_window(xdg, tmp_path):
    """Issue 26: the entry's Exec had no %f, so "Open with CPU Doctor" on a saved report opened an empty window.
    Expanded as a launcher does, the file is the window's argument (and a menu click passes nothing)."""
    from cpudoctor.cli import opens_window
    from cpudoctor.gui.app import build_parser

    saved = tmp_path / "my report 100%.json"
    saved.write_text("{}")
    p = desktop.install(command=["/usr/bin/cpudoctor-gui"])
    exec_line = _entry(p.entry)["Exec"]
    argv = _expand(exec_line, str(saved))
    assert argv == ["/usr/bin/cpudoctor-gui", str(saved)]
    assert opens_window(argv[1:]) and build_parser().parse_args(argv[1:]).report == str(saved)
    assert _expand(exec_line, None) == ["/usr/bin/cpudoctor-gui"]
