"""The Inspector's Time tab, under the breakdown: how much of the CPU the script's kernels used.

Shows a run's :class:`~cpudoctor.model.achieved.Utilisation` as render says and draws it
(:mod:`cpudoctor.render.achieved`): the per-layer-kind bars of achieved rate against the roof, the job's kernels
on the roofline picture (the SVG ``run --plot`` writes, so the window and the file agree), and the sentences
(per kind, the whole job, no roof, not counted, where the roof came from). Hidden until a run with counted
kernels; only shows, never measures.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtSvgWidgets import QSvgWidget
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from cpudoctor.render import achieved as words
from cpudoctor.render.svg_roofline import render_bars, render_svg


class _Svg(QSvgWidget):
    """An SVG that keeps its aspect ratio inside the room the layout gives it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.svg = ""

    def show_svg(self, svg: str) -> None:
        self.svg = svg
        self.load(QByteArray(svg.encode("utf-8")))
        self.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)
        self.setVisible(bool(svg))
        self.updateGeometry()

    def sizeHint(self) -> QSize:
        size = self.renderer().defaultSize()
        return QSize(min(size.width(), 640), min(size.height(), 420)) if size.isValid() else QSize(0, 0)


class AchievedView(QWidget):
    """The run's kernels against the roof: bars, the roofline with the job's points, the sentences."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        self.heading = QLabel("<b>Achieved against this CPU's roof</b>")
        lay.addWidget(self.heading)
        self.text = QLabel("")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.text)
        self.bars = _Svg()
        lay.addWidget(self.bars)
        self.roofline = _Svg()
        self.roofline.setMinimumHeight(160)
        lay.addWidget(self.roofline, 1)
        self.achieved = None
        self.setVisible(False)

    def show_achieved(self, achieved) -> None:
        """Show a run's utilisation (None or nothing counted: hidden)."""
        self.achieved = achieved
        shown = achieved is not None and bool(achieved.kinds)
        self.setVisible(shown)
        if not shown:
            self.text.setText("")
            self.bars.show_svg("")
            self.roofline.show_svg("")
            return
        self.text.setText("\n".join(words.lines(achieved)))
        self.bars.show_svg(render_bars(words.bars(achieved)))
        self.roofline.show_svg(render_svg(words.picture(achieved)) if achieved.points else "")
