"""The toolbar's environment picker: which Python environment the window describes.

A label and a tool button whose menu lists the environments found (by
:class:`cpudoctor.gui.environments.EnvironmentChooser`, off the UI thread),
each in one line (name, kind, Python, torch or "no torch", numpy; CPU Doctor's
own marked; one that cannot be used is greyed out with the reason as its tooltip,
below all the usable ones; interpreters of one kind newest first),
then "Other interpreter…" and "Look again". The button shows the chosen one,
elided to fit the toolbar (the whole line is its tooltip). While a saved report
is shown the picker is off and says which environment that report describes.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QMenu, QToolButton, QWidget

from cpudoctor.gui.environments import EnvironmentChooser, identity
from cpudoctor.probes.software.envs import PythonEnv
from cpudoctor.model import PythonInfo
from cpudoctor.render import env_choice as words

MAX_TEXT_PX = 300           # the button's text is elided beyond this (the toolbar must fit 900 px)
MIN_TEXT_PX = 120
MENU_ARROW_PX = 26          # a tool button's frame and menu arrow beside its text


class EnvironmentPicker(QWidget):
    def __init__(self, chooser: EnvironmentChooser, parent: QWidget | None = None):
        super().__init__(parent)
        self.chooser = chooser
        self.saved: PythonInfo | None = None     # the environment of the saved report shown, if any
        self._showing_saved = False
        self.max_text_px = MAX_TEXT_PX
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 0, 4, 0)
        lay.setSpacing(4)
        self.label = QLabel(words.LABEL)
        self.button = QToolButton()
        self.button.setObjectName("environment_picker")
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.label.setBuddy(self.button)
        self.menu = QMenu(self.button)
        self.menu.setToolTipsVisible(True)
        self.button.setMenu(self.menu)
        self.menu.aboutToShow.connect(chooser.start)      # a window opened on a saved report looks only now
        lay.addWidget(self.label)
        lay.addWidget(self.button)
        self.other_action = QAction(words.OTHER, self)
        self.other_action.setToolTip("Choose a Python interpreter (or an environment's folder) by hand")
        self.other_action.triggered.connect(self.ask_other)
        self.again_action = QAction(words.LOOK_AGAIN, self)
        self.again_action.setToolTip("List the Python environments again (without the cache), "
                                     "e.g. after creating one or installing PyTorch")
        self.again_action.triggered.connect(chooser.look_again)
        self.entries: list[tuple[QAction, PythonEnv]] = []
        chooser.listed.connect(lambda _envs: self.refresh())
        chooser.chosen.connect(lambda _env, _how: self.refresh())
        chooser.looking_changed.connect(lambda _busy: self.refresh())
        self.refresh()

    # -- showing ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the menu and the button from the chooser's state."""
        c = self.chooser
        self.menu.clear()
        self.entries = []
        if c.looking and not c.listed_once:
            busy = self.menu.addAction(words.LOOKING)
            busy.setEnabled(False)
        current = identity(c.current) if c.current is not None else None
        for env in words.menu_order(c.envs):
            action = self.menu.addAction(words.entry_text(env))
            action.setToolTip(words.entry_tip(env))
            action.setEnabled(env.usable)
            action.setCheckable(True)
            action.setChecked(c.decided and identity(env) == current)
            action.triggered.connect(lambda _checked=False, e=env: self.chooser.choose(e))
            self.entries.append((action, env))
        self.menu.addSeparator()
        self.menu.addAction(self.other_action)
        self.menu.addAction(self.again_action)
        self.again_action.setEnabled(not c.looking)
        if self._showing_saved:
            self._set_text(words.saved_text(self.saved), words.SAVED_TIP)
        elif c.decided:
            self._set_text(words.picker_text(c.current), words.picker_tip(c.current, c.chosen_by))
        else:
            self._set_text(words.LOOKING, words.ABOUT)
        self.button.setEnabled(not self._showing_saved)

    def _set_text(self, text: str, tip: str) -> None:
        self.full_text = text
        width = max(MIN_TEXT_PX, self.max_text_px)
        shown = self.button.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, width)
        self.button.setText(shown.replace("&", "&&"))
        # room for the text, the frame and the menu arrow, whatever the style's size hint allows
        self.button.setMinimumWidth(self.button.fontMetrics().horizontalAdvance(shown) + MENU_ARROW_PX)
        self.button.setToolTip(text + "\n" + tip if shown != text else tip)

    def set_max_text_width(self, px: int) -> None:
        """A narrower window gives the button less room (the text elides; the tooltip keeps it whole)."""
        if px != self.max_text_px:
            self.max_text_px = px
            self.refresh()

    def show_saved(self, python: PythonInfo | None) -> None:
        """A saved report is shown: the picker is off and names the environment that report describes."""
        self.saved, self._showing_saved = python, True
        self.refresh()

    def show_live(self) -> None:
        self.saved, self._showing_saved = None, False
        self.refresh()

    # -- choosing --------------------------------------------------------------------------------

    def entry(self, name: str) -> QAction | None:
        """The menu entry of the environment called ``name`` (tests and accessibility tools)."""
        return next((a for a, e in self.entries if e.name == name), None)

    def ask_other(self) -> None:
        start = self.chooser.current.prefix if self.chooser.current is not None else ""
        path, _ = QFileDialog.getOpenFileName(self, "Choose a Python interpreter", start, "All files (*)")
        if path:
            self.chooser.choose_path(path)
