"""Find marker calls in one file's source without parsing the whole file.

A full ``ast.parse`` costs about a millisecond for a 200-line test file, which is
ten seconds on a 10,000-file tree. Registrations are tiny, literal, top-level
statements, so this module:

1. skips a file in C speed when none of the marker names occurs in its bytes;
2. finds every occurrence of a marker name and, with one regular-expression split
   at strings and comments up to the last occurrence, learns whether each
   occurrence is code (not inside a string or comment) and its bracket depth;
3. extracts each top-level call's statement text (balanced parentheses, string
   aware) and ``ast.parse``-s only that text;
4. classifies every other occurrence (call in an indented block, attribute call,
   aliased import, use inside a larger expression, plain mention) so that the
   validator can say why a marker that is named was not read.

Everything here is pure: bytes in, :class:`FileScan` out. Full-file syntax
validation is :mod:`testfleet.registry.syntax`'s job (``check`` only); what makes a
whole file unreadable to Python before any syntax (a NUL byte, an encoding cookie it
cannot honour) is found here, at C speed, so that ``list``, ``plan`` and ``check``
agree that such a file's registrations are invalid (#36).
"""

from __future__ import annotations

import ast
import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

# Strings (terminated, then unterminated up to the end of the scanned window),
# comments and brackets. Quote prefixes (r, b, f, u) do not change where a
# string ends for tokenizing purposes, so they are not matched.
# Each string body is an "unrolled loop" (``plain* (special plain*)*``): every
# character can be matched in only one way, so a failed match backtracks in
# linear time and matches exactly what possessive quantifiers would (those need
# Python 3.11; 3.10 is supported).
_STRING = (
    r"'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)"
    r'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\Z)'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*(?:'|$)"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|$)'
)
_SPLIT = re.compile("(" + _STRING + r"|#[^\n]*)", re.DOTALL | re.MULTILINE)
_BRACKETS = re.compile(r"[()\[\]{}]")
_STRING_RE = re.compile(_STRING, re.DOTALL | re.MULTILINE)
_BALANCE = re.compile(r"""[()\[\]{}#'"]""")
_DEF = re.compile(r"(?:^|[\s;:])(?:async[ \t]+)?def[ \t]+$")
_ALIAS = re.compile(r"[ \t]+as[ \t]+([A-Za-z_]\w*)")
_MAIN = re.compile(
    r"""^if[ \t(]+(?:__name__[ \t]*==[ \t]*(['"])__main__\1|(['"])__main__\2[ \t]*==[ \t]*__name__)""",
    re.MULTILINE,
)
_NEXT_TOP = re.compile(r"^[^\s#]", re.MULTILINE)
_CALLISH = re.compile(r"[\w)\]]\s*\(")
# ``# testfleet: ignore[code, code]`` (#12 suppressions); group 1 is None for a bare ``ignore``.
_SUPPRESS = re.compile(r"#[ \t]*testfleet:[ \t]*ignore(?:\[([^\]\n]*)\])?")
_FUNC_HEADER = re.compile(r"(?:async[ \t]+)?def[ \t]")

# Occurrence kinds that are not a top-level call (the validator explains each).
INDENTED_CALL = "indented-call"
ATTRIBUTE_CALL = "attribute-call"
ALIASED_IMPORT = "aliased-import"
EMBEDDED_CALL = "embedded-call"
MENTION = "mention"


@dataclass(frozen=True)
class MarkerCall:
    """A top-level ``name(...)`` statement; ``node`` has its real line numbers."""

    name: str
    line: int
    col: int
    node: ast.Call
    source: str

    def segment(self, node: ast.AST) -> str:
        """The source text of an argument node, for error messages and gate caching."""
        return _segment(self.source, node, self.line)


@dataclass(frozen=True)
class Occurrence:
    """A marker name in code that is not a top-level call."""

    name: str
    line: int
    col: int
    kind: str
    detail: str = ""
    in_function: bool = False


@dataclass
class FileScan:
    """What one file says about markers; errors are values, never exceptions."""

    calls: list[MarkerCall] = field(default_factory=list)
    others: list[Occurrence] = field(default_factory=list)
    syntax_errors: list[tuple[int, int, str]] = field(default_factory=list)
    has_main_call: bool = False
    decode_error: str | None = None
    # (line, col, code, message): why Python cannot read this file at all (see unreadable)
    unreadable: tuple[int, int, str, str] | None = None
    # line -> codes named by a ``# testfleet: ignore[...]`` comment there (empty: no codes given)
    suppressions: dict[int, tuple[str, ...]] = field(default_factory=dict)


def marker_pattern(names: frozenset[str] | set[str]) -> re.Pattern[str]:
    """A regex matching any marker name (callers reject a word character just before).

    It starts with the names' common literal prefix (``register_``) so that the
    regex engine can skip through text at C speed; a lookbehind would defeat that.
    """
    prefix = os.path.commonprefix(sorted(names))  # noqa: RUF071 - character prefix wanted
    rest = sorted((re.escape(n[len(prefix):]) for n in names), key=len, reverse=True)
    return re.compile(rf"{re.escape(prefix)}(?:{'|'.join(rest)})(?!\w)")


def may_hold_marker(data: bytes, needles: tuple[bytes, ...]) -> bool:
    """The C-speed pre-filter: can these bytes contain any marker name at all?"""
    if len(needles) == 1:
        return needles[0] in data
    return any(n in data for n in needles)


def needles_for(names: frozenset[str] | set[str]) -> tuple[bytes, ...]:
    """The shortest byte strings whose absence proves no marker name occurs."""
    if all(n.startswith("register_") for n in names):
        return (b"register_",)
    return tuple(sorted({n.encode() for n in names}))


def decode(data: bytes) -> tuple[str | None, str | None]:
    """UTF-8 text with universal newlines, or an error message saying where it broke."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return None, f"line {line}: byte 0x{data[exc.start]:02x} at offset {exc.start} is not valid UTF-8"
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, None


def unreadable(data: bytes) -> tuple[int, int, str, str] | None:
    """(line, col, code, message) when Python could not even tokenize this file, else None.

    Two things make a file that decodes as UTF-8 unrunnable whatever its syntax: a NUL
    byte, and an encoding cookie in its first two lines that names no codec, clashes
    with a UTF-8 byte order mark, or does not decode the file. Both are checked at C
    speed (a byte search; the cookie only when ``coding`` occurs in those lines), so
    every command can afford them; the rules are Python's own
    (:func:`tokenize.detect_encoding`)."""
    nul = data.find(b"\0")
    if nul >= 0:
        line_start = data.rfind(b"\n", 0, nul) + 1
        return (data.count(b"\n", 0, nul) + 1, nul - line_start + 1, "syntax",
                "Python cannot run this file: source code cannot contain null bytes "
                "(a NUL byte here)")
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    head = data if second < 0 else data[:second + 1]
    if b"coding" not in head:
        return None
    import io
    import tokenize

    try:
        encoding, _lines = tokenize.detect_encoding(io.BytesIO(head).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        line = 2 if first >= 0 and _COOKIE.match(data[first + 1:second + 1 or None]) else 1
        return (line, 1, "encoding", "Python cannot run this file: its encoding cookie: "
                f"{getattr(exc, 'msg', None) or exc}")
    return None


#: Python's encoding cookie (PEP 263), as :mod:`tokenize` matches it.
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


def scan_source(data: bytes, pattern: re.Pattern[str], needles: tuple[bytes, ...]) -> FileScan:
    """Scan one file's bytes for marker calls (see the module docstring)."""
    result = FileScan()
    result.unreadable = unreadable(data)
    has_marker = may_hold_marker(data, needles)
    has_main = b"__main__" in data
    has_suppression = b"testfleet:" in data
    if not has_marker and not has_main and not has_suppression and data.isascii():
        return result
    text, error = decode(data)
    if text is None:
        result.decode_error = error
        return result
    if has_suppression:
        result.suppressions = suppressions(text)
    if has_main:
        result.has_main_call = _main_calls_something(text)
    if not has_marker:
        return result
    occurrences = [
        (m.start(), m.end(), m.group()) for m in pattern.finditer(text)
        if not m.start() or not _is_word(text[m.start() - 1])
    ]
    if not occurrences:
        return result
    cursor = _Cursor(text)
    masks = _Masks(text, occurrences[-1][1])
    for start, end, name in occurrences:
        if not masks.masked(start):
            _classify(cursor, start, end, name, masks, result)
    return result


def suppressions(text: str) -> dict[int, tuple[str, ...]]:
    """Line -> codes of each ``# testfleet: ignore[...]`` comment (a bare ``ignore``: no codes)."""
    out: dict[int, tuple[str, ...]] = {}
    line, pos = 1, 0
    for m in _SUPPRESS.finditer(text):
        line += text.count("\n", pos, m.start())  # counted forward: linear in the file
        pos = m.start()
        codes = tuple(c.strip() for c in (m.group(1) or "").split(",") if c.strip())
        out[line] = out.get(line, ()) + codes
    return out


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class _Masks:
    """Where the strings and comments are, up to the last occurrence, split at C speed.

    ``re.split`` with one capturing group alternates code (even pieces) and string
    or comment tokens (odd pieces) without a Python step per token; real test files
    hold hundreds of strings before their last marker mention (docstrings name the
    markers), and a loop over tokens was most of a cold scan. Bracket depth is
    counted only for occurrences in code, forward, one code piece at a time.
    """

    def __init__(self, text: str, limit: int) -> None:
        self.pieces = _SPLIT.split(text[:limit])
        self.ends = list(accumulate(map(len, self.pieces)))
        # Bracket depth is counted up to (piece _k, offset _off in it), never twice:
        # a file can hold any number of occurrences in one long stretch of code.
        self._k = 0
        self._off = 0
        self._depth = 0

    def masked(self, pos: int) -> bool:
        """Is ``pos`` inside a string or comment?"""
        return bisect_right(self.ends, pos) % 2 == 1

    def in_comment(self, pos: int) -> bool:
        k = bisect_right(self.ends, pos)
        return k % 2 == 1 and k < len(self.pieces) and self.pieces[k].startswith("#")

    def depth(self, pos: int) -> int:
        """Bracket depth at a code position; positions must not decrease."""
        k = bisect_right(self.ends, pos)
        while self._k < k:
            code = self.pieces[self._k]
            self._depth = _bracket_depth(code, self._depth, self._off, len(code))
            self._k += 2
            self._off = 0
        off = pos - (self.ends[k - 1] if k else 0)
        if off > self._off:
            self._depth = _bracket_depth(self.pieces[k], self._depth, self._off, off)
            self._off = off
        return self._depth


def _bracket_depth(code: str, depth: int, start: int, end: int) -> int:
    """Depth after ``code[start:end]``; a closer at depth 0 is ignored, as the walk did."""
    closers = code.count(")", start, end) + code.count("]", start, end) + code.count("}", start, end)
    if closers <= depth:  # can never reach below zero: count instead of walking
        opened = code.count("(", start, end) + code.count("[", start, end) + code.count("{", start, end)
        return depth + opened - closers
    for m in _BRACKETS.finditer(code, start, end):
        if m.group() in "([{":
            depth += 1
        elif depth:
            depth -= 1
    return depth


# How far back from an occurrence the per-line checks look: enough for any real
# prefix (``obj.attr.``, ``async def``), and what keeps a file of 100,000 mentions on
# one line linear.
_WINDOW = 256
_BLANK = re.compile(r"[ \t]*")


class _Cursor:
    """Line numbers, line starts and enclosing headers for increasing offsets.

    A file can hold any number of marker mentions (a PR controls it); counting
    newlines from the top, or walking back to the enclosing ``def`` for every
    occurrence, would make the scan quadratic. The cursor only moves forward.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.line_start = 0
        # headers: lines not yet folded into the indentation stack start at head_pos
        self.head_pos = 0
        self.head_line = 1
        self.stack: list[tuple[int, int, str]] = []  # (indent width, line, stripped text[:60])

    def locate(self, offset: int) -> tuple[int, int]:
        """(1-based line, offset of that line's start) of ``offset``."""
        if offset < self.pos:  # never happens in order; stay correct anyway
            self.pos, self.line, self.line_start = 0, 1, 0
        text = self.text
        newlines = text.count("\n", self.pos, offset)
        if newlines:
            self.line += newlines
            self.line_start = text.rfind("\n", self.pos, offset) + 1
        self.pos = offset
        return self.line, self.line_start

    def enclosing_header(self, line_start: int, indent: int) -> str:
        """The nearest less-indented line above (``def f():``, ``if x:``), for the message.

        Lines are folded once into a stack of strictly increasing indentation: a
        line pops every entry at least as indented, so the nearest line above with a
        smaller indentation is always the topmost such entry.
        """
        self._fold(line_start)
        for width, line, shown in reversed(self.stack):
            if width < indent:
                return f"`{shown}` (line {line})"
        return "an indented block"

    def in_function(self, line_start: int) -> bool:
        """Is the statement on this line inside a ``def``, walking out through the
        less-indented headers to module level? (A marker used in a unit test of itself.)"""
        first = _BLANK.match(self.text, line_start).end()  # type: ignore[union-attr]
        indent = len(self.text[line_start:first].expandtabs())
        if not indent:
            return False
        self._fold(line_start)
        return any(width < indent and _FUNC_HEADER.match(shown) for width, _line, shown in self.stack)

    def _fold(self, line_start: int) -> None:
        """Fold the lines before ``line_start`` into the indentation stack (once each)."""
        if line_start < self.head_pos:
            self.head_pos, self.head_line, self.stack = 0, 1, []
        text = self.text
        while self.head_pos < line_start:
            eol = text.find("\n", self.head_pos, line_start)
            if eol < 0:
                eol = line_start
            raw = text[self.head_pos:eol]
            stripped = raw.strip()
            if stripped and not stripped.startswith("#"):
                expanded = raw.expandtabs()
                width = len(expanded) - len(expanded.lstrip())
                while self.stack and self.stack[-1][0] >= width:
                    self.stack.pop()
                self.stack.append((width, self.head_line, stripped[:60]))
            self.head_pos = eol + 1
            self.head_line += 1


def _classify(cursor: _Cursor, start: int, end: int, name: str, masks: _Masks, result: FileScan) -> None:
    before = len(result.others)
    _classify_one(cursor, start, end, name, masks.depth(start), masks, result)
    if len(result.others) > before:
        occ = result.others[-1]
        if occ.kind != MENTION and cursor.in_function(cursor.locate(start)[1]):
            result.others[-1] = Occurrence(occ.name, occ.line, occ.col, occ.kind, occ.detail, True)


def _classify_one(cursor: _Cursor, start: int, end: int, name: str, depth: int, masks: _Masks,
                  result: FileScan) -> None:
    """What one code occurrence is; every look-around is bounded (see :class:`_Cursor`)."""
    text = cursor.text
    line, line_start = cursor.locate(start)
    col = start - line_start + 1
    blank = _BLANK.match(text, line_start, start).end() == start  # type: ignore[union-attr]
    tail = text[max(line_start, start - _WINDOW):start]
    after = end
    while after < len(text) and text[after] in " \t":
        after += 1
    is_call = text.startswith("(", after)
    trimmed = tail.rstrip()
    if trimmed.endswith("."):
        obj = _object_before(trimmed)
        shown = f"{obj}.{name}" if obj else f"....{name}"
        kind = ATTRIBUTE_CALL if is_call else MENTION
        result.others.append(Occurrence(name, line, col, kind, shown))
        return
    if _DEF.search(tail if start - line_start <= _WINDOW else "x" + tail):
        # ``def register_cpu_ci(...)``: a local fallback definition, not a use.
        result.others.append(Occurrence(name, line, col, MENTION))
        return
    continued = (is_call and depth == 0 and blank
                 and _continues_previous_line(text, line_start, masks))
    if is_call and depth == 0 and start == line_start and not continued:
        _top_level_call(text, start, after, name, line, result)
        return
    if is_call and depth == 0 and blank and not continued:
        header = cursor.enclosing_header(line_start, len(text[line_start:start].expandtabs()))
        result.others.append(Occurrence(name, line, col, INDENTED_CALL, header))
        return
    if is_call:
        snippet = _line_text(text, line_start)
        if blank:  # the statement began on an earlier line ("x = \\")
            prev = text.rfind("\n", max(0, line_start - 1 - _WINDOW), max(line_start - 1, 0)) + 1
            snippet = text[prev:line_start - 1].strip() + " " + snippet
        result.others.append(Occurrence(name, line, col, EMBEDDED_CALL, snippet.strip()[:80]))
        return
    alias = _ALIAS.match(text, end)
    if alias and alias.group(1) != name:
        result.others.append(Occurrence(name, line, col, ALIASED_IMPORT, alias.group(1)))
        return
    result.others.append(Occurrence(name, line, col, MENTION))


def _continues_previous_line(text: str, line_start: int, masks: _Masks) -> bool:
    """Does the line before end in a backslash continuation (one not inside a comment)?

    A ``#`` inside a string (``x = "#" \\``) is not a comment, so the question goes to
    the tokens, not to the line's text.
    """
    if line_start < 2 or text[line_start - 2] != "\\":
        return False
    return not masks.in_comment(line_start - 2)


def _object_before(trimmed: str) -> str:
    """``a.b`` in ``x = a.b.`` (the dotted name before a trailing dot), walking back."""
    end = len(trimmed) - 1
    i = end
    while i > 0 and (trimmed[i - 1].isalnum() or trimmed[i - 1] in "._"):
        i -= 1
    return trimmed[i:end]


def _line_text(text: str, line_start: int) -> str:
    """The start of a line, stripped, for a message (bounded: lines can be huge)."""
    first = _BLANK.match(text, line_start).end()  # type: ignore[union-attr]
    eol = text.find("\n", first, first + _WINDOW)
    return text[first:eol if eol >= 0 else min(len(text), first + _WINDOW)].strip()


def _top_level_call(text: str, start: int, paren: int, name: str, line: int, result: FileScan) -> None:
    eol = text.find("\n", paren)
    if eol < 0:
        eol = len(text)
    source = text[start:eol]
    if source.count("(") == source.count(")"):  # else it surely continues: skip the attempt
        try:
            # Most calls are one line: when the line alone parses, the call closed on it (an
            # unclosed '(' never parses), so the bracket walk below is not needed.
            tree = ast.parse("\n" * (line - 1) + source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
        else:
            _take(tree, name, line, source, result)
            return
    close = _balanced_end(text, paren)
    if close < 0:
        result.syntax_errors.append((line, 1, f"'(' of this {name}(...) call is never closed"))
        return
    eol = text.find("\n", close)
    if eol < 0:
        eol = len(text)
    source = text[start:eol]
    try:
        # Leading newlines give every node its real line number at no real cost.
        tree = ast.parse("\n" * (line - 1) + source)
    except SyntaxError as exc:
        err_line = exc.lineno or line
        msg = exc.msg or "invalid syntax"
        result.syntax_errors.append((err_line, exc.offset or 1, f"invalid syntax in {name}(...): {msg}"))
        return
    except (ValueError, RecursionError, MemoryError) as exc:
        # Pathological input (absurd nesting, NUL bytes on older Pythons) is an error, not a crash.
        why = type(exc).__name__
        result.syntax_errors.append((line, 1, f"{name}(...) cannot be parsed ({why}): simplify the call"))
        return
    _take(tree, name, line, source, result)


def _take(tree: ast.Module, name: str, line: int, source: str, result: FileScan) -> None:
    """The parsed statement is the marker call, or a larger expression that uses it."""
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Call)
        and isinstance(first.value.func, ast.Name)
        and first.value.func.id == name
    ):
        result.calls.append(MarkerCall(name, line, 1, first.value, source))
        return
    snippet = source.split("\n", 1)[0].strip()[:80]
    result.others.append(Occurrence(name, line, 1, EMBEDDED_CALL, snippet))


def _balanced_end(text: str, paren: int) -> int:
    """Index just past the ')' that closes the '(' at ``paren``; -1 if never closed."""
    depth = 0
    pos = paren
    while True:
        m = _BALANCE.search(text, pos)
        if m is None:
            return -1
        ch = m.group()
        pos = m.end()
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return pos
        elif ch == "#":
            nl = text.find("\n", pos)
            if nl < 0:
                return -1
            pos = nl
        else:
            s = _STRING_RE.match(text, m.start())
            if s is None:
                return -1
            pos = s.end()


def _main_calls_something(text: str) -> bool:
    """True when an ``if __name__ == "__main__":`` block at module level calls anything.

    A regex over the block (comment lines dropped) rather than a parse: the
    question is only whether anything there looks like a call.
    """
    for m in _MAIN.finditer(text):
        colon = text.find(":", m.end())
        if colon < 0:
            continue
        eol = text.find("\n", colon)
        nxt = _NEXT_TOP.search(text, eol + 1) if eol >= 0 else None
        block = text[colon + 1: nxt.start() if nxt else len(text)]
        code = "\n".join(ln for ln in block.split("\n") if not ln.lstrip().startswith("#"))
        if _CALLISH.search(code):
            return True
    return False


def _segment(source: str, node: ast.AST, first_line: int) -> str:
    lines = source.split("\n")
    lineno: int = getattr(node, "lineno", first_line)
    end_lineno: int | None = getattr(node, "end_lineno", None)
    start = lineno - first_line
    end = (end_lineno or lineno) - first_line
    col = getattr(node, "col_offset", 0)
    end_col = getattr(node, "end_col_offset", None)
    if not 0 <= start < len(lines) or not 0 <= end < len(lines):
        return "?"
    chunk = [ln.encode() for ln in lines[start: end + 1]]
    if len(chunk) == 1:
        return chunk[0][col:end_col].decode(errors="replace")
    chunk[0] = chunk[0][col:]
    if end_col is not None:
        chunk[-1] = chunk[-1][:end_col]
    return b"\n".join(chunk).decode(errors="replace")
