"""Where a stage or a key lives in the configuration text, so findings and the dashboard
can point at the line to edit (``pyproject.toml:63``) instead of just naming the key."""

from __future__ import annotations

import re

#: one key of a dotted TOML key: bare, "basic" or 'literal'
_PART = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")
_HEADER = re.compile(r"^\s*(\[\[?)(.*?)\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
                     r"""(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'))*)\s*=""")


def _dotted(text: str) -> list[str] | None:
    """``a."b.c".d`` -> ``["a", "b.c", "d"]``; None when it is not a dotted key."""
    parts: list[str] = []
    pos = 0
    while True:
        m = _PART.match(text, pos)
        if m is None or m.end() == pos:
            return None
        parts.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
        if pos == len(text):
            return parts
        if text[pos] != ".":
            return None
        pos += 1


def key_line(text: str, path: list[str]) -> int:
    """The line that sets the key at ``path`` (e.g. ``["tool", "testfleet", "stages", "a",
    "run_on"]``), or of the nearest table above it when the key itself is not on a line of
    its own (an inline table, an array); 0 if not found. A number in ``path`` after an
    array of tables (``[[implicit]]``) picks that occurrence."""
    best = (0, 0)  # (how much of the path matched, line)
    table: list[str] = []
    seen: dict[tuple[str, ...], int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            name = _dotted(header.group(2))
            if name is None:
                continue
            if header.group(1) == "[[":
                index = seen.get(tuple(name), -1) + 1
                seen[tuple(name)] = index
                table = [*name, str(index)]
            else:
                table = name
            matched = _prefix(table, path)
            if matched == len(table) and matched > best[0]:
                best = (matched, lineno)
            continue
        assign = _ASSIGN.match(line)
        if assign:
            key = _dotted(assign.group(1))
            if key is None:
                continue
            full = [*table, *key]
            matched = _prefix(full, path)
            if matched == len(full) and matched > best[0]:
                best = (matched, lineno)
    return best[1]


def _prefix(have: list[str], want: list[str]) -> int:
    """How many leading parts ``have`` and ``want`` share."""
    n = 0
    for a, b in zip(have, want, strict=False):
        if a != b:
            break
        n += 1
    return n


def config_line(text: str, stage: str, key: str | None = None) -> int:
    """The line of ``[...stages.<stage>]`` (or of ``key`` inside it) in the config text; 0 if not found."""
    if not text:
        return 0
    name = re.escape(stage)
    header = re.compile(
        r"^\s*\[\s*(?:tool\s*\.\s*testfleet\s*\.\s*)?stages\s*\.\s*(?:" + name + r'|"' + name + r'"|\'' + name + r"')\s*\]")
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if header.match(line):
            if key is None:
                return i + 1
            key_re = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
            for j in range(i + 1, len(lines)):
                if lines[j].lstrip().startswith("["):
                    break
                if key_re.match(lines[j]):
                    return j + 1
            return i + 1
    return 0
