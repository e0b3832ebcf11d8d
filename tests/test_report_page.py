"""Report page and report actions, offscreen: preview, one-click export, copy, open, compare, capture."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtGui import QGuiApplication  # noqa: E402
from PySide6.QtWidgets import QMessageBox, QWidget  # noqa: E402

from cpudoctor.export import export_report  # noqa: E402
from cpudoctor.gui import export as gexport  # noqa: E402
from cpudoctor.gui.export import CompareDialog, ExportDialog, ReportActions  # noqa: E402
from cpudoctor.gui.model import AppModel  # noqa: E402
from cpudoctor.gui.report_page import ReportPage  # noqa: E402
from export_samples import BRAND, sample_report  # noqa: E402


@pytest.fixture
def docs(tmp_path, monkeypatch):
    folder = tmp_path / "Documents"
    folder.mkdir()
    monkeypatch.setattr(gexport, "documents_folder", lambda: folder)
    return folder


@pytest.fixture
def actions(qtbot):
    window = QWidget()
    qtbot.addWidget(window)
    model = AppModel()
    ra = ReportActions(model, window)
    return model, ra


def _wait_worker(qtbot, worker):
    qtbot.waitUntil(lambda: worker not in gexport.__dict__.get("_never", ()) and _done(worker), timeout=20000)


def _done(worker) -> bool:
    from cpudoctor.gui import workers

    return worker not in workers._LIVE


def test_page_previews_redacted_markdown_and_html(qtbot, monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "build-box-7")
    model = AppModel()
    page = ReportPage(model)
    qtbot.addWidget(page)
    assert page.title == "Report" and page.icon_name == "report"
    assert not page.export_button.isEnabled()
    model.set_report(sample_report())
    qtbot.waitUntil(lambda: "EPYC 9354" in page.preview.toPlainText(), timeout=10000)
    assert "build-box-7" not in page.preview.toPlainText()
    assert "Findings" in page.preview.toPlainText()
    page.format_box.setCurrentIndex(page.format_box.findData("html"))
    qtbot.waitUntil(lambda: getattr(page, "rendered", "") == "html", timeout=10000)
    assert "Instruction sets" in page.preview.toPlainText()
    assert "th { text-align: left" in page.preview.document().defaultStyleSheet()   # row headings not centred
    page.privacy.setChecked(True)
    qtbot.waitUntil(lambda: "build-box-7" in page.preview.toPlainText(), timeout=10000)
    page.copy()
    assert "build-box-7" in QGuiApplication.clipboard().text()


def test_markdown_preview_italics_are_not_underlined(qtbot):
    """'_generated …_' is GitHub italics; Qt's reader would underline it like a link."""
    assert gexport.qt_markdown("_generated today_\nOMP_NUM_THREADS_x_\n") == "*generated today*\nOMP_NUM_THREADS_x_\n"
    model = AppModel()
    page = ReportPage(model)
    qtbot.addWidget(page)
    model.set_report(sample_report())
    qtbot.waitUntil(lambda: "collected" in page.preview.toPlainText(), timeout=10000)
    html = page.preview.toHtml()
    assert "underline" not in html and "font-style:italic" in html


def test_quick_export_writes_timestamped_html(qtbot, actions, docs):
    model, ra = actions
    assert not ra.export_quick.isEnabled()
    model.set_report(sample_report())
    assert ra.export_quick.isEnabled()
    with qtbot.waitSignal(ra.exported, timeout=20000) as blocker:
        ra.export_quick.trigger()
    path = Path(blocker.args[0])
    assert path.parent == docs and path.suffix == ".html"
    assert path.name.startswith(f"cpudoctor-report-{dt.date.today():%Y-%m-%d}-")
    assert "<svg" in path.read_text() and BRAND in path.read_text()
    buttons = [b.text() for b in ra.last_message.buttons()]
    assert "Open" in buttons and "Show in folder" in buttons
    with qtbot.waitSignal(ra.exported, timeout=20000) as second:    # a second click never overwrites
        ra.export_quick.trigger()
    assert Path(second.args[0]) != path and path.exists()
    ra.last_message.close()


def test_export_failure_is_a_clear_message(qtbot, actions, tmp_path):
    model, ra = actions
    model.set_report(sample_report())
    blocker_file = tmp_path / "file"
    blocker_file.write_text("x")
    with qtbot.waitSignal(ra.failed, timeout=20000) as blocker:
        ra.start_export(model.report, "pdf", blocker_file / "r.pdf")
    assert "does not exist" in blocker.args[0]
    assert ra.last_message.icon() == QMessageBox.Icon.Warning
    ra.last_message.close()


def test_export_dialog_defaults(qtbot, docs):
    dlg = ExportDialog(None, "html")
    qtbot.addWidget(dlg)
    assert not dlg.privacy.isChecked()
    assert dlg.privacy.text() == "Include identifying details (user name, paths, serials)"
    assert [dlg.format_box.itemData(i) for i in range(dlg.format_box.count())] == ["html", "md", "json", "pdf"]
    dlg.format_box.setCurrentIndex(3)
    assert dlg.path.suffix == ".pdf" and dlg.path.parent == docs


def test_copy_markdown(qtbot, actions, monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "build-box-7")
    model, ra = actions
    model.set_report(sample_report())
    ra.copy_markdown.trigger()
    text = QGuiApplication.clipboard().text()
    assert "## Findings" in text and "build-box-7" not in text


def test_open_saved_report_read_only_with_advisor(qtbot, actions, tmp_path):
    model, ra = actions
    saved = export_report(sample_report(), "json", tmp_path / "a.json")
    with qtbot.waitSignal(model.findings_changed, timeout=30_000, check_params_cb=bool):
        ra.open_path(saved)
    assert model.read_only is True
    assert model.source_label == "Saved report a.json"
    assert model.report.cpu.brand == BRAND
    said = []
    model.status_message.connect(said.append)
    with qtbot.waitSignal(ra.collector.opened, timeout=20_000):
        ra.open_path(saved)
    assert "Opened a.json read-only" in said


@pytest.mark.parametrize("content, message", [("{oops", "not valid JSON"), ('{"a": 1}', "not a CPU Doctor report"),
                                              ('{"schema_version": 7, "meta": {"kind": "cpudoctor-report"}}',
                                               "schema version 7")])
def test_open_bad_files(qtbot, actions, tmp_path, content, message):
    model, ra = actions
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with qtbot.waitSignal(ra.failed, timeout=30_000) as blocker:
        ra.open_path(bad)
    assert message in blocker.args[0] and model.report is None
    ra.last_message.close()


def test_compare_dialog_current_vs_file(qtbot, tmp_path):
    current = sample_report()
    other = sample_report()
    other.software.torch.version = "2.5.0+cpu"
    path = export_report(other, "json", tmp_path / "b.json")
    dlg = CompareDialog(current, "This machine")
    qtbot.addWidget(dlg)
    dlg.b_edit.setText(str(path))
    with qtbot.waitSignal(dlg.compared, timeout=30_000):
        assert dlg.run_compare()                                       # read and compared on the pool
    text = dlg.view.toPlainText()
    assert ("torch.version" in text or "PyTorch" in text) and "2.5.0+cpu" in text   # raw or human field name
    dlg.fmt_box.setCurrentIndex(dlg.fmt_box.findData("text"))          # the format switch re-renders at once
    assert dlg.view.toPlainText() != text and "2.5.0+cpu" in dlg.view.toPlainText()
    dlg.b_edit.setText(str(tmp_path / "missing.json"))
    with qtbot.waitSignal(dlg.failed, timeout=30_000):
        dlg.run_compare()
    assert "cannot read" in dlg.status.text() and dlg.result is None
    dlg.b_edit.clear()
    assert not dlg.run_compare() and "Browse" in dlg.status.text() and dlg.view.toPlainText() == ""


def test_capture_action_in_worker(qtbot, actions, tmp_path):
    model, ra = actions
    out = tmp_path / "cap.tar.gz"
    with qtbot.waitSignal(ra.captured, timeout=300_000) as blocker:
        ra.start_capture(out)
    assert blocker.args[0].files > 0 and out.is_file()
    # the window's capture carries the environment too (the suite's, CPUDOCTOR_PYTHON; the model has no report)
    import tarfile

    with tarfile.open(out) as tar:
        assert "cpudoctor-capture/environment.json" in tar.getnames()
    assert blocker.args[0].environment
    ra.last_message.close()


def test_html_preview_shows_the_map_as_a_picture_not_loose_text(qtbot):
    """Qt's rich text cannot draw inline SVG: the preview gets the map as an image resource."""
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QTextDocument

    model = AppModel()
    page = ReportPage(model)
    qtbot.addWidget(page)
    page.format_box.setCurrentIndex(page.format_box.findData("html"))
    model.set_report(sample_report())
    qtbot.waitUntil(lambda: getattr(page, "rendered", "") == "html", timeout=10000)
    html = page.preview.toHtml()
    assert 'src="cpudoctor:' in html and "<svg" not in html
    name = html.split('src="cpudoctor:', 1)[1].split('"', 1)[0]
    image = page.preview.document().resource(QTextDocument.ResourceType.ImageResource, QUrl(f"cpudoctor:{name}"))
    assert image is not None and not image.isNull()
    assert page.text.lstrip().lower().startswith("<!doctype html")      # Copy still copies the real file


def test_open_without_a_launcher_says_so_and_offers_the_path(qtbot, actions, docs, monkeypatch):
    """No xdg-open (a server, a bare container): not a silent nothing, but a message with the path to copy."""
    from PySide6.QtGui import QGuiApplication

    model, ra = actions
    model.set_report(sample_report())
    monkeypatch.setattr(gexport, "open_with_desktop", lambda target: False)
    with qtbot.waitSignal(ra.exported, timeout=20000) as blocker:
        ra.export_quick.trigger()
    path = Path(blocker.args[0])
    saved_box = ra.last_message
    assert "Copy path" in [b.text() for b in saved_box.buttons()]
    with qtbot.waitSignal(ra.failed, timeout=30_000) as failed:
        next(b for b in saved_box.buttons() if b.text() == "Open").click()
    assert str(path) in failed.args[0] and "no program to open it" in failed.args[0]
    box = ra.last_message
    assert box is not saved_box and str(path) in box.text()
    next(b for b in box.buttons() if b.text() == "Copy path").click()
    assert QGuiApplication.clipboard().text() == str(path)
    box.close()


def test_documents_folder_is_created_when_missing(tmp_path, monkeypatch):
    from PySide6.QtCore import QStandardPaths

    missing = tmp_path / "home" / "Documents"
    monkeypatch.setattr(QStandardPaths, "writableLocation", lambda loc: str(missing))
    assert gexport.documents_folder() == missing and missing.is_dir()


def test_compare_dialog_has_close_and_shows_a_thread_change(qtbot, tmp_path):
    current = sample_report()
    other = sample_report()
    current.software.torch.intra_op_threads = 2
    other.software.torch.intra_op_threads = 1
    path = export_report(other, "json", tmp_path / "b.json")
    dlg = CompareDialog(current, "This machine")
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.b_edit.setText(str(path))
    with qtbot.waitSignal(dlg.compared, timeout=30_000):
        assert dlg.run_compare()
    change = next(c for c in dlg.result.changes if c.item == "torch.intra_op_threads")
    assert (change.a, change.b, change.note) == (2, 1, "-1")
    row = next(line for line in dlg.view.toPlainText().splitlines() if "2" in line and "1" in line and "-1" in line)
    assert row
    assert dlg.close_button is not None and dlg.close_button.text().replace("&", "") == "Close"
    dlg.close_button.click()
    assert not dlg.isVisible()


def test_markdown_preview_shows_marks_as_symbols_not_brackets(qtbot):
    """The file keeps [✓] / [-] for terminals and issues; the preview draws them as coloured symbols."""
    model = AppModel()
    page = ReportPage(model)
    qtbot.addWidget(page)
    report = sample_report()
    model.set_report(report)
    qtbot.waitUntil(lambda: page.text.startswith("# CPU Doctor"), timeout=20000)
    assert "[✓]" in page.text or "[-]" in page.text                       # what Copy and Export give
    shown = page.preview.toPlainText()
    for raw in ("[✓]", "[-]", "[✗]", "[!]", "[i]"):
        assert raw not in shown
    assert "✓" in shown or "–" in shown
    assert gexport.preview_marks("```\nx[i]\n```\n`a[i]` [i] b") == (
        '```\nx[i]\n```\n`a[i]` <span style="color:#4a90c2">ℹ</span> b')


def test_the_preview_says_whether_it_shows_the_file_or_its_rendering(qtbot):
    """Issue 40, 13: the Markdown preview rendered tables under "exactly what Export writes". Rendered, it says so;
    "Show the file's text" shows the characters Export writes, and then "exactly" is true."""
    from cpudoctor.export import render_export

    model = AppModel()
    page = ReportPage(model)
    qtbot.addWidget(page)
    page.show()
    model.set_report(sample_report())
    qtbot.waitUntil(lambda: page.rendered == "md", timeout=10_000)
    assert "exactly" not in page.subtitle.text() and "as GitHub shows it" in page.subtitle.text()
    assert "|" not in page.preview.toPlainText().splitlines()[0] and page.source.isVisible()
    page.source.setChecked(True)
    qtbot.waitUntil(lambda: "exactly" in page.subtitle.text(), timeout=10_000)
    written = render_export(model.report, "md").decode()
    shown = page.preview.toPlainText()
    assert shown.splitlines()[0] == written.splitlines()[0] and "|---|" in shown
    page.format_box.setCurrentIndex(page.format_box.findData("json"))
    qtbot.waitUntil(lambda: page.rendered == "json", timeout=10_000)
    assert not page.source.isVisible() and "exactly what Export writes" in page.subtitle.text()
