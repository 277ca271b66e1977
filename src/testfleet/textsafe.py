"""Untrusted text on one line: the rule for every name testfleet prints.

A test file's name, a registration's arguments and a test's messages come from the
pull request. Printed raw, a newline in one of them starts a new log line, and under
GitHub Actions a line beginning ``::error::`` (or ``::add-mask::``, ``::stop-commands::``)
is a workflow command; under a terminal an escape sequence moves the cursor. So every
such string is either refused where it enters (:func:`line_break`, for discovered file
names) or shown with its control characters spelt out (:func:`printable`).
"""

from __future__ import annotations

import re


def printable(value: str) -> str:
    """``value`` with each non-printable character (newline, ESC, NUL, U+2028, ...) written
    as its Python escape (``\\n``, ``\\x1b``), so the result is one inert line."""
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in value)


def line_break(value: str) -> str | None:
    """The first control character in ``value`` (C0, DEL, C1, or the Unicode line and
    paragraph separators that ``str.splitlines`` and some log viewers break on), or None."""
    found = _LINE_BREAK.search(value)  # every discovered path goes through here: C speed
    return found.group() if found else None


_LINE_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
