"""Set or clear a registration's ``disabled=`` argument in place, and nothing else.

``testfleet disable`` / ``enable`` edit people's test files. Like ``durations suggest
--write``, an edit touches only the bytes of the literal ``disabled=`` argument
(``None`` <-> a reason string); when a call has no ``disabled=`` yet, ``disable``
inserts ``, disabled="..."`` after its last argument and changes nothing else. Every
edit is verified by re-reading the edited call, and the file is written atomically.

Pure functions over bytes; the commands do the reading and writing.
"""

from __future__ import annotations

import ast
import datetime as dt
import io
import json
import re
import tokenize
from dataclasses import dataclass

BOM = b"\xef\xbb\xbf"
_ISSUE = re.compile(r"^#[1-9][0-9]{0,9}$")
_URL = re.compile(r"^https?://[^\s\"'\\]+$")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class EditError(Exception):
    """The call or its ``disabled=`` argument cannot be edited safely; the file is unchanged."""


@dataclass(frozen=True)
class Edit:
    line: int
    old: str  # the argument's source before ("None", '"reason"' or "" when absent)
    new: str


def compose_reason(reason: str, ref: str | None = None, until: str | None = None) -> str:
    """The reason as the ledger reads it: ``<reason>, see #N, until YYYY-MM-DD``."""
    text = " ".join(reason.split())
    if not text:
        raise EditError("--reason must say why (a non-empty text)")
    if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF or ord(c) == 127 for c in reason):
        raise EditError("--reason contains a control character or a lone surrogate")
    if ref is not None:
        if not valid_ref(ref):
            raise EditError(f"--ref {ref!r}: expected #N (an issue or pull request) or an "
                            "http(s) URL")
        if ref not in text:
            text += f", see {ref}"
    if until is not None:
        # Only the form the ledger reads back (report/expiry.py): fromisoformat alone also
        # takes 2024-W01-1 and 20240101, which would be written and never tracked.
        if not _DATE.fullmatch(until):
            raise EditError(f"--until {until!r}: expected a date YYYY-MM-DD")
        try:
            dt.date.fromisoformat(until)
        except ValueError:
            raise EditError(f"--until {until!r}: expected a date YYYY-MM-DD") from None
        text += f", until {until}"
    return text


def valid_ref(ref: str) -> bool:
    """``#N`` or an http(s) URL without spaces or quotes."""
    return bool(_ISSUE.match(ref) or _URL.match(ref))


def mentions_ref(reason: str, ref: str) -> bool:
    """Does a disabled reason cite ``ref`` (``#12`` as a whole token, or the URL as a whole
    token: ``.../issues/223`` is not cited by ``.../issues/2234``; an issue URL
    ``.../issues/12`` or ``.../pull/12`` also matches ``#12``)?"""
    if _URL.match(ref):
        url = re.escape(ref.rstrip("/"))
        # the URL, then an optional slash, then the end, a blank, a closing bracket or quote,
        # or punctuation that ends a sentence (", see <url>, until ...")
        return bool(re.search(rf"(?<![^\s(<\[\"'`]){url}/?(?=$|[\s)>\]\"'`]|[.,;:!?](?:$|\s))",
                              reason))
    if not _ISSUE.match(ref):
        return False
    number = ref[1:]
    return bool(re.search(rf"(?<![\w/&]){re.escape(ref)}(?!\d)", reason)
                or re.search(rf"/(?:issues|pull)/{number}(?!\d)", reason))


def _marker_name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else None


def _suite_of(call: ast.Call) -> str | None:
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    node = kw.get("suite", call.args[1] if len(call.args) > 1 else None)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _calls(source: bytes, markers: set[str], suite: str) -> list[ast.Call]:
    """The top-level marker calls of ``suite``, with their real line numbers.

    Found as the registry finds them (:func:`testfleet.registry.scan.scan_source`): at
    C speed, parsing only the registration statements, never the whole file. A whole
    parse cost 20 s on a 10 MB test file, twice per edit (the edit and its check), and
    an edit inside one call's parentheses cannot change how the rest of the file parses
    (#36)."""
    from testfleet.registry.scan import marker_pattern, needles_for, scan_source

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError as exc:
        raise EditError(f"cannot parse the file: {exc}") from None
    if encoding not in ("utf-8", "utf-8-sig"):
        raise EditError(f"the file declares encoding {encoding}; only UTF-8 files are edited")
    scanned = scan_source(source, marker_pattern(markers), needles_for(markers))
    if scanned.decode_error is not None:
        raise EditError(f"cannot parse the file: not UTF-8 ({scanned.decode_error})")
    if scanned.unreadable is not None:
        raise EditError(f"cannot parse the file: line {scanned.unreadable[0]}: "
                        f"{scanned.unreadable[3]}")
    out = [c.node for c in scanned.calls
           if _marker_name(c.node.func) in markers and _suite_of(c.node) == suite]
    if not out and scanned.syntax_errors:
        line, _col, message = scanned.syntax_errors[0]
        raise EditError(f"cannot parse the file: line {line}: {message}")
    return out


def _offsets(source: bytes) -> list[int]:
    """Byte offset of each line's start (ast columns are UTF-8 byte offsets in a line)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _position(source: bytes, starts: list[int], line: int, col: int) -> int:
    bom = len(BOM) if line == 1 and source.startswith(BOM) else 0
    return starts[line - 1] + bom + col


def _pick(source: bytes, markers: set[str], suite: str, line: int) -> ast.Call:
    calls = _calls(source, markers, suite)
    if not calls:
        raise EditError(f"no top-level {'/'.join(sorted(markers)) or 'marker'}"
                        f"(..., suite={suite!r}) call")
    return next((c for c in calls if c.lineno == line), calls[0])


def _disabled_value(call: ast.Call) -> ast.expr | None:
    kw = _disabled_keyword(call)
    return kw.value if kw is not None else None


def _disabled_keyword(call: ast.Call) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == "disabled"), None)


def set_disabled(source: bytes, markers: set[str], suite: str, reason: str | None,
                 line: int = 0, *, restore_none: bool = False) -> tuple[bytes, Edit]:
    """``source`` with the registration of ``suite`` disabled for ``reason`` (or enabled
    again when ``reason`` is None); every other byte is kept.

    ``disable`` of a call without ``disabled=`` inserts the argument as the call is
    written: after the last argument on the same line (``f(a, disabled="...")``), or on a
    line of its own, indented like the last argument, in a call written one argument per
    line. ``enable`` removes the argument with its separator (or its line), so enabling
    what ``disable`` inserted gives back the original bytes; one it cannot remove cleanly
    (a comment beside it) becomes ``disabled=None``, and so does one that was
    ``disabled=None`` before ``disable`` wrote the reason over it (``restore_none``, as
    :mod:`testfleet.results.originals` finds out), which gives those bytes back too.
    """
    call = _pick(source, markers, suite, line)
    kw = _disabled_keyword(call)
    starts = _offsets(source)
    if reason is None:
        result, edit = _enable(source, starts, call, kw, restore_none)
    else:
        result, edit = _disable(source, starts, call, kw, json.dumps(reason, ensure_ascii=False))
    _verify(call, _pick(result, markers, suite, call.lineno), reason)
    return result, edit


def _disable(source: bytes, starts: list[int], call: ast.Call, kw: ast.keyword | None,
             literal: str) -> tuple[bytes, Edit]:
    if kw is not None:
        node = kw.value
        if not (isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str))):
            raise EditError(f"disabled= on line {node.lineno} is not a string literal or None")
        if isinstance(node.value, str):
            raise EditError(f"already disabled on line {node.lineno}: {node.value!r} "
                            "(enable it first to change the reason)")
        start, end = _span(source, starts, node)
        old = _text(source, starts, kw)
        result = source[:start] + literal.encode() + source[end:]
        return result, Edit(kw.lineno, old, f"disabled={literal}")
    if any(k.arg is None for k in call.keywords) or any(
            isinstance(a, ast.Starred) for a in call.args):
        raise EditError(f"the call on line {call.lineno} unpacks arguments (* or **); "
                        "add disabled= by hand")
    items = _arguments(call)
    if not items:
        raise EditError(f"the call on line {call.lineno} has no arguments to follow")
    last = items[-1]
    at = _end(source, starts, last)
    close = _position(source, starts, call.end_lineno or 0, call.end_col_offset or 0) - 1
    between = source[at:close]
    argument = f"disabled={literal}".encode()
    if b"\n" not in between and b"\r" not in between:  # f(a, b) -> f(a, b, disabled="...")
        return source[:at] + b", " + argument + source[at:], Edit(call.lineno, "", argument.decode())
    # One argument per line: a line of its own, as a formatter would write it.
    eol = at + min(i for i in (between.find(b"\r"), between.find(b"\n")) if i >= 0)
    newline = b"\r\n" if source[eol:eol + 2] == b"\r\n" else source[eol:eol + 1]
    lead = _INDENT.match(source, _position(source, starts, last.lineno, 0))
    indent = lead.group() if lead else b""
    if between.lstrip(b" \t").startswith(b","):  # a trailing comma: keep the style
        result = source[:eol] + newline + indent + argument + b"," + source[eol:]
    else:
        result = source[:at] + b"," + source[at:eol] + newline + indent + argument + source[eol:]
    return result, Edit(last.lineno + 1, "", argument.decode())


def _enable(source: bytes, starts: list[int], call: ast.Call,
            kw: ast.keyword | None, restore_none: bool = False) -> tuple[bytes, Edit]:
    if kw is None:
        raise EditError(f"the call on line {call.lineno} has no disabled= argument: "
                        "it is enabled already")
    node = kw.value
    if not (isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str))):
        raise EditError(f"disabled= on line {node.lineno} is not a string literal or None")
    if node.value is None:
        raise EditError(f"disabled=None on line {node.lineno}: it is enabled already")
    old = _text(source, starts, kw)
    removed = None if restore_none else _without(source, starts, call, kw)
    if removed is not None:
        return removed, Edit(kw.lineno, old, "")
    start, end = _span(source, starts, node)  # a comment beside it: keep the argument
    return source[:start] + b"None" + source[end:], Edit(kw.lineno, old, "disabled=None")


def _without(source: bytes, starts: list[int], call: ast.Call, kw: ast.keyword) -> bytes | None:
    """``source`` without the keyword argument ``kw`` and its separator, or None when that
    would take a comment (or anything but blanks and one comma) with it."""
    items = _arguments(call)
    i = items.index(kw)
    prev_end = _end(source, starts, items[i - 1]) if i > 0 else None
    next_start = _start(source, starts, items[i + 1]) if i + 1 < len(items) else None
    start, end = _start(source, starts, kw), _end(source, starts, kw)
    line_start = starts[kw.lineno - 1] + (len(BOM) if kw.lineno == 1 and source.startswith(BOM) else 0)
    eol = len(source)
    for mark in (b"\r", b"\n"):
        found = source.find(mark, end)
        if found >= 0:
            eol = min(eol, found)
    after = source[end:eol]
    if not source[line_start:start].strip(b" \t") and _BLANK_COMMA.fullmatch(after):
        # a line of its own: the line goes (and, when it was the last argument without a
        # trailing comma, the comma after the one before it, as disable wrote it)
        line_end = eol + (2 if source[eol:eol + 2] == b"\r\n" else 1 if eol < len(source) else 0)
        if b"," in after:
            return source[:line_start] + source[line_end:]
        if next_start is not None:
            return None
        if prev_end is None:
            return source[:line_start] + source[line_end:]
        gap = source[prev_end:line_start]
        comma = _LEADING_COMMA.match(gap)
        if comma is None:
            return None
        return source[:prev_end] + gap[comma.end():] + source[line_end:]
    if prev_end is not None and _INLINE_COMMA.fullmatch(source[prev_end:start]):
        return source[:prev_end] + source[end:]  # f(a, disabled="x") -> f(a)
    if prev_end is None and next_start is not None and _INLINE_COMMA.fullmatch(source[end:next_start]):
        return source[:start] + source[next_start:]
    return None


_INDENT = re.compile(rb"[ \t]*")
_BLANK_COMMA = re.compile(rb"[ \t]*,?[ \t]*")
_INLINE_COMMA = re.compile(rb"[ \t]*,[ \t]*")
_LEADING_COMMA = re.compile(rb"[ \t]*,")


Arg = ast.expr | ast.keyword


def _arguments(call: ast.Call) -> list[Arg]:
    """Positional and keyword arguments in source order."""
    items: list[Arg] = [*call.args, *call.keywords]
    return sorted(items, key=lambda n: (n.lineno, n.col_offset))


def _start(source: bytes, starts: list[int], node: Arg) -> int:
    return _position(source, starts, node.lineno, node.col_offset)


def _end(source: bytes, starts: list[int], node: Arg) -> int:
    end_line, end_col = node.end_lineno, node.end_col_offset
    if end_line is None or end_col is None:  # pragma: no cover - parsed source has them
        raise EditError("the call's arguments have no source positions")
    return _position(source, starts, end_line, end_col)


def _span(source: bytes, starts: list[int], node: Arg) -> tuple[int, int]:
    return _start(source, starts, node), _end(source, starts, node)


def _text(source: bytes, starts: list[int], node: Arg) -> str:
    start, end = _span(source, starts, node)
    return source[start:end].decode("utf-8", "replace")


def _verify(before: ast.Call, after: ast.Call, reason: str | None) -> None:
    """Every argument but ``disabled=`` is what it was; ``disabled=`` is ``reason`` (absent
    or None when enabling). Otherwise the edit is refused and the file left unchanged."""
    def others(call: ast.Call) -> list[str]:
        return [ast.dump(a) for a in call.args] + [
            ast.dump(k) for k in call.keywords if k.arg != "disabled"]

    value = _disabled_value(after)
    now = value.value if isinstance(value, ast.Constant) else ("?" if value is not None else None)
    if others(before) != others(after) or now != reason:  # pragma: no cover - a bug, not input
        raise EditError("the edit did not produce the expected call; file left unchanged")
