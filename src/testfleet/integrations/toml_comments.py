"""Carry a TOML file's comments onto a re-rendered version of it.

``init --from-existing --rederive-config`` replaces the ``[tool.testfleet]`` section
with freshly derived tables. tomlkit keeps everything outside the section, but it files
a comment under the table *above* it, so deleting the section also deletes the
maintainer's comments inside it and the one directly above the next table. This module
puts them back: each comment is anchored to the line it sits directly above (a table
header, a key, an item of a multi-line array) or ends (an inline comment), and is
re-attached to the line with the same anchor in the new text. A comment whose anchor is
gone is returned, so the caller can say so (and keeps it at the top of the section).

Pure text in, text out; the caller checks that the data did not change.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_KEY = re.compile(r"""^\s*([A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')\s*=""")
_ITEM = re.compile(r"""^\s*(?:"|'|-?\d|true\b|false\b|\{|\[)""")

Anchor = tuple[object, ...]


@dataclass(frozen=True)
class _Line:
    text: str
    anchor: Anchor | None  # None: blank, comment or unanchored line
    comment: bool
    inline: str | None  # an inline comment, '#' included


def _header_path(line: str) -> tuple[str, ...] | None:
    """``[a."b c".d]`` -> ("a", "b c", "d"), by letting a TOML parser read the header."""
    try:
        data: object = tomllib.loads(line.strip() + "\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        key, data = next(iter(data.items()))
        path.append(key)
        if isinstance(data, list):
            data = data[0] if data else {}
    return tuple(path) if path else None


def _split_inline(line: str) -> tuple[str, str | None]:
    """The line without its trailing ``# comment``, and the comment (outside strings)."""
    quote: str | None = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip(), line[i:].rstrip()
        i += 1
    return line, None


def _lines(text: str) -> list[_Line]:
    out: list[_Line] = []
    table: tuple[str, ...] = ()
    seen: dict[tuple[str, ...], int] = {}
    index = 0
    key: str | None = None
    depth = 0  # open brackets of a multi-line value
    in_string = False
    for raw in text.split("\n"):
        stripped = raw.strip()
        if in_string or '"""' in raw or "'''" in raw:
            if raw.count('"""') % 2 or raw.count("'''") % 2:
                in_string = not in_string
            out.append(_Line(raw, None, False, None))
            continue
        if not stripped:
            out.append(_Line(raw, None, False, None))
            continue
        if stripped.startswith("#"):
            out.append(_Line(raw, None, True, None))
            continue
        body, inline = _split_inline(raw)
        if depth == 0 and stripped.startswith("["):
            path = _header_path(body)
            if path is not None:
                table, key = path, None
                index = seen.get(path, 0)
                seen[path] = index + 1
                out.append(_Line(raw, ("header", table, index), False, inline))
                continue
        if depth == 0:
            m = _KEY.match(body)
            if m:
                key = m.group(1).strip("\"'")
                depth = max(0, body.count("[") + body.count("{") - body.count("]") - body.count("}"))
                out.append(_Line(raw, ("key", table, index, key), False, inline))
                continue
        if depth > 0 and _ITEM.match(body):
            item = body.strip().rstrip(",").strip()
            depth = max(0, depth + body.count("[") + body.count("{") - body.count("]") - body.count("}"))
            out.append(_Line(raw, ("item", table, index, key, item), False, inline))
            continue
        if depth > 0:
            depth = max(0, depth + body.count("[") + body.count("{") - body.count("]") - body.count("}"))
        out.append(_Line(raw, None, False, inline))
    return out


def carry_comments(old: str, new: str, *, generated: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """``new`` with the comments of ``old`` put back where they were, and the comment
    blocks whose anchor ``new`` no longer has. Comment lines starting with one of
    ``generated`` (the header the tool itself writes) are never carried."""
    old_lines = _lines(old)
    blocks: list[tuple[Anchor, list[str]]] = []
    inline: dict[Anchor, str] = {}
    pending: list[str] = []
    for line in old_lines:
        if line.comment:
            pending.append(line.text.strip())
            continue
        if line.anchor is None:
            if line.text.strip():  # a line with no anchor: its comment cannot be placed
                pending = []
            continue
        kept = [c for c in pending if not c.startswith(generated)]
        if kept:
            blocks.append((line.anchor, kept))
        pending = []
        if line.inline:
            inline[line.anchor] = line.inline
    new_lines = _lines(new)
    where = {line.anchor: i for i, line in reversed(list(enumerate(new_lines))) if line.anchor}
    before: dict[int, list[str]] = {}
    orphans: list[str] = []
    for anchor, comment in blocks:
        i = where.get(anchor)
        if i is None:
            orphans += comment
            continue
        j = i - 1
        while j >= 0 and not new_lines[j].text.strip():
            j -= 1
        above = [new_lines[k].text.strip() for k in range(max(0, j - len(comment) + 1), j + 1)]
        if above != comment:  # tomlkit kept it already where it was
            before.setdefault(i, []).extend(comment)
    out: list[str] = []
    for i, line in enumerate(new_lines):
        indent = re.match(r"\s*", line.text).group(0)  # type: ignore[union-attr]
        out += [indent + c for c in before.get(i, [])]
        text = line.text
        if line.anchor in inline and line.inline is None and line.anchor is not None:
            text = f"{text}  {inline[line.anchor]}"
        out.append(text)
    return "\n".join(out), orphans
