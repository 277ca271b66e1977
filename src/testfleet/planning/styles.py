"""Read the files of ``command = "auto"`` stages to tell script-style from pytest-style.

The only file reading planning does, kept apart so that :func:`make_plan` stays a
function of values when the caller passes the styles in. Files are parsed, never
imported or executed (see :func:`testfleet.commands.file_style`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from testfleet.commands import Style, file_style
from testfleet.fileio import read_capped

MAX_SOURCE_BYTES = 8 << 20


def read_styles(root: Path, files: Iterable[str]) -> dict[str, Style | None]:
    """File -> its style; None when it cannot be read or parsed (``check`` reports why;
    the planner then falls back to pytest, whose "collected nothing" is a loud failure)."""
    out: dict[str, Style | None] = {}
    for rel in files:
        try:
            out[rel] = file_style(read_capped(root / rel, MAX_SOURCE_BYTES))
        except (OSError, ValueError):
            out[rel] = None
    return out
