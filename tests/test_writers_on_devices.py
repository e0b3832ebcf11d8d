"""Every file CPU Doctor writes, aimed at a link to a device node: the node stays a node (issue 39, item 1).

Qt's settings writer once replaced a symlinked settings file's target, a
device node, with a regular file (as root it destroyed the machine's
/dev/zero). Here each writer of the app, from ``report -o`` to the window's
settings and the caches, writes to a name that is a symlink to a node made for
the test (``mknod`` of the null device in a temporary folder, as root where
the file system allows device nodes; a FIFO otherwise, which nothing reads):
it either writes into the node or refuses in one line, and afterwards the node
is still a node and the link still a link. /dev itself is never touched.

The window's own files are read the same way (item 11, 15): a settings file
or ``lab-runs.json`` that is a FIFO, a link to a zero or random device, or a
3 GB sparse file never keeps the window from opening.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path

import pytest

from conftest import alarm, machine_root

ONE_LINE_ERRORS: tuple[type[BaseException], ...] = ()


def _one_line_errors() -> tuple[type[BaseException], ...]:
    from cpudoctor.capture import CaptureError
    from cpudoctor.commands import CliError
    from cpudoctor.desktop import DesktopError
    from cpudoctor.export import ExportError
    from cpudoctor.fileio import WriteError

    return (CaptureError, CliError, DesktopError, ExportError, WriteError)


def make_node(folder: Path, name: str = "node", device: tuple[int, int] = (1, 3)) -> Path:
    """A character device (the null device by default) in ``folder``, or a FIFO where nodes are not allowed
    (not root, a nodev mount): either way something a writer must not replace."""
    path = folder / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*device))
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)        # nodev mounts refuse the open, not the mknod
        os.close(fd)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.mkfifo(path)
    return path


def is_node(path: Path) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def deadline(seconds: float = 60.0):
    """Fail instead of hanging (a FIFO opened for reading blocks until a writer comes)."""
    return alarm(seconds)


# ---------------------------------------------------------------------------- the writers


def _report():
    from export_samples import sample_report

    return sample_report()


def _export(fmt: str):
    def write(link: Path, work: Path) -> None:
        from cpudoctor.export import export_report

        export_report(_report(), fmt, link, overwrite=True)
    return write


def _emit(link: Path, work: Path) -> None:
    from cpudoctor.commands import emit

    emit("doctor's text", str(link))


def _capture(link: Path, work: Path) -> None:
    from cpudoctor.capture import capture

    capture(link, root=machine_root("hwloc-16amd64-8n2c"), force=True)


def _picture(suffix: str):
    def write(link: Path, work: Path) -> None:
        from roofline_samples import runs

        from cpudoctor.render.pdf import write_picture
        from cpudoctor.render.roofline import picture_from_runs
        from cpudoctor.render.svg_roofline import render_svg

        named = work / f"plot{suffix}"
        named.symlink_to(os.readlink(link))
        write_picture(render_svg(picture_from_runs(runs())), named)
    return write


def _desktop(which: str):
    def write(link: Path, work: Path) -> None:
        from cpudoctor.desktop import install, paths

        env = {"XDG_DATA_HOME": str(work / "data")}
        p = paths(env)
        target = p.entry if which == "entry" else p.icon
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(os.readlink(link))
        try:
            install(env, ["cpudoctor-gui"])
        finally:
            assert target.is_symlink(), "the link was replaced"
    return write


def _children_cache(link: Path, work: Path) -> None:
    from cpudoctor.kits.child.runner import ChildResult
    from cpudoctor.probes.child import cache

    folder = work / "cache"
    folder.mkdir()
    (folder / cache.FILE_NAME).symlink_to(os.readlink(link))
    assert cache.load(folder, "key", []) is None
    assert cache.save(folder, "key", [ChildResult(what="torch", returncode=0, data={"x": 1})]) is False


def _env_cache(link: Path, work: Path) -> None:
    from cpudoctor.probes.software.envcache import EnvCache

    found = EnvCache(link)
    found.put("answers", "/usr/bin/python3", {"version": "3.11"})
    found.save()


def _schema_cache(link: Path, work: Path) -> None:
    import fastjsonschema

    from cpudoctor.kits import compiled_schema

    schema = {"type": "object"}
    folder = work / "schemas"
    folder.mkdir()
    name = folder / f"t-{compiled_schema._digest(schema, fastjsonschema.VERSION)}{compiled_schema.SUFFIX}"
    name.symlink_to(os.readlink(link))
    compiled_schema.validator(schema, "t", folder)({})


def _into(link: Path, work: Path) -> None:
    from cpudoctor.commands.into import open_target

    open_target(str(link))


def _run_store(link: Path, work: Path) -> None:
    pytest.importorskip("PySide6")
    from lab_samples import train_run

    from cpudoctor.gui.training_runs import RunStore

    store = RunStore(link)
    assert store.load("key") == []
    store.save("key", [train_run()])


def _window_settings(link: Path, work: Path) -> None:
    pytest.importorskip("PySide6")
    from cpudoctor.gui.settings_file import WindowSettings

    settings = WindowSettings(link)
    settings.setValue("window/page", "Flags")
    settings.sync()
    assert settings.problem, "a settings file that is a device was neither read nor written, and said so"


WRITERS = {
    "report -o FILE.md (export)": _export("md"),
    "report -o FILE.html (export)": _export("html"),
    "report -o FILE.json (export)": _export("json"),
    "doctor/compare/run -o (emit)": _emit,
    "capture -o": _capture,
    "bench --plot FILE.svg": _picture(".svg"),
    "bench --into": _into,
    "install-desktop (entry)": _desktop("entry"),
    "install-desktop (icon)": _desktop("icon"),
    "children's cache": _children_cache,
    "interpreters' cache": _env_cache,
    "compiled schema cache": _schema_cache,
    "the window's kept lab runs": _run_store,
    "the window's settings": _window_settings,
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_leaves_a_device_node_a_node(writer, tmp_path):
    node = make_node(tmp_path)
    link = tmp_path / "target"
    link.symlink_to(node)
    work = tmp_path / "work"
    work.mkdir()
    with deadline():
        try:
            WRITERS[writer](link, work)
        except _one_line_errors() as exc:
            text = str(getattr(exc, "strerror", None) or exc)
            assert "\n" not in text and text, text
    assert is_node(node), f"{writer} replaced the device node with a file"
    assert link.is_symlink() and os.readlink(link) == str(node)


def test_a_png_picture_into_a_device_node_too(tmp_path, qapp):
    _picture(".png")
    node = make_node(tmp_path)
    link = tmp_path / "target"
    link.symlink_to(node)
    work = tmp_path / "work"
    work.mkdir()
    with deadline():
        with contextlib.suppress(*_one_line_errors()):
            _picture(".png")(link, work)
    assert is_node(node)


# ---------------------------------------------------------------------------- the window's own files


def _files(tmp_path: Path) -> dict[str, Path]:
    """Nodes and oddities a settings file or lab-runs.json may be (or link to)."""
    folder = tmp_path / "nodes"
    folder.mkdir()
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    sparse = folder / "sparse"
    with open(sparse, "wb") as fh:
        fh.truncate(3 << 30)
    deep = folder / "deep"
    deep.write_text('{"version": 1, "runs": {"k": ' + "[" * 200_000 + "]" * 200_000 + "}}")
    return {"fifo": fifo, "zero": make_node(folder, "zero", (1, 5)), "urandom": make_node(folder, "urandom", (1, 9)),
            "sparse 3 GB": sparse, "nested 200,000 deep": deep}


@pytest.mark.parametrize("kind", ["fifo", "zero", "urandom", "sparse 3 GB", "nested 200,000 deep"])
@pytest.mark.parametrize("which", ["settings", "lab-runs.json"])
def test_the_window_opens_whatever_its_files_are(qtbot, tmp_path, kind, which):
    """The window starts, shows the Training page (which reads the kept runs) and closes (which saves the
    settings), within seconds, and every node is still a node; the sparse file keeps its size."""
    from PySide6.QtCore import QThreadPool

    from cpudoctor.gui.main_window import MainWindow
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.settings_file import window_settings

    files = _files(tmp_path)
    config = tmp_path / "config"
    config.mkdir()
    name = config / ("CPU Doctor.conf" if which == "settings" else "lab-runs.json")
    if kind == "nested 200,000 deep":
        name.write_bytes(files[kind].read_bytes())
    else:
        name.symlink_to(files[kind])
    with deadline(120):
        win = MainWindow(AppModel(), settings=window_settings(config / "CPU Doctor.conf"), collect=False)
        qtbot.addWidget(win)
        win.show()
        win.show_page("Training")
        qtbot.waitUntil(lambda: win.pages.get("Training") is not None, timeout=30_000)
        win.close()
        QThreadPool.globalInstance().waitForDone(30_000)
    for label, path in files.items():
        if label in ("fifo", "zero", "urandom"):
            assert is_node(path), f"{label} is no longer a node"
    assert files["sparse 3 GB"].stat().st_size == 3 << 30
    if kind != "nested 200,000 deep":
        assert name.is_symlink()


def test_settings_in_a_regular_file_are_kept_and_read_back(qtbot, tmp_path):
    """The private copy changes nothing for a normal settings file: saved on close, read at the next start,
    through a link to a regular file too (a dotfiles manager's link stays a link)."""
    from cpudoctor.gui.main_window import MainWindow
    from cpudoctor.gui.model import AppModel
    from cpudoctor.gui.settings_file import window_settings

    real = tmp_path / "dotfiles" / "cpudoctor.conf"
    real.parent.mkdir()
    path = tmp_path / "config" / "CPU Doctor.conf"
    path.parent.mkdir()
    path.symlink_to(real)
    win = MainWindow(AppModel(), settings=window_settings(path), collect=False)
    qtbot.addWidget(win)
    win.show()
    win.show_page("Flags")
    win.close()
    assert path.is_symlink() and "page=Flags" in real.read_text()
    again = MainWindow(AppModel(), settings=window_settings(path), collect=False)
    qtbot.addWidget(again)
    assert again.current_page_title() == "Flags"
    assert again.settings.fileName() == str(path)


def test_the_default_settings_file_is_where_qt_kept_it(tmp_path, monkeypatch, qapp):
    """$XDG_CONFIG_HOME/CPU Doctor/CPU Doctor.conf on Linux: the settings of earlier versions still read."""
    import sys

    from cpudoctor.gui.settings_file import settings_path

    if not sys.platform.startswith("linux"):
        pytest.skip("Qt's native settings are a file only on Linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert settings_path() == tmp_path / "CPU Doctor" / "CPU Doctor.conf"


def test_kept_lab_runs_with_a_damaged_run_keep_the_others(tmp_path, qapp):
    from lab_samples import gemm_run, train_run

    from cpudoctor.gui.training_runs import RunStore
    from cpudoctor.model.serde import to_data

    bad = to_data(gemm_run())
    bad["metrics"]["points"][0]["gflops"] = "abc"
    path = tmp_path / "lab-runs.json"
    path.write_text(json.dumps({"version": 1, "runs": {"k": [to_data(train_run()), bad, to_data(train_run())]}}))
    assert [r.kind for r in RunStore(path).load("k")] == ["train", "train"]


def test_a_diverged_loss_does_not_lock_the_runs_file(tmp_path, qapp):
    """NaN is written as null (strict JSON), so the file stays readable and writable."""
    from lab_samples import train_run

    from cpudoctor.gui.training_runs import RunStore

    run = train_run()
    run.metrics["final_loss"] = float("nan")
    store = RunStore(tmp_path / "lab-runs.json")
    store.save("k", [run])
    store.save("k", [run, train_run()])
    assert len(store.load("k")) == 2


def test_only_regular_files_are_written_for_cpu_doctor_itself(tmp_path):
    from cpudoctor.fileio import WriteError, atomic_write

    node = make_node(tmp_path)
    with pytest.raises(WriteError) as caught:
        atomic_write(node, "x", regular_only=True)
    assert caught.value.errno == errno.EINVAL and "left as it is" in str(caught.value.strerror)
    assert is_node(node)


def test_the_real_app_leaves_a_settings_link_to_a_device_alone(tmp_path):
    """The window as a user starts it (its own settings location under $XDG_CONFIG_HOME): `CPU Doctor.conf` is a
    link to a device node; the window opens, saves its settings on close, and the node is still a node (Qt's
    writer replaced it with a 457-byte file)."""
    import subprocess
    import sys

    node = make_node(tmp_path, "zero", (1, 5))
    config = tmp_path / "config" / "CPU Doctor"
    config.mkdir(parents=True)
    (config / "CPU Doctor.conf").symlink_to(node)
    shot = tmp_path / "shot.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.run([sys.executable, "-m", "cpudoctor.gui.app", "--screenshot", str(shot),
                           "--screenshot-delay", "100", "--no-children", "--page", "Flags"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert is_node(node), "the settings writer replaced the device node"
    assert (config / "CPU Doctor.conf").is_symlink()
    assert "Traceback" not in proc.stderr
