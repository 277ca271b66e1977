"""HTML pieces every section of the dashboard shares, so each section wraps and scrolls alike.

A path breaks only after a ``/`` (``<wbr>``; the CSS forbids breaking inside a name), and
a table lives in a scroll container: a narrow window (800 px) scrolls a wide table
sideways instead of clipping its last columns.
"""

from __future__ import annotations

from testfleet.report.svg import esc


def path(text: str) -> str:
    """An escaped path that may break after each '/' and nowhere else."""
    return "/<wbr>".join(esc(part) for part in text.split("/"))


def scroll(table: str) -> str:
    """``table`` (one ``<table>`` element) inside a horizontal scroll container."""
    return f'<div class="tw">{table}</div>'
