"""Find marker calls in one file's source without parsing the whole file.

A full ``ast.parse`` costs about a millisecond for a 200-line test file, which is
ten seconds on a 10,000-file tree. Registrations are tiny, literal, top-level
statements, so this module:

1. skips a file in C speed when none of the marker names occurs in its bytes;
2. finds every occurrence of a marker name and, with one regular-expression pass
   over strings, comments and brackets up to the last occurrence, learns whether
   each occurrence is code (not inside a string or comment) and its bracket depth;
3. extracts each top-level call's statement text (balanced parentheses, string
   aware) and ``ast.parse``-s only that text;
4. classifies every other occurrence (call in an indented block, attribute call,
   aliased import, use inside a larger expression, plain mention) so that the
   validator can say why a marker that is named was not read.

Everything here is pure: bytes in, :class:`FileScan` out. Full-file syntax
validation is :mod:`testfleet.registry.syntax`'s job (``check`` only).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

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
_TOKEN = re.compile(_STRING + r"|#[^\n]*|[()\[\]{}]", re.DOTALL | re.MULTILINE)
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


def scan_source(data: bytes, pattern: re.Pattern[str], needles: tuple[bytes, ...]) -> FileScan:
    """Scan one file's bytes for marker calls (see the module docstring)."""
    result = FileScan()
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
    for (start, end, name), (masked, depth) in zip(occurrences, _contexts(text, occurrences), strict=True):
        if masked:
            continue
        _classify(text, start, end, name, depth, result)
    return result


def suppressions(text: str) -> dict[int, tuple[str, ...]]:
    """Line -> codes of each ``# testfleet: ignore[...]`` comment (a bare ``ignore``: no codes)."""
    out: dict[int, tuple[str, ...]] = {}
    for m in _SUPPRESS.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        codes = tuple(c.strip() for c in (m.group(1) or "").split(",") if c.strip())
        out[line] = out.get(line, ()) + codes
    return out


def _in_function(text: str, line_start: int) -> bool:
    """Is the statement on this line inside a ``def`` (walking out through less-indented
    headers up to module level)? A marker used in a unit test of the marker itself."""
    eol = text.find("\n", line_start)
    raw = text[line_start:eol if eol >= 0 else len(text)]
    indent = len(raw.expandtabs()) - len(raw.expandtabs().lstrip())
    pos = line_start - 1
    while indent > 0 and pos > 0:
        prev_start = text.rfind("\n", 0, pos) + 1
        prev = text[prev_start:pos].expandtabs()
        stripped = prev.strip()
        if stripped and not stripped.startswith("#"):
            width = len(prev) - len(prev.lstrip())
            if width < indent:
                if _FUNC_HEADER.match(stripped):
                    return True
                indent = width
        pos = prev_start - 1
    return False


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _contexts(text: str, occurrences: list[tuple[int, int, str]]) -> list[tuple[bool, int]]:
    """For each occurrence: is it inside a string or comment, and at what bracket depth."""
    out: list[tuple[bool, int]] = []
    n = len(occurrences)
    i = 0
    depth = 0
    limit = occurrences[-1][1]
    for m in _TOKEN.finditer(text, 0, limit):
        start = m.start()
        while i < n and occurrences[i][0] < start:
            out.append((False, depth))
            i += 1
        ch = text[start]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = depth - 1 if depth else 0
        else:
            stop = m.end()
            while i < n and occurrences[i][0] < stop:
                out.append((True, depth))
                i += 1
        if i == n:
            break
    while i < n:
        out.append((False, depth))
        i += 1
    return out


def _classify(text: str, start: int, end: int, name: str, depth: int, result: FileScan) -> None:
    before = len(result.others)
    _classify_one(text, start, end, name, depth, result)
    if len(result.others) > before:
        occ = result.others[-1]
        line_start = text.rfind("\n", 0, start) + 1
        if occ.kind != MENTION and _in_function(text, line_start):
            result.others[-1] = Occurrence(occ.name, occ.line, occ.col, occ.kind, occ.detail, True)


def _classify_one(text: str, start: int, end: int, name: str, depth: int, result: FileScan) -> None:
    line_start = text.rfind("\n", 0, start) + 1
    line = text.count("\n", 0, start) + 1
    col = start - line_start + 1
    prefix = text[line_start:start]
    after = end
    while after < len(text) and text[after] in " \t":
        after += 1
    is_call = text.startswith("(", after)
    if prefix.rstrip().endswith("."):
        obj = re.search(r"([\w.]+)\.\s*$", prefix)
        shown = f"{obj.group(1)}.{name}" if obj else f"....{name}"
        kind = ATTRIBUTE_CALL if is_call else MENTION
        result.others.append(Occurrence(name, line, col, kind, shown))
        return
    if _DEF.search(prefix):
        # ``def register_cpu_ci(...)``: a local fallback definition, not a use.
        result.others.append(Occurrence(name, line, col, MENTION))
        return
    continued = is_call and depth == 0 and not prefix.strip() and _continues_previous_line(text, line_start)
    if is_call and depth == 0 and not prefix and not continued:
        _top_level_call(text, start, after, name, line, result)
        return
    if is_call and depth == 0 and not prefix.strip() and not continued:
        header = _enclosing_header(text, line_start, len(prefix.expandtabs()))
        result.others.append(Occurrence(name, line, col, INDENTED_CALL, header))
        return
    if is_call:
        nl = text.find("\n", start)
        snippet = text[line_start:nl if nl >= 0 else len(text)]
        if not snippet[:col - 1].strip():  # the statement began on an earlier line ("x = \\")
            prev = text.rfind("\n", 0, max(line_start - 1, 0)) + 1
            snippet = text[prev:line_start - 1].strip() + " " + snippet.strip()
        result.others.append(Occurrence(name, line, col, EMBEDDED_CALL, snippet.strip()[:80]))
        return
    alias = _ALIAS.match(text, end)
    if alias and alias.group(1) != name:
        result.others.append(Occurrence(name, line, col, ALIASED_IMPORT, alias.group(1)))
        return
    result.others.append(Occurrence(name, line, col, MENTION))


def _continues_previous_line(text: str, line_start: int) -> bool:
    """Does the line before end in a backslash continuation (and not inside a comment)?"""
    if line_start < 2 or text[line_start - 2] != "\\":
        return False
    prev = text[text.rfind("\n", 0, line_start - 1) + 1:line_start - 1]
    return "#" not in prev


def _top_level_call(text: str, start: int, paren: int, name: str, line: int, result: FileScan) -> None:
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


def _enclosing_header(text: str, line_start: int, indent: int) -> str:
    """The nearest less-indented line above (``def f():``, ``if x:``), for the message."""
    pos = line_start - 1
    while pos > 0:
        prev_start = text.rfind("\n", 0, pos) + 1
        raw = text[prev_start:pos]
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            width = len(raw.expandtabs()) - len(raw.expandtabs().lstrip())
            if width < indent:
                line = text.count("\n", 0, prev_start) + 1
                return f"`{stripped[:60]}` (line {line})"
        pos = prev_start - 1
    return "an indented block"


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
