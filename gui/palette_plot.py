"""A pyqtgraph plot drawn in the palette's colours that follows a change of palette.

pyqtgraph takes colours once, when a plot is made; the window's theme can
change afterwards (View > Theme, or the desktop switching to dark). A
:class:`PalettePlot` remembers its title and axis labels and draws them, its
background, axes and grid again in the new palette's colours.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtGui import QPalette


class PalettePlot(pg.PlotWidget):
    """``setTitle``/``setLabel`` through :meth:`titled` and :meth:`labelled`; the rest is a PlotWidget."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._title: tuple[str, str] | None = None            # (text, size)
        self._labels: dict[str, str] = {}
        self.getPlotItem().hideButtons()
        self.apply_palette()

    def titled(self, text: str, size: str = "10pt") -> None:
        self._title = (text, size)
        self.getPlotItem().setTitle(text, color=self._fg().name(), size=size)

    def labelled(self, axis: str, text: str) -> None:
        self._labels[axis] = text
        self.setLabel(axis, text, color=self._muted().name())

    def _fg(self):
        return self.palette().color(QPalette.ColorRole.Text)

    def _muted(self):
        return self.palette().color(QPalette.ColorRole.PlaceholderText)

    def apply_palette(self) -> None:
        if getattr(self, "plotItem", None) is None:
            return                      # a palette change while pyqtgraph builds the plot: done once it is built
        muted = self._muted()
        self.setBackground(self.palette().color(QPalette.ColorRole.Base))
        item = self.getPlotItem()
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setTextPen(muted)
            axis.setPen(pg.mkPen(muted, width=1))
        if getattr(self, "_title", None) is not None:       # (a palette change can arrive during __init__)
            self.titled(*self._title)
        for axis, text in getattr(self, "_labels", {}).items():
            self.labelled(axis, text)

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_palette()
