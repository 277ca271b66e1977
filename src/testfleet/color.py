"""Whether output is coloured: the one decision every command and renderer asks.

The rules are the ecosystem's (no-color.org, force-color.org), in this order:

1. ``NO_COLOR`` set and not empty: never colour.
2. ``FORCE_COLOR`` set and not empty: colour, also when the output is piped or a file
   (a CI log that renders ANSI, ``testfleet ... | less -R``).
3. Otherwise colour on a terminal, not when piped (and not on ``TERM=dumb``).

Output that ``-o/--output FILE`` sends to a file is never coloured (as ``ruff -o``): a
file is read by tools and editors, whatever the environment says about terminals.

Terminal-like layout (a rich table rather than plain columns) follows the same test
without rule 1: ``NO_COLOR`` takes the colour away, not the layout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

#: Width of a table written to a pipe or file, where no terminal says how wide to be.
PIPE_WIDTH = 200


_off = False


@contextmanager
def off() -> Iterator[None]:
    """No colour while output goes to a file (``-o``)."""
    global _off
    saved, _off = _off, True
    try:
        yield
    finally:
        _off = saved


def _env(name: str) -> bool:
    return os.environ.get(name, "") != ""


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def forced() -> bool:
    """``FORCE_COLOR`` asks for colour whatever the stream is (and ``NO_COLOR`` does not veto it)."""
    return _env("FORCE_COLOR") and not _env("NO_COLOR") and not _off


def terminal(stream: IO[str] | None = None) -> bool:
    """Output to ``stream`` (default stdout) is laid out for a terminal: it is one, or
    ``FORCE_COLOR`` says to behave as if."""
    stream = sys.stdout if stream is None else stream
    return (_env("FORCE_COLOR") and not _off) or _isatty(stream)


def wanted(stream: IO[str] | None = None) -> bool:
    """Colour for ``stream`` (default stdout), by the three rules above."""
    stream = sys.stdout if stream is None else stream
    if _env("NO_COLOR") or _off:
        return False
    if _env("FORCE_COLOR"):
        return True
    return _isatty(stream) and os.environ.get("TERM") != "dumb"


def console(*, stderr: bool = False, width: int | None = None, pipe_width: int = PIPE_WIDTH,
            **options: Any) -> Any:
    """A rich ``Console`` for a command's human output (stdout, or stderr), by the rules
    above: rich would otherwise decide alone, and squeeze a forced-colour table piped to a
    file into 80 columns. ``width``: a fixed width; default the terminal's, or
    ``pipe_width`` when the stream is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if width is None and not _isatty(stream):
        width = pipe_width
    return Console(stderr=stderr, force_terminal=terminal(stream), no_color=not wanted(stream),
                   width=width, **options)
