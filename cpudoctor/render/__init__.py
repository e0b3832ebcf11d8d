"""Rendering a Report as text, Markdown, HTML or PDF. No Qt except in the PDF path."""
