"""Privacy by default: planted host name, user, home path, secret env var, MAC and serial never leak."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cpudoctor.export import render_export
from cpudoctor.privacy import Identity, Redactor, redact_report
from export_samples import sample_report

HOST = "zebrafish-lab-node-4242"
USER = "quillfeather"
HOME = f"/home/{USER}"
SECRET = "hf_supersecret123"
MAC = "00:1a:2b:3c:4d:5e"
SERIAL = "XK42-9911"
PLANTED = (HOST, USER, HOME, SECRET, MAC, SERIAL, "HF_TOKEN_SECRET")


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: HOST)
    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("USER", USER)
    monkeypatch.setenv("LOGNAME", USER)
    monkeypatch.setenv("HF_TOKEN_SECRET", SECRET)
    report = sample_report(hostname=HOST, home=HOME)
    report.notes.append(f"{USER} ran this in {HOME}/work on {HOST.upper()} with C:\\Users\\{USER}\\x")
    report.findings[0].why += f" (seen in {HOME}/.bashrc)"
    report.software.packages[0].detail = f"installed from {HOME}/wheels"
    return report


def _pdf_text(data: bytes, tmp_path) -> str:
    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(data)
    out = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    return out.stdout


@pytest.mark.parametrize("fmt", ["json", "md", "text", "html", "pdf"])
def test_no_identifying_string_in_any_format(planted, fmt, tmp_path):
    data = render_export(planted, fmt)
    if fmt == "pdf":
        if shutil.which("pdftotext") is None:
            pytest.skip("pdftotext (poppler-utils) is not installed: a machine with it runs this test")
        text = _pdf_text(data, tmp_path)
        assert "EPYC 9354" in text                      # the document really has content
    else:
        text = data.decode("utf-8")
    for secret in PLANTED:
        assert secret.lower() not in text.lower(), f"{secret!r} leaked into {fmt}"
    assert "hostname" in text.lower()                   # the placeholder is there instead


def test_opt_in_keeps_details_but_never_arbitrary_env(planted):
    text = render_export(planted, "json", include_identifying=True).decode()
    assert HOST in text and HOME in text
    assert SECRET not in text and "HF_TOKEN_SECRET" not in text  # the whitelist holds even on opt-in
    assert '"redacted": false' in text


def test_redact_report_marks_meta_and_leaves_original_untouched(planted):
    shared = redact_report(planted)
    assert shared.meta.redacted is True
    assert shared.software.os.hostname == "<hostname>"
    assert shared.software.thread_env == {"OMP_NUM_THREADS": "64"}
    assert shared.software.python.executable == "~/venv/bin/python"
    assert planted.software.os.hostname == HOST          # deep copy
    assert planted.software.thread_env["HF_TOKEN_SECRET"] == SECRET


def test_text_patterns():
    r = Redactor(Identity(hostnames={"gpu-box-9"}, users={"alice"}, homes={"/home/alice"}))
    out = r.text("alice@gpu-box-9:/home/alice/x /home/bob/y /Users/carol/z C:\\Users\\dave\\w "
                 "aa:bb:cc:dd:ee:ff 123e4567-e89b-12d3-a456-426614174000 serial number: SN123")
    assert out == ("<user>@<hostname>:~/x ~/y ~/z ~\\w <mac> <uuid> serial number: <serial>")
    # ordinary words and CPU lists survive
    assert r.text("avx512f 0-7,64-71 L3 32 MiB gpu-box-90") == "avx512f 0-7,64-71 L3 32 MiB gpu-box-90"
    assert r.text("gpu-box-9 <b>", html=True) == "&lt;hostname&gt; <b>"


def test_generic_user_names_are_not_replaced(monkeypatch):
    monkeypatch.setenv("USER", "root")
    monkeypatch.setenv("HOME", "/root")
    ident = Identity.current()
    assert "root" not in ident.users
    assert Redactor(ident).text("cpudoctor report --root /tmp/tree") == "cpudoctor report --root /tmp/tree"


def test_names_that_are_technical_words_do_not_wreck_the_report(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "debian")
    monkeypatch.setenv("USER", "amd")
    monkeypatch.setenv("LOGNAME", "amd")
    monkeypatch.setenv("HOME", "/home/amd")
    report = sample_report(hostname="debian", home="/home/amd")
    md = render_export(report, "md").decode()
    assert "AMD EPYC 9354" in md and "Debian GNU/Linux" in md
    assert "/home/amd" not in md                       # the home path is still replaced
    shared = redact_report(report)
    assert shared.software.os.hostname == "<hostname>"  # the field itself is always replaced


def test_qt_preview_html_is_redacted_and_shows_the_map_as_a_picture(planted, qtbot):
    """The Report page's preview variant: same redaction as the file, the map as an image, not loose text."""
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QTextDocument
    from PySide6.QtWidgets import QTextBrowser

    from cpudoctor.export import render_qt_html
    from cpudoctor.render.pdf import attach_pictures

    page, pictures = render_qt_html(planted)
    for secret in PLANTED:
        assert secret.lower() not in page.lower() and all(secret.lower() not in s.lower() for s in pictures.values())
    assert "<svg" not in page and "topology" in pictures
    browser = QTextBrowser()
    qtbot.addWidget(browser)
    shown = attach_pictures(browser.document(), page, pictures, max_width=600)
    browser.setHtml(shown)
    assert '<img src="cpudoctor:topology" width="' in shown
    image = browser.document().resource(QTextDocument.ResourceType.ImageResource, QUrl("cpudoctor:topology"))
    assert image is not None and not image.isNull()
    assert "Package P#0" not in browser.toPlainText()            # the map's labels are in the picture
    kept, _ = render_qt_html(planted, include_identifying=True)
    assert HOST in kept
