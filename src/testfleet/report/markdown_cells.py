"""Markdown cells for the report: every value from the tree escaped (HTML neutral, pipes
cannot split a row, emphasis and links cannot be injected, ``@mentions`` ping nobody,
long values cut). Shared by the report's sections, so each renders the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_CELL = 300
_SPECIAL = "\\`*_{}[]()!~|>"


def md(text: object, limit: int = MAX_CELL) -> str:
    """Escape one inline value for a Markdown table cell or paragraph."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = []
    for ch in s:
        if ch in _SPECIAL and ch != ">":
            out.append("\\" + ch)
        else:
            out.append(ch)
    # A zero-width space after '@' keeps the text readable and mentions nobody.
    return "".join(out).replace("@", "@\u200b")


def code(text: object, limit: int = MAX_CELL) -> str:
    """A value as inline code; backticks and pipes inside cannot close it or split a row."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    # A table row is split at every pipe not escaped by a backslash, and ``\\`` pairs up
    # first; inside a code span a backslash cannot be escaped, so it is shown as a
    # look-alike (U+29F5) and every pipe gets its own backslash.
    s = (s.replace("\\", "\u29f5").replace("`", "\u02cb").replace("|", "\\|")
         .replace("<", "&lt;").replace(">", "&gt;"))
    return f"`{s}`"


def link(label: str, url: str) -> str:
    """``[label](url)`` for a URL testfleet built (a CI run's): the label escaped, and the
    characters that would end the link's target early percent-encoded."""
    target = (url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
              .replace("<", "%3C").replace(">", "%3E"))
    return f"[{md(label)}]({target})"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    aligns = [("---:" if a == "r" else "---") for a in (align or "l" * len(header)).ljust(len(header), "l")]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines
