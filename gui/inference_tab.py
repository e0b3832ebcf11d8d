"""The Training page's Inference tab: which model, which batch sizes, and each variant's latency drawn.

The run itself is the inference lab's orchestrator in a child process (``python -m cpudoctor.lab.infer``,
started by the page's job runner like every lab job), so nothing here blocks the window. The tab shows the
segments as they come (one dot per segment's median), then each variant's distribution: a box from p25 to
p75 with the median, whiskers p10 to p90, the p99 as a tick and the sampled calls as faint dots, on a log
axis when the variants differ by more than 10×; a variant beyond the accuracy limit is drawn red. The
verdict, the code to apply and the table come from :mod:`cpudoctor.render.infer`, the words the terminal and
the exports use.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFileDialog, QGridLayout, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QSizePolicy, QSplitter, QVBoxLayout, QWidget)

from cpudoctor.gui.training_widgets import lab_plot, scrolled, spin
from cpudoctor.lab.jobs._settings import INFER_MODELS
from cpudoctor.lab.settings import InferSettings, SettingsError
from cpudoctor.render import infer as words

OK_COLOUR = "#4a90c2"
WRONG_COLOUR = "#d9534f"
FRESH_COLOUR = words.FRESH_COLOUR      # the pick in new processes of its own
# (label, source, model): the choices of the model box; a file or module asks for its target
SOURCES = (("ResNet-18 (built in, 3×224×224)", "model", "resnet18"),
           ("Transformer encoder (built in, 128 tokens)", "model", "transformer"),
           ("Your model: module:callable", "module", None),
           ("TorchScript file", "torchscript", None),
           ("ONNX file", "onnx", None))
# (row, column, rows, columns) of the model box, its target, Browse, the input shape, the batch sizes, the budget
# and the error limit: two rows of four where the tab is wide, four rows of two where it is narrow
WIDE_SPOTS = ((0, 0, 1, 2), (0, 2, 1, 1), (0, 3, 1, 1), (1, 0, 1, 1), (1, 1, 1, 1), (1, 2, 1, 1), (1, 3, 1, 1))
NARROW_SPOTS = ((0, 0, 1, 2), (1, 0, 1, 1), (1, 1, 1, 1), (2, 0, 1, 1), (2, 1, 1, 1), (3, 0, 1, 1), (3, 1, 1, 1))


def _ints(text: str) -> list[int] | None:
    parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
    try:
        return [int(p) for p in parts] if parts else None
    except ValueError:
        raise SettingsError(f"'{text}' is not a list of whole numbers, e.g. 1,8") from None


class InferencePanel(QWidget):
    """The form, the drawing and the verdict of ``bench infer`` on the Training page."""

    INTRO = ("Measures your model's inference latency (p50/p90/p99) and throughput in every variant that applies "
             "here — inference_mode, thread counts, channels_last, bf16, int8, torch.compile, ONNX Runtime, "
             "jemalloc/tcmalloc, the OpenMP wait policy — in interleaved rounds, checks each against fp32, and "
             "recommends the fastest that stays accurate (or says why it cannot).")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.metrics: dict[str, Any] | None = None
        self._live: dict[str, list[float]] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        inner = QWidget()
        self._area = scrolled(inner)                 # a small window scrolls the tab instead of cutting it
        outer.addWidget(self._area)
        lay = QVBoxLayout(inner)
        self._build_form()
        lay.addLayout(self.form)
        self._build_actions()
        lay.addLayout(self.actions)
        lay.addLayout(self.batch_row)
        self.narrow: bool | None = None
        self._arrange(False)
        self._wide_px = lay.minimumSize().width()    # below this the tab would scroll sideways: four rows of two
        split = QSplitter(Qt.Orientation.Vertical)
        self.plot = lab_plot(self, "Latency per call", "", x_label="ms per call",
                             tip="Box p25–p75 with the median, whiskers p10–p90, tick p99, dots: sampled calls; red: "
                                 "beyond the accuracy limit")
        self.plot.setMinimumHeight(140)
        split.addWidget(self.plot)
        self.text = QLabel(self.INTRO)
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.text.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        # the verdict, code and table wrap to the room they get (a table's cells wrap too): without this the label
        # asks for the width of its widest table row and the tab scrolls sideways
        self.text.setMinimumWidth(1)
        split.addWidget(scrolled(self.text))
        lay.addWidget(split, 1)

    # ------------------------------------------------------------------ the form

    def _build_form(self) -> None:
        """The model, its target, the input shape, the batch sizes, the budget and the error limit (placed by
        :meth:`_arrange`)."""
        self.form = QGridLayout()
        self.source = QComboBox()
        self.source.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.source.setMinimumContentsLength(14)
        for label, source, model in SOURCES:
            self.source.addItem(label, (source, model))
        self.source.setToolTip("; ".join(f"{k}: {v}" for k, v in INFER_MODELS.items()))
        self.target = QLineEdit()
        self.target.setPlaceholderText("mymodels:build  or  path/to/model.onnx")
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        self.shape = QLineEdit()
        self.shape.setPlaceholderText("input shape, e.g. 3,224,224")
        self.shape.setToolTip("One sample's dimensions without the batch, when the model does not say them")
        self.batches = QLineEdit("1")
        self.batches.setToolTip("Batch sizes, e.g. 1,8: batch 1 is latency, larger ones give throughput")
        self.budget = spin(5, 3600, 60)
        self.budget.setSuffix(" s budget")
        self.budget.setToolTip("The whole run ends within this, start-up included")
        self.max_error = QDoubleSpinBox()
        self.max_error.setRange(0.0, 1000.0)
        self.max_error.setDecimals(1)
        self.max_error.setValue(5.0)
        self.max_error.setSuffix(" % max error")
        self.max_error.setToolTip("The largest output error against fp32 (of fp32's largest output) a variant may "
                                  "have and still be recommended")
        for edit in (self.target, self.shape, self.batches):
            edit.setMinimumWidth(60)
        self.source.currentIndexChanged.connect(self._source_changed)
        self._source_changed()

    def _build_actions(self) -> None:
        """Measure, the batch size drawn and Copy code (placed by :meth:`_arrange`)."""
        self.run_button = QPushButton("Measure inference")
        self.run_button.setToolTip("Every variant that applies, in interleaved rounds, in a separate process")
        self.batch_label = QLabel("Batch:")
        self.batch_choice = QComboBox()
        self.batch_choice.setToolTip("The batch size drawn")
        self.batch_choice.currentIndexChanged.connect(lambda _i: self._draw())
        self.copy_button = QPushButton("Copy code")
        self.copy_button.setEnabled(False)
        self.copy_button.setToolTip("Copy the recommended variant's code")
        self.copy_button.clicked.connect(self.copy_code)
        self.actions = QHBoxLayout()                 # Measure, the batch drawn (a wide tab), Copy code
        self.batch_row = QHBoxLayout()               # the batch drawn, in a narrow tab

    def _arrange(self, narrow: bool) -> None:
        """The form in two rows of four (a wide tab) or four rows of two (a narrow one, the window's smallest
        size), the batch drawn beside the buttons or under them: the tab never scrolls sideways."""
        if narrow == self.narrow:
            return
        self.narrow = narrow
        spots = NARROW_SPOTS if narrow else WIDE_SPOTS
        fields = (self.source, self.target, self.browse, self.shape, self.batches, self.budget, self.max_error)
        for w in fields:
            self.form.removeWidget(w)
        for w, spot in zip(fields, spots):
            self.form.addWidget(w, *spot)
        for row in (self.actions, self.batch_row):
            while row.count():
                row.takeAt(0)
        self.actions.addWidget(self.run_button)
        beside = self.batch_row if narrow else self.actions
        beside.addWidget(self.batch_label)
        beside.addWidget(self.batch_choice)
        beside.addStretch(1)
        if narrow:
            self.actions.addStretch(1)
        self.actions.addWidget(self.copy_button)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        room = event.size().width() - self._area.verticalScrollBar().sizeHint().width()
        self._arrange(room < self._wide_px)

    def _source_changed(self) -> None:
        source, _model = self.source.currentData()
        self.target.setEnabled(source != "model")
        self.browse.setEnabled(source in ("torchscript", "onnx"))
        self.shape.setEnabled(source != "model")

    def _browse(self) -> None:
        source, _model = self.source.currentData()
        pattern = "ONNX files (*.onnx)" if source == "onnx" else "TorchScript files (*.pt *.pth *.ts);;All files (*)"
        path, _ = QFileDialog.getOpenFileName(self, "Choose the model file", "", pattern)
        if path:
            self.target.setText(path)

    def settings(self) -> dict[str, Any]:
        """The form as the orchestrator's settings (SettingsError names what is wrong)."""
        source, model = self.source.currentData()
        target = self.target.text().strip() or None
        if source != "model" and not target:
            raise SettingsError("give the module:callable or the model file")
        s = InferSettings(source=source, model=model or "resnet18", target=target,
                          input_shape=_ints(self.shape.text()) if source != "model" else None,
                          batches=_ints(self.batches.text()) or [1], budget_s=float(self.budget.value()),
                          max_error=self.max_error.value() / 100.0)
        return s.validate().to_dict()

    # ------------------------------------------------------------------ drawing

    def reset(self) -> None:
        self.metrics = None
        self._live = {}
        self.copy_button.setEnabled(False)
        self.batch_choice.clear()
        self.plot.clear()
        self.text.setText(self.INTRO)

    def show_progress(self, data: dict[str, Any]) -> None:
        """One segment's median as a dot on its variant's row, while the run goes on."""
        if data.get("phase") != "segment" or not data.get("variant"):
            return
        value = data.get("segment_median_ms")
        if isinstance(value, (int, float)) and value > 0:
            self._live.setdefault(str(data["variant"]), []).append(float(value))
            self._draw()

    def show_result(self, metrics: dict[str, Any]) -> None:
        self.metrics = metrics
        self._live = {}
        self.batch_choice.blockSignals(True)
        self.batch_choice.clear()
        for b in words.batches_of(metrics):
            self.batch_choice.addItem(str(b), b)
        self.batch_choice.blockSignals(False)
        rec = metrics.get("recommendation")
        self.copy_button.setEnabled(isinstance(rec, dict) and bool(words.code_block(rec.get("code"))))
        self.text.setText(words.html_block(metrics))
        self._draw()

    def copy_code(self) -> None:
        rec = (self.metrics or {}).get("recommendation")
        block = words.code_block(rec.get("code")) if isinstance(rec, dict) else ""
        if block:
            QGuiApplication.clipboard().setText(block)

    def rows(self) -> list[tuple[str, dict[str, Any] | None, list[float], bool]]:
        """(variant, its point at the chosen batch, the dots to draw, beyond the accuracy limit) per row."""
        if self.metrics is None:
            return [(name, None, values, False) for name, values in self._live.items()]
        batch = self.batch_choice.currentData()
        out = []
        for v in words.variants_of(self.metrics):
            p = words.point_of(v, batch) if batch is not None else None
            if p:
                out.append((v["name"], p, [x for x in p.get("sample_ms") or [] if isinstance(x, (int, float))],
                            v.get("accurate") is False))
        return out

    def fresh_rows(self) -> list[tuple[str, dict[str, Any]]]:
        """The pick at the chosen batch measured again in new processes of its own (drawn below the variants)."""
        batch = self.batch_choice.currentData()
        return words.fresh_rows(self.metrics, batch) if self.metrics is not None and batch is not None else []

    def _draw(self) -> None:
        rows = self.rows()
        fresh = self.fresh_rows()
        self.plot.clear()
        if not rows:
            return
        values = [x for _, p, dots, _ in rows for x in dots + [p.get(k) for k in ("p10_ms", "p90_ms", "p99_ms",
                                                                                  "latency_ms") if p]
                  if isinstance(x, (int, float)) and x > 0]
        values += [x for _, f in fresh for x in (f.get("latency_ms_lo"), f.get("latency_ms_hi"), f.get("latency_ms"))
                   if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 86_400_000]
        if not values:
            return
        log = max(values) / min(values) > 10
        # our own log scale (the plot's log mode would transform some items twice and others not at all)
        tx = (lambda v: math.log10(v)) if log else (lambda v: v)
        n = len(rows) + len(fresh)
        rng = np.random.default_rng(0)
        for i, (name, p, dots, wrong) in enumerate(rows):
            y = n - 1 - i                       # the first variant on top
            colour = WRONG_COLOUR if wrong else OK_COLOUR
            if dots:
                jitter = y + rng.uniform(-0.18, 0.18, len(dots))
                self.plot.addItem(pg.ScatterPlotItem(x=[tx(d) for d in dots], y=jitter, size=4, pen=None,
                                                     brush=pg.mkBrush(colour + "55")))
            if p and all(isinstance(p.get(k), (int, float)) for k in ("p10_ms", "p25_ms", "p50_ms", "p75_ms",
                                                                      "p90_ms")):
                p10, p25, p50, p75, p90 = (tx(p[k]) for k in ("p10_ms", "p25_ms", "p50_ms", "p75_ms", "p90_ms"))
                pen = pg.mkPen(colour, width=1.5)
                self.plot.addItem(pg.PlotDataItem([p10, p90], [y, y], pen=pen))
                self.plot.addItem(pg.BarGraphItem(x0=[p25], width=[max(p75 - p25, 1e-9)], y=[y], height=0.5,
                                                  brush=pg.mkBrush(colour + "55"), pen=pen))
                self.plot.addItem(pg.PlotDataItem([p50, p50], [y - 0.25, y + 0.25], pen=pg.mkPen(colour, width=3)))
                if isinstance(p.get("p99_ms"), (int, float)):
                    x99 = tx(p["p99_ms"])
                    self.plot.addItem(pg.PlotDataItem([x99, x99], [y - 0.15, y + 0.15],
                                                      pen=pg.mkPen(colour, width=1.5, style=Qt.PenStyle.DashLine)))
        low, high = min(values), max(values)
        for j, (_label, f) in enumerate(fresh):
            y = n - 1 - (len(rows) + j)
            pen = pg.mkPen(FRESH_COLOUR, width=2)
            dots = [x for x in f.get("segment_ms") or []
                    if isinstance(x, (int, float)) and low * 0.9 <= x <= high * 1.1]
            if dots:
                self.plot.addItem(pg.ScatterPlotItem(x=[tx(d) for d in dots], y=[y] * len(dots), size=5, pen=None,
                                                     brush=pg.mkBrush(FRESH_COLOUR + "77")))
            lo_, hi_ = f.get("latency_ms_lo"), f.get("latency_ms_hi")
            if isinstance(lo_, (int, float)) and isinstance(hi_, (int, float)) and low <= lo_ <= hi_ <= high:
                self.plot.addItem(pg.PlotDataItem([tx(lo_), tx(hi_)], [y, y], pen=pen))
            x50 = tx(f["latency_ms"])
            self.plot.addItem(pg.PlotDataItem([x50, x50], [y - 0.25, y + 0.25], pen=pg.mkPen(FRESH_COLOUR, width=3)))
        labels = [name if len(name) <= 32 else name[:31] + "…" for name, *_r in rows]
        labels += [label if len(label) <= 32 else label[:31] + "…" for label, _f in fresh]
        axis = self.plot.getPlotItem().getAxis("left")
        axis.setTicks([[(n - 1 - i, label) for i, label in enumerate(labels)]])
        axis.setWidth(int(self.fontMetrics().horizontalAdvance(max(labels, key=len))) + 12)
        bottom = self.plot.getPlotItem().getAxis("bottom")
        if log:
            bottom.setTicks([[(math.log10(v), f"{v:g}") for v in words.log_ticks(min(values), max(values))]])
        else:
            bottom.setTicks(None)
        self.plot.setYRange(-0.7, n - 0.3, padding=0)
        self.plot.setLabel("bottom", "ms per call" + (" (log scale)" if log else ""))
