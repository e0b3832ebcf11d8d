"""The Monitor page in a short window: its charts keep a data area a curve can be read in.

At the window's minimum size (760x520, a saved report's banner above) the
heat strip and the four small charts two by two were 18-24 px high. This
helper watches the page and its chart area: a short page gets thin margins
and one detail line per tile; a short chart area puts the four small charts
side by side in one row (their series named in the tooltips); and the
total-load axis keeps room past 0 and 100 for half a label, which pyqtgraph
otherwise leaves out.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject

DENSE_BELOW_PX = 480          # a Monitor page lower than this has thin margins and one-line tile details
# The charts' area lower than this puts the four small plots in one row (if each gets this width at least).
SMALL_PLOTS_IN_ROW_BELOW_PX = 420
SMALL_PLOT_MIN_W = 150


class MonitorFit(QObject):
    """Arranges ``page`` (a MonitorPage: its outer layout, tiles, charts) for the room it gets."""

    def __init__(self, page) -> None:
        super().__init__(page)
        self.page = page
        self.one_row: bool | None = None
        self.dense: bool | None = None
        self.arrange(False)
        page.installEventFilter(self)
        page.graphics.installEventFilter(self)
        page.total_plot.getViewBox().sigResized.connect(self.pad_total_range)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Type.Resize:
            size = event.size()
            if obj is self.page:
                self.set_dense(size.height() < DENSE_BELOW_PX)
            elif obj is self.page.graphics:
                self.arrange(size.height() < SMALL_PLOTS_IN_ROW_BELOW_PX and size.width() >= 4 * SMALL_PLOT_MIN_W)
        return False

    def arrange(self, one_row: bool) -> None:
        """The four small plots two by two, or side by side in one row; the time axis named under the bottom
        row (in one row, once, under the heat strip)."""
        if one_row == self.one_row:
            return
        self.one_row = one_row
        page = self.page
        spots = [(0, i) for i in range(4)] if one_row else [(0, 0), (0, 1), (1, 0), (1, 1)]
        for plot in page.small_plots:
            page.small.removeItem(plot)
        for plot, (row, col) in zip(page.small_plots, spots):
            page.small.addItem(plot, row=row, col=col)
            plot.showLabel("bottom", not one_row and row == 1)
        for plot in page.small_plots:
            titled = getattr(plot, "series_args", None)
            if titled is not None:
                page._series_title(plot, *titled)           # short titles in one row
        for col in range(4):
            page.small.layout.setColumnStretchFactor(col, 1 if one_row or col < 2 else 0)
        for row in range(2):
            page.small.layout.setRowStretchFactor(row, 1 if row == 0 or not one_row else 0)
        # the heat strip and the row below it need about the same height for a readable data area
        page.graphics.ci.layout.setRowStretchFactor(0, 1 if one_row else 2)
        page.graphics.ci.layout.setRowStretchFactor(1, 1 if one_row else 3)

    def set_dense(self, dense: bool) -> None:
        """Thinner margins and one detail line per tile (a short page), or the roomy ones."""
        if dense == self.dense:
            return
        self.dense = dense
        page = self.page
        page._outer.setContentsMargins(18, 6 if dense else 12, 18, 6 if dense else 12)
        page._outer.setSpacing(4 if dense else 8)
        for key, tile in page.tiles.items():
            if key.endswith("_detail"):
                tile.set_lines(1 if dense else 2)

    def pad_total_range(self, *_args) -> None:
        """0 to 100 % with room past each end for half a label: pyqtgraph leaves out a label that reaches past the
        plot (a fixed 4 % was 3 px in a 79 px plot, and the axis read 25, 50, 75)."""
        plot = self.page.total_plot
        height = plot.getViewBox().height()
        half_label = self.page.fontMetrics().height() * 0.5 + 2
        pad = 4.0 if height <= 2 * half_label else max(4.0, 100.0 * half_label / (height - 2 * half_label))
        plot.setYRange(-pad, 100 + pad, padding=0)
