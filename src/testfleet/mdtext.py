"""Untrusted text (file names, reasons, labels) inside the Markdown testfleet writes for
a plan summary, a run summary or a Buildkite annotation.

One line, every character Markdown gives meaning to escaped: a hostile file name can
neither break a table row nor become a link, an image or a mention. (The report has its
own, richer escaper with length limits and HTML entities: report/render_markdown.py.)
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#+!|~@$])")


def md(text: object) -> str:
    """Escape untrusted text for a Markdown table cell or list item (one line)."""
    flat = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", flat)
