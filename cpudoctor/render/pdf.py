"""PDF through Qt's own printing (QTextDocument + QPdfWriter): no extra dependency.

The adapter between the report renderers and Qt: the only module outside
``cpudoctor.gui`` that may import Qt (an import-linter contract in
pyproject.toml holds it to that), and it imports Qt only inside its functions,
so importing :mod:`cpudoctor.render` never loads Qt.

Qt needs a QGuiApplication for fonts. From the GUI one exists already; from
the CLI or a test without a display, this module starts one on the
``offscreen`` platform, so ``cpudoctor report --format pdf`` works over SSH.
The HTML comes from :func:`cpudoctor.render.html.build_html` with
``images="resources"``: Qt's rich text has no inline SVG, so each picture is
referenced by name and drawn as vectors by a QSvgRenderer text object (sharp
at any zoom, small files); where that path is unavailable it is rasterised
at 3x and handed over as an image resource. Pages are painted one by one so
each gets a footer with the report title and "page N of M".
"""

from __future__ import annotations

import os
import re
import threading

_IMG_RE = re.compile(r'<img src="cpudoctor:([A-Za-z0-9_]+)">')
_SVG_SIZE_RE = re.compile(r'<svg[^>]*\bwidth="(\d+)"[^>]*\bheight="(\d+)"')
TEXT_WIDTH_PX = 680          # A4 minus 15 mm margins, in Qt's 96-dpi layout units
FOOTER_PX = 24               # kept free at the bottom of each page for the title and page number
SCALE = 3
# Qt's text layout and font engines are not safe to drive from two threads at
# once (two exports started quickly from the GUI's pool): one PDF at a time.
_LOCK = threading.Lock()


def _ensure_gui_app():
    """The running QGuiApplication, or a new offscreen one when none exists."""
    from PySide6.QtCore import QCoreApplication

    app = QCoreApplication.instance()
    if app is not None:
        from PySide6.QtGui import QGuiApplication

        if not isinstance(app, QGuiApplication):
            raise RuntimeError("PDF export needs a Qt GUI application, but a console-only QCoreApplication "
                               "is running; export HTML instead and print it to PDF from a browser")
        return app
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY") and os.name == "posix":
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        # A QApplication (not just QGuiApplication) so a later widget in the same
        # process (the GUI, pytest-qt) can reuse it instead of aborting.
        from PySide6.QtWidgets import QApplication as _App
    except ImportError:
        from PySide6.QtGui import QGuiApplication as _App

    try:
        app = _App(["cpudoctor"])
    except Exception as exc:  # noqa: BLE001 - Qt aborts differ by platform
        raise RuntimeError(f"cannot start Qt to write the PDF ({exc}); export HTML instead") from None
    _ensure_gui_app.app = app  # keep it alive for the process lifetime
    return app


def _rasterise(svg: str, width: int, height: int, scale: int = SCALE):
    from PySide6.QtCore import QByteArray, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    image = QImage(width * scale, height * scale, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.white)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    renderer.render(painter)
    painter.end()
    return image


def write_png(svg: str, path, scale: int = 2) -> None:
    """``svg`` rasterised at ``scale`` into a PNG file (``bench roofline --plot x.png``); RuntimeError when Qt
    cannot start or the file cannot be written."""
    m = _SVG_SIZE_RE.search(svg)
    if not m:
        raise RuntimeError("the picture has no width and height to rasterise at")
    with _LOCK:
        _ensure_gui_app()
        from PySide6.QtCore import QBuffer, QByteArray, QIODevice

        image = _rasterise(svg, int(m.group(1)), int(m.group(2)), scale)
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        if not image.save(buffer, "PNG"):
            raise RuntimeError("Qt could not encode the PNG")
        buffer.close()
    from cpudoctor.fileio import atomic_write

    atomic_write(path, bytes(data.data()))


def write_picture(svg: str, path) -> None:
    """An SVG picture into ``path``: rasterised when it ends in .png, else the SVG text (both atomically).
    OSError (fileio's WriteError is one) or RuntimeError when it cannot be written."""
    if str(path).lower().endswith(".png"):
        write_png(svg, path)
        return
    from cpudoctor.fileio import atomic_write

    atomic_write(path, svg + "\n")


def _svg_handler():
    """A QTextDocument object type that paints an SVG with QSvgRenderer: vectors in the PDF.

    One per document (concurrent exports must not share pictures); the caller
    keeps it alive while the document is printed, since the layout holds only
    a raw pointer to it. The class is built lazily: it subclasses Qt classes.
    """
    if getattr(_svg_handler, "cls", None) is not None:
        return _svg_handler.cls()
    from PySide6.QtCore import QByteArray, QSizeF
    from PySide6.QtGui import QPyTextObject
    from PySide6.QtSvg import QSvgRenderer

    class SvgObject(QPyTextObject):
        def __init__(self):
            super().__init__()
            self.svgs: dict[str, tuple[QSvgRenderer, float, float]] = {}

        def add(self, name: str, svg: str, w: float, h: float) -> None:
            self.svgs[name] = (QSvgRenderer(QByteArray(svg.encode("utf-8"))), w, h)

        def intrinsicSize(self, doc, pos, fmt):  # noqa: N802 - Qt override
            _, w, h = self.svgs.get(fmt.property(_PROP_NAME), (None, 1.0, 1.0))
            return QSizeF(w, h)

        def drawObject(self, painter, rect, doc, pos, fmt):  # noqa: N802 - Qt override
            renderer = self.svgs.get(fmt.property(_PROP_NAME), (None,))[0]
            if renderer is not None:
                renderer.render(painter, rect)

    _svg_handler.cls = SvgObject
    return SvgObject()


_SVG_OBJECT = 0x1000 + 1        # QTextFormat.UserObject + 1
_PROP_NAME = 0x100000 + 1       # QTextFormat.UserProperty + 1


def _replace_images_with_svg(doc, names: set[str]) -> int:
    """Swap each ``<img src="cpudoctor:NAME">`` for the vector SVG object; returns how many."""
    from PySide6.QtGui import QTextCharFormat, QTextCursor

    spots: list[tuple[int, int, str]] = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            fmt = frag.charFormat()
            if fmt.isImageFormat():
                name = fmt.toImageFormat().name().removeprefix("cpudoctor:")
                if name in names:
                    spots.append((frag.position(), frag.length(), name))
            it += 1
        block = block.next()
    for pos, length, name in reversed(spots):
        cursor = QTextCursor(doc)
        cursor.setPosition(pos)
        cursor.setPosition(pos + length, QTextCursor.MoveMode.KeepAnchor)
        obj = QTextCharFormat()
        obj.setObjectType(_SVG_OBJECT)
        obj.setProperty(_PROP_NAME, name)
        cursor.insertText("\ufffc", obj)
    return len(spots)


def attach_pictures(doc, page: str, pictures: dict[str, str], max_width: int = TEXT_WIDTH_PX) -> str:
    """Make ``page`` (``images="resources"`` HTML) showable in a QTextDocument/QTextBrowser.

    Each picture is rasterised (2x, for high-dpi screens) and added to ``doc``
    as the image resource its ``<img src="cpudoctor:NAME">`` names; the
    returned page carries display sizes, at most ``max_width`` px wide. For the
    Report page's preview: Qt's rich text shows inline SVG as loose text.
    Call it on the GUI thread, then ``setHtml`` the returned page.
    """
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QTextDocument

    sizes: dict[str, tuple[int, int]] = {}
    for name, svg in pictures.items():
        m = _SVG_SIZE_RE.search(svg)
        w, h = (int(m.group(1)), int(m.group(2))) if m else (600, 300)
        shown = min(w, max_width)
        sizes[name] = (shown, max(1, round(h * shown / w)))
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"cpudoctor:{name}"),
                        _rasterise(svg, w, h, scale=2))

    def _sized(m: re.Match[str]) -> str:
        w, h = sizes.get(m.group(1), (max_width, 300))
        return f'<img src="cpudoctor:{m.group(1)}" width="{w}" height="{h}">'

    return _IMG_RE.sub(_sized, page)


MAX_HEADING_PASSES = 40     # each pass moves at most one heading; a report has far fewer at a page's foot
SECTION_KEEP_PX = 200       # a section that runs over a page keeps at least this much under its heading on the first


def keep_headings_with_next(doc) -> int:
    """Start a new page before a heading that would stand at the foot of a page without what it heads.

    Qt's rich text has no ``break-after: avoid``: after the layout, a heading
    (``<h1>``..``<h6>``) whose next two blocks (a note, a table's first row)
    do not all begin on its page, or whose section runs over the page with less
    than SECTION_KEEP_PX of it under the heading, gets a page break before it, and the layout
    runs again. A run of headings ("Software stack" over "Operating system")
    moves as one. Returns how many page breaks were added.
    """
    from PySide6.QtGui import QTextCursor, QTextFormat

    page_h = doc.pageSize().height()
    if page_h <= 0:
        return 0
    layout = doc.documentLayout()
    always = QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore

    def heading(block) -> bool:
        return block.isValid() and block.blockFormat().headingLevel() > 0 and bool(block.text().strip())

    def page(y: float) -> int:
        return int(y // page_h)

    def section_end(block) -> float:
        """Where the section under ``block`` ends: the next heading's top (the document's end without one)."""
        nxt = block.next()
        while nxt.isValid() and not heading(nxt):
            nxt = nxt.next()
        return layout.blockBoundingRect(nxt).top() if nxt.isValid() else layout.documentSize().height()

    def stranded(block) -> bool:
        rect = layout.blockBoundingRect(block)
        top = page(rect.top())
        nxt = block.next()
        for _ in range(2):
            if not nxt.isValid():
                return False
            r = layout.blockBoundingRect(nxt)
            if page(r.top() + min(r.height(), 12)) != top:
                return True
            nxt = nxt.next()
        # the heading with a line or two at a page's foot and the section's substance (its chart, its table)
        # on the next page reads as a heading alone
        page_end = (top + 1) * page_h
        return section_end(block) > page_end and page_end - rect.bottom() < SECTION_KEEP_PX

    moved = 0
    for _ in range(MAX_HEADING_PASSES):
        block, target = doc.begin(), None
        while block.isValid() and target is None:
            if heading(block) and not block.blockFormat().pageBreakPolicy() & always and stranded(block):
                target = block
            block = block.next()
        if target is None:
            break
        while heading(target.previous()):
            target = target.previous()             # the headings above it go with it
        fmt = target.blockFormat()
        fmt.setPageBreakPolicy(always)
        QTextCursor(target).setBlockFormat(fmt)
        follower = target.next()
        while heading(follower):                    # a heading of the same run needs no break of its own now
            ffmt = follower.blockFormat()
            if ffmt.pageBreakPolicy() & always:
                ffmt.setPageBreakPolicy(QTextFormat.PageBreakFlag.PageBreak_Auto)
                QTextCursor(follower).setBlockFormat(ffmt)
            follower = follower.next()
        # the layout is incremental: lay the whole document out again before the next look (and the print)
        doc.markContentsDirty(0, doc.characterCount())
        layout.documentSize()
        moved += 1
    return moved


def _print_with_footer(doc, writer, title: str) -> None:
    """Paint page by page (what ``QTextDocument.print_`` does) plus a footer: title and "page 2 of 7".

    A printed or forwarded report loses its order and its origin without them;
    ``print_`` draws page numbers only for documents without a page size, and
    ours has one (the A4 text area the layout wraps to).
    """
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QColor, QFont, QPainter

    page = doc.pageSize()
    pages = max(1, doc.pageCount())
    painter = QPainter(writer)
    try:
        scale = writer.width() / page.width()
        font = QFont("DejaVu Sans")
        font.setPixelSize(9)
        for i in range(pages):
            if i:
                writer.newPage()
            painter.save()
            painter.scale(scale, scale)
            painter.save()
            painter.translate(0, -i * page.height())
            painter.setClipRect(QRectF(0, i * page.height(), page.width(), page.height()))
            doc.drawContents(painter, QRectF(0, i * page.height(), page.width(), page.height()))
            painter.restore()
            painter.setFont(font)
            painter.setPen(QColor("#5f6b77"))
            strip = QRectF(0, page.height() + FOOTER_PX - 14, page.width(), 14)
            painter.drawText(strip, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), title)
            painter.drawText(strip, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                             f"page {i + 1} of {pages}")
            painter.restore()
    finally:
        painter.end()


def pdf_from_html(page: str, pictures: dict[str, str] | None = None, title: str = "CPU Doctor report") -> bytes:
    """Lay out ``page`` (Qt rich-text HTML) on A4 and return the PDF bytes.

    Pictures are drawn as vectors (sharp at any zoom, small files); where the
    vector path is unavailable they are rasterised at 3x instead.
    """
    _ensure_gui_app()
    with _LOCK:
        return _pdf_from_html(page, pictures or {}, title)


def _pdf_from_html(page: str, pictures: dict[str, str], title: str) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QSizeF, QUrl
    from PySide6.QtGui import QPageLayout, QPageSize, QPdfWriter, QTextDocument

    doc = QTextDocument()
    sizes: dict[str, tuple[int, int]] = {}
    full: dict[str, tuple[int, int]] = {}
    for name, svg in pictures.items():
        m = _SVG_SIZE_RE.search(svg)
        w, h = (int(m.group(1)), int(m.group(2))) if m else (600, 300)
        shown_w = min(w, TEXT_WIDTH_PX)
        sizes[name] = (shown_w, max(1, round(h * shown_w / w)))
        full[name] = (w, h)

    def _sized(m: re.Match[str]) -> str:
        w, h = sizes.get(m.group(1), (TEXT_WIDTH_PX, 300))
        return f'<img src="cpudoctor:{m.group(1)}" width="{w}" height="{h}">'

    try:
        handler = _svg_handler()
        for name, svg in pictures.items():
            handler.add(name, svg, *sizes[name])
    except (ImportError, AttributeError, TypeError):
        handler = None
    if handler is None:
        for name, svg in pictures.items():
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"cpudoctor:{name}"),
                            _rasterise(svg, *full[name]))
    doc.setHtml(_IMG_RE.sub(_sized, page))
    if handler is not None:
        doc.documentLayout().registerHandler(_SVG_OBJECT, handler)
        _replace_images_with_svg(doc, set(pictures))
    # Lay out on an A4 text area measured in 96-dpi px, less a strip at the bottom for the footer.
    doc.setDocumentMargin(0)
    doc.setPageSize(QSizeF(TEXT_WIDTH_PX, TEXT_WIDTH_PX * 267 / 180 - FOOTER_PX))
    keep_headings_with_next(doc)
    doc.setMetaInformation(QTextDocument.MetaInformation.DocumentTitle, title)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buf)
    writer.setTitle(title)
    writer.setCreator("CPU Doctor")
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setPageMargins(QMarginsF(15, 15, 15, 15), QPageLayout.Unit.Millimeter)
    _print_with_footer(doc, writer, title)
    buf.close()
    del handler                     # only now: the layout no longer paints with it
    out = bytes(data.data())
    if not out.startswith(b"%PDF"):
        raise RuntimeError("Qt produced no PDF output; export HTML instead")
    return out


def render_pdf(report, scrub=None, shell: str | None = None, exported_at: str | None = None) -> bytes:
    """The report as PDF bytes; ``scrub`` (the privacy pass) runs over the page and its title first; fixes'
    commands for ``shell`` (None: the shell of the report's machine).

    Redacting the report itself is :mod:`cpudoctor.export`'s job.
    """
    from cpudoctor.render.html import build_html

    page, pictures = build_html(report, images="resources", shell=shell, exported_at=exported_at)
    title = f"CPU Doctor report — {report.cpu.brand or 'unknown CPU'}"
    if scrub is not None:
        page, title = scrub(page), scrub(title)
    return pdf_from_html(page, pictures, title=title)
