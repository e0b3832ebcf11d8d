"""CPU Doctor: is this CPU set up well for deep learning, why not, and how to fix it.

The package is one namespace mapped from the repository's top-level folders:
``cpudoctor.probes`` (``probes/``), ``cpudoctor.advisor`` (``advisor/``),
``cpudoctor.gui`` (``gui/``), ``cpudoctor.lab`` (``lab/``) and
``cpudoctor.resources`` (``resources/``). Dependencies point one way:
gui -> advisor -> probes. Nothing is detected at import time.
"""



def _installed_version() -> str:
    """This distribution's version, from the name of its ``cpudoctor-VERSION.dist-info`` folder (the first on
    the import path, as import finds the package): every command and the window read it at start, and
    ``importlib.metadata`` (an e-mail parser, zipfile, csv) costs more than the rest of a quick report's
    imports. ``importlib.metadata`` where no such folder is found (a zip, an egg)."""
    import os
    import sys

    for entry in sys.path:
        try:
            names = os.listdir(entry or os.curdir)
        except (OSError, TypeError, ValueError):
            continue
        for name in names:
            if name.startswith("cpudoctor-") and name.endswith(".dist-info"):
                return name[len("cpudoctor-"):-len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cpudoctor")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"


__version__ = _installed_version()

# The project's home, in one place: rule documentation links in exports point here (a relative
# "docs/rules.md#..." breaks once a report is pasted into an issue). pyproject's [project.urls]
# says the same; tests/test_readme_facts.py checks that they agree.
PROJECT_URL = "https://github.com/cpudoctor/cpudoctor"
DOCS_BRANCH = "main"


def docs_url(path: str) -> str:
    """An absolute link to a file of the repository (``docs/rules.md#isa001`` -> https://github.com/...)."""
    if path.startswith(("http://", "https://")):
        return path
    return f"{PROJECT_URL}/blob/{DOCS_BRANCH}/{path.lstrip('/')}"


__all__ = ["DOCS_BRANCH", "PROJECT_URL", "__version__", "docs_url"]
