"""The desktop window (PySide6 + pyqtgraph). Never imports torch: jobs run in child processes."""
