"""The desktop window (PySide6 + pyqtgraph). Never imports torch: jobs run in child processes."""

# Page contract: every page is ``gui/<name>_page.py`` with ``class <Name>Page(QWidget)``,
# ``__init__(self, model: AppModel, parent=None)`` and class attributes ``title`` (str)
# and ``icon_name`` (a name under resources/icons/). The main window lists them.
