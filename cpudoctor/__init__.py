"""CPU Doctor: is this CPU set up well for deep learning, why not, and how to fix it.

The package is one namespace mapped from the repository's top-level folders:
``cpudoctor.probes`` (``probes/``), ``cpudoctor.advisor`` (``advisor/``),
``cpudoctor.gui`` (``gui/``), ``cpudoctor.lab`` (``lab/``) and
``cpudoctor.resources`` (``resources/``). Dependencies point one way:
gui -> advisor -> probes. Nothing is detected at import time.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("cpudoctor")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
