"""Flags: every CPU flag with what it means for deep learning, searchable and filterable.

Meanings come from ``resources/flags.json`` (knowledge as data); a flag the
kernel reports that the file does not know is still listed, with an empty
meaning. The AVX-512 verdict is spelled out in words above the table, because
"avx512f is present" is not the same as "PyTorch will use AVX-512 here".
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, QTimer
from PySide6.QtGui import QColor, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (QComboBox, QFrame, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QTableView,
                               QVBoxLayout, QWidget)

from cpudoctor.gui.model import AppModel
from cpudoctor.knowledge import FLAGS, KnowledgeError
from cpudoctor.render.words import shown_notes
from cpudoctor.model import Report, arch_family

log = logging.getLogger(__name__)

COLUMNS = ("Category", "Flag", "Present", "What it means for deep learning")
CAT, FLAG, PRESENT, MEANING = range(4)
PRESENT_ROLE = Qt.ItemDataRole.UserRole + 1     # True / False / None (flags unknown)
SORT_ROLE = Qt.ItemDataRole.UserRole + 2        # categories sort by relevance, not alphabet
CATEGORY_ROLE = Qt.ItemDataRole.UserRole + 3    # the category's key (the cell shows its title)


def category_title(key: str, description: str) -> str:
    """A category as a reader sees it: flags.json's description before its examples ("Vector instruction
    sets" for ``simd``), never the internal lowercase key."""
    if description:
        return description.split(" (")[0]
    return key.replace("_", " ").capitalize()
SHOW_ALL, SHOW_PRESENT, SHOW_MISSING = "All flags", "Present", "Missing"


def load_flag_catalogue() -> tuple[dict[str, tuple[str, str]], dict[str, str], dict[str, str]]:
    """(meanings, categories, aliases) from the flag catalogue (resources/flags.json).

    ``meanings`` maps a flag to (category, meaning); ``categories`` maps a
    category key to its description, in the file's order (most relevant to
    deep learning first); ``aliases`` maps other spellings (py-cpuinfo, older
    kernels) to the kernel's flag name. All empty when the file cannot be read:
    the flags are then listed without meanings.
    """
    try:
        entries, categories, aliases = FLAGS.entries, FLAGS.categories, FLAGS.aliases
    except KnowledgeError as exc:
        log.warning("%s: flags are listed without meanings", exc)
        return {}, {}, {}
    return {name: (e["category"], e["meaning"]) for name, e in entries.items()}, dict(categories), dict(aliases)


class FlagFilter(QSortFilterProxyModel):
    """Text search over flag and meaning, plus category and present/missing filters."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = ""
        self.category = ""                  # "" = all
        self.show = SHOW_ALL
        self.setSortCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)

    def set_filters(self, text: str | None = None, category: str | None = None, show: str | None = None) -> None:
        if hasattr(self, "beginFilterChange"):        # Qt >= 6.9; invalidateFilter before
            self.beginFilterChange()
        if text is not None:
            self.text = text.strip().lower()
        if category is not None:
            self.category = category
        if show is not None:
            self.show = show
        if hasattr(self, "endFilterChange"):
            self.endFilterChange()
        else:
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent: QModelIndex) -> bool:  # noqa: N802 - Qt API
        src = self.sourceModel()
        if self.category and src.index(row, CAT, parent).data(CATEGORY_ROLE) != self.category:
            return False
        if self.show != SHOW_ALL:
            present = src.index(row, PRESENT, parent).data(PRESENT_ROLE)
            if present is not (self.show == SHOW_PRESENT):
                return False
        if self.text:
            hay = f"{src.index(row, FLAG, parent).data()} {src.index(row, MEANING, parent).data()}".lower()
            return all(word in hay for word in self.text.split())
        return True


class FlagsPage(QWidget):
    title = "Flags"
    icon_name = "flags"

    def __init__(self, model: AppModel, parent: QWidget | None = None):
        super().__init__(parent)
        self.model = model
        self.meanings, self.categories, self.aliases = load_flag_catalogue()
        self._build()
        model.report_changed.connect(self.show_report)
        if model.report is not None:
            self.show_report(model.report)

    def _build(self) -> None:
        v = QVBoxLayout(self)
        v.setContentsMargins(24, 18, 24, 18)
        v.setSpacing(10)

        self.verdict_box = QFrame()
        self.verdict_box.setObjectName("verdict")
        self.verdict_box.setStyleSheet(
            "QFrame#verdict { border: 1px solid palette(midlight); border-radius: 8px; background: palette(base); }"
            "QFrame#verdict QLabel { background: transparent; }")
        vb = QVBoxLayout(self.verdict_box)
        vb.setContentsMargins(14, 10, 14, 10)
        self.verdict_title = QLabel("AVX-512")
        f = self.verdict_title.font()
        f.setBold(True)
        f.setPointSizeF(f.pointSizeF() * 1.15)
        self.verdict_title.setFont(f)
        self.verdict_text = QLabel()
        self.verdict_text.setWordWrap(True)
        self.verdict_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        vb.addWidget(self.verdict_title)
        vb.addWidget(self.verdict_text)
        v.addWidget(self.verdict_box)

        bar = QHBoxLayout()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search flags and meanings (e.g. avx512, bf16, int8)…")
        self.search.setClearButtonEnabled(True)
        self.category = QComboBox()
        self.category.addItem("All categories", "")
        self.show_box = QComboBox()
        self.show_box.addItems([SHOW_ALL, SHOW_PRESENT, SHOW_MISSING])
        self.count = QLabel()
        self.count.setStyleSheet("color: palette(placeholder-text);")
        bar.addWidget(self.search, 3)
        bar.addWidget(self.category, 1)
        bar.addWidget(self.show_box, 1)
        bar.addWidget(self.count)
        v.addLayout(bar)

        self.source = QStandardItemModel(0, len(COLUMNS), self)
        self.source.setHorizontalHeaderLabels(list(COLUMNS))
        self.proxy = FlagFilter(self)
        self.proxy.setSourceModel(self.source)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.setWordWrap(True)
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setShowGrid(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(CAT, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(FLAG, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(PRESENT, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(MEANING, QHeaderView.ResizeMode.Stretch)
        v.addWidget(self.table, 1)
        # Row heights follow the wrapped meanings at the table's real width: sized once at
        # build time they stay two lines tall for one-line text (and clip in a narrow window).
        self._rows_timer = QTimer(self)
        self._rows_timer.setSingleShot(True)
        self._rows_timer.setInterval(0)
        self._rows_timer.timeout.connect(self.table.resizeRowsToContents)
        header.sectionResized.connect(lambda i, _old, _new: i == MEANING and self._rows_timer.start())

        self.search.textChanged.connect(lambda t: self._filter(text=t))
        self.category.currentIndexChanged.connect(lambda _: self._filter(category=self.category.currentData()))
        self.show_box.currentTextChanged.connect(lambda t: self._filter(show=t))

    def _filter(self, **kw) -> None:
        self.proxy.set_filters(**kw)
        self._update_count()

    def _update_count(self) -> None:
        self.count.setText(f"{self.proxy.rowCount()} of {self.source.rowCount()} flags")

    def show_report(self, report: Report) -> None:
        cpu = report.cpu
        present = {self.aliases.get(f.lower(), f.lower()) for f in cpu.flags}
        flags_known = bool(present)
        arch = (cpu.arch or "").lower()
        names = sorted(set(self.meanings) | present)
        order = {c: i for i, c in enumerate(self.categories)}
        self.table.setSortingEnabled(False)
        self.source.removeRows(0, self.source.rowCount())
        for name in names:
            category, meaning = self.meanings.get(name, ("other", ""))
            # sme is AMD's memory encryption on x86, Arm's matrix extension on aarch64: the report's CPU decides
            variant = FLAGS.variant(FLAGS.entries[name], cpu.arch, cpu.vendor) if name in self.meanings else None
            if variant is not None:
                category, meaning = variant
            category = category or "other"
            is_present = (name in present) if flags_known else None
            if not is_present and arch and _other_arch(category, arch):
                continue                   # ARM-only flags on an x86 CPU (and back) are noise
            items = [QStandardItem(category_title(category, self.categories.get(category, ""))), QStandardItem(name),
                     QStandardItem({True: "✓ yes", False: "no", None: "unknown"}[is_present]),
                     QStandardItem(meaning)]
            items[CAT].setToolTip(self.categories.get(category, ""))
            items[CAT].setData(category, CATEGORY_ROLE)
            # within a category, what this CPU has comes first
            items[CAT].setData(f"{order.get(category, 99):02d} {category} {0 if is_present else 1} {name}",
                               SORT_ROLE)
            items[FLAG].setData(name, SORT_ROLE)
            items[PRESENT].setData(f"{0 if is_present else 1} {order.get(category, 99):02d} {name}", SORT_ROLE)
            items[MEANING].setData(meaning.lower(), SORT_ROLE)
            items[PRESENT].setData(is_present, PRESENT_ROLE)
            if is_present:
                items[FLAG].setData(_bold(items[FLAG]), Qt.ItemDataRole.FontRole)
                items[PRESENT].setForeground(QColor("#2e8b57"))
            else:
                items[FLAG].setForeground(self.palette().placeholderText())
            items[MEANING].setToolTip(meaning)
            for it in items:
                it.setEditable(False)
            self.source.appendRow(items)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(CAT, Qt.SortOrder.AscendingOrder)

        current = self.category.currentData()
        self.category.blockSignals(True)
        self.category.clear()
        self.category.addItem("All categories", "")
        shown = {self.source.item(r, CAT).data(CATEGORY_ROLE) for r in range(self.source.rowCount())}
        for cat in sorted(shown, key=lambda c: (order.get(c, 99), c)):
            self.category.addItem(self.categories.get(cat, cat), cat)
        idx = self.category.findData(current)
        self.category.setCurrentIndex(max(idx, 0))
        self.category.blockSignals(False)
        self.proxy.set_filters(category=self.category.currentData())
        self.table.resizeRowsToContents()
        self._update_count()
        self._show_verdict(report)

    def _show_verdict(self, report: Report) -> None:
        isa = report.cpu.isa
        if report.cpu.flags and report.cpu.is_arm:
            self._show_arm_verdict(report)
            return
        if not report.cpu.flags:
            self.verdict_title.setText("AVX-512: unknown")
            self.verdict_text.setText("The CPU flags could not be read, so nothing can be said about AVX-512. "
                                      + " ".join(shown_notes(report.cpu.notes)))
            return
        if isa.avx512_usable and isa.avx512_torch_kernels:
            head = "AVX-512: usable — PyTorch can use its AVX-512 kernels"
        elif isa.avx512_usable:
            head = "AVX-512: usable, but not for PyTorch's AVX-512 kernels"
        else:
            head = "AVX-512: not usable"
        self.verdict_title.setText(head)
        parts = [isa.avx512_reason]
        if isa.avx512_usable and "pytorch" not in isa.avx512_reason.lower():
            parts.append(("PyTorch's AVX-512 kernels need F, BW, DQ and VL; all are here."
                          if isa.avx512_torch_kernels else
                          "PyTorch's AVX-512 kernels need F, BW, DQ and VL together; this CPU lacks some, "
                          "so PyTorch stays on AVX2."))
        if isa.avx512_subsets:
            parts.append("Subsets: " + ", ".join(isa.avx512_subsets) + ".")
        if isa.datapath_note:
            parts.append(isa.datapath_note)
        if isa.avx512_bf16:
            parts.append("AVX512-BF16 is present: bfloat16 autocast runs natively.")
        elif isa.avx512_usable:
            parts.append("No AVX512-BF16: bfloat16 autocast is emulated and usually slower than float32.")
        self.verdict_text.setText(" ".join(p for p in parts if p))

    def _show_arm_verdict(self, report: Report) -> None:
        """Arm has no AVX-512: say what its vector unit and DL extensions are instead."""
        isa = report.cpu.isa
        width = f"{isa.vector_width_bits}-bit vectors" if isa.vector_width_bits else "vector width unknown"
        self.verdict_title.setText(f"SIMD: {width}")
        flags = {f.lower() for f in report.cpu.flags}
        self.verdict_text.setText(" ".join([isa.datapath_note, *_arm_features(flags)]).strip())


def _arm_features(flags: set[str]) -> list[str]:
    """What an Arm CPU's Features line says about deep-learning math, in words."""
    out = []
    if flags & {"sve", "sve2"}:
        out.append("SVE" + ("2" if "sve2" in flags else "") + " (scalable vectors) is present.")
    else:
        out.append("No SVE: vector code runs on 128-bit NEON.")
    if "bf16" in flags:
        out.append("Native bf16 (BFMMLA/BFDOT): bf16 autocast can pay off.")
    else:
        out.append("No native bf16: bf16 autocast is emulated and usually slower than float32.")
    int8 = [name for flag, name in (("asimddp", "dot product"), ("i8mm", "int8 matrix multiply")) if flag in flags]
    out.append(f"int8: {' and '.join(int8)}." if int8 else "No int8 dot-product instructions.")
    return out


def _other_arch(category: str, arch: str) -> bool:
    """True for a category that belongs to another architecture than ``arch``."""
    return (category == "arm") != (arch_family(arch) == "arm") and category != "other"


def _bold(item: QStandardItem):
    font = item.font()
    font.setBold(True)
    return font
