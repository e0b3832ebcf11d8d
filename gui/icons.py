"""Icons from package files: ``icon("monitor")`` is ``resources/icons/monitor.svg``.

The SVGs are drawn with one stroke colour (``BASE_COLOUR``); in a dark palette it
is swapped for a lighter one so the same files read well on both. An unknown
name raises with the list of known names, so a typo fails in a test, not as a
blank button.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources as _res

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

BASE_COLOUR = "#5b7288"
DARK_COLOUR = "#a9bccd"
_SIZES = (16, 24, 32, 48, 64)


def _icons_dir():
    return _res.files("cpudoctor.resources").joinpath("icons")


def known_icons() -> list[str]:
    return sorted(p.name[:-4] for p in _icons_dir().iterdir() if p.name.endswith(".svg"))


def is_dark() -> bool:
    """True when the application's palette is dark (window colour lightness < 50%)."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    return QGuiApplication.palette().window().color().lightness() < 128


def _render(svg: bytes, size: int) -> QPixmap:
    renderer = QSvgRenderer(QByteArray(svg))
    pix = QPixmap(QSize(size, size))
    pix.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    return pix


@lru_cache(maxsize=None)
def _icon(name: str, dark: bool) -> QIcon:
    ref = _icons_dir().joinpath(f"{name}.svg")
    if not ref.is_file():
        raise FileNotFoundError(f"no icon {name!r}; known icons: {', '.join(known_icons())}")
    base = ref.read_bytes()
    svg = base.replace(BASE_COLOUR.encode(), DARK_COLOUR.encode()) if dark else base
    # on a selected (highlighted) sidebar row the icon turns white, like its text
    selected = base.replace(BASE_COLOUR.encode(), b"#ffffff")
    icon = QIcon()
    for size in _SIZES:
        icon.addPixmap(_render(svg, size))
        icon.addPixmap(_render(selected, size), QIcon.Mode.Selected)
    return icon


def icon(name: str) -> QIcon:
    """The icon ``resources/icons/<name>.svg``, tinted for the current palette."""
    return _icon(name, is_dark())


@lru_cache(maxsize=1)
def app_icon() -> QIcon:
    """The application icon (``resources/cpudoctor.svg``) at the usual sizes."""
    svg = _res.files("cpudoctor.resources").joinpath("cpudoctor.svg").read_bytes()
    icon = QIcon()
    for size in (16, 24, 32, 48, 64, 128, 256):
        icon.addPixmap(_render(svg, size))
    return icon
