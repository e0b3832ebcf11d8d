"""The window's colours: Fusion with a light or a dark palette, or the desktop's choice (View > Theme).

The choice is remembered in the window's settings (:data:`SETTINGS_KEY`);
``cpudoctor-gui --theme`` overrides it for one run. "system" follows the
desktop's colour scheme, also when it changes while the window is open. Every
page draws with palette colours and restyles on a palette change, so a switch
takes effect at once.
"""

from __future__ import annotations

THEMES = ("system", "light", "dark")
SETTINGS_KEY = "window/theme"
_PROPERTY = "cpudoctorTheme"          # the theme in force, kept on the application object


def dark_palette():
    from PySide6.QtGui import QColor, QPalette

    pal = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#25282c", QPalette.ColorRole.WindowText: "#e6e8eb",
        QPalette.ColorRole.Base: "#1d1f22", QPalette.ColorRole.AlternateBase: "#2a2d31",
        QPalette.ColorRole.ToolTipBase: "#2f3237", QPalette.ColorRole.ToolTipText: "#e6e8eb",
        QPalette.ColorRole.Text: "#e6e8eb", QPalette.ColorRole.Button: "#2f3237",
        QPalette.ColorRole.ButtonText: "#e6e8eb", QPalette.ColorRole.BrightText: "#ff6b6b",
        QPalette.ColorRole.Highlight: "#3d7ab8", QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#6fb0e8", QPalette.ColorRole.PlaceholderText: "#9aa1a9",
        QPalette.ColorRole.Light: "#3a3e44", QPalette.ColorRole.Midlight: "#33373c",
        QPalette.ColorRole.Mid: "#2b2e33", QPalette.ColorRole.Dark: "#151719", QPalette.ColorRole.Shadow: "#000000",
    }
    for role, colour in roles.items():
        pal.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b7178"))
    return pal


def dark_style_sheet() -> str:
    """Check boxes that can be seen on a dark window.

    Fusion draws an unchecked box in the Base colour with an outline derived from
    Window: on this dark palette that is #1d1f22 on #25282c, all but invisible.
    """
    from cpudoctor.gui.icons import _icons_dir

    check = str(_icons_dir().joinpath("check-light.svg")).replace("\\", "/")
    return ("QCheckBox::indicator { width: 13px; height: 13px; border: 1px solid #7a828b; border-radius: 3px;"
            " background: #1d1f22; }"
            "QCheckBox::indicator:hover { border-color: #6fb0e8; }"
            f"QCheckBox::indicator:checked {{ background: #3d7ab8; border-color: #3d7ab8; image: url({check}); }}"
            "QCheckBox::indicator:disabled { border-color: #4a4f55; background: #25282c; }"
            "QCheckBox::indicator:checked:disabled { background: #3a4a5a; border-color: #3a4a5a; }")


def apply_theme(app, theme: str = "system") -> None:
    """Fusion style with a light or dark palette; 'system' follows the desktop's colour scheme."""
    from PySide6.QtCore import Qt

    theme = theme if theme in THEMES else "system"
    app.setProperty(_PROPERTY, theme)
    hints = app.styleHints()
    if not app.property(_PROPERTY + "Followed") and hasattr(hints, "colorSchemeChanged"):
        app.setProperty(_PROPERTY + "Followed", True)
        hints.colorSchemeChanged.connect(lambda _scheme: current_theme(app) == "system" and apply_theme(app, "system"))
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")
    scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else None
    dark = theme == "dark" or (theme == "system" and scheme == Qt.ColorScheme.Dark)
    app.setPalette(dark_palette() if dark else app.style().standardPalette())
    app.setStyleSheet(dark_style_sheet() if dark else "")


def current_theme(app) -> str:
    value = app.property(_PROPERTY) if app is not None else None
    return value if value in THEMES else "system"


def remembered_theme(settings) -> str:
    """The theme chosen in the View menu last time ("system" when none, or the value is not one of ours)."""
    value = settings.value(SETTINGS_KEY, "system") if settings is not None else "system"
    return value if isinstance(value, str) and value in THEMES else "system"
