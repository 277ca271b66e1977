"""Make captured test output safe for XML and Markdown: no ANSI, no illegal characters."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    """Strip terminal escapes and characters XML 1.0 cannot hold (NUL, most C0 controls)."""
    return _XML_ILLEGAL.sub("\ufffd", _ANSI.sub("", text.replace("\r\n", "\n")))


def last_lines(text: str, n: int) -> str:
    lines = text.rstrip("\n").split("\n")
    return "\n".join(lines[-n:])
