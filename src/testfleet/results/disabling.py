"""Set or clear a registration's ``disabled=`` argument in place, and nothing else.

``testfleet disable`` / ``enable`` edit people's test files. Like ``durations suggest
--write``, an edit touches only the bytes of the literal ``disabled=`` argument
(``None`` <-> a reason string); when a call has no ``disabled=`` yet, ``disable``
inserts ``, disabled="..."`` after its last argument and changes nothing else. Every
edit is verified by re-parsing the result, and the file is written atomically.

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
    """Does a disabled reason cite ``ref`` (``#12`` as a whole token, or the URL; an issue
    URL ``.../issues/12`` or ``.../pull/12`` also matches ``#12``)?"""
    if _URL.match(ref):
        return ref.rstrip("/") in reason
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


def _calls(tree: ast.Module, markers: set[str], suite: str) -> list[ast.Call]:
    out = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and _marker_name(call.func) in markers \
                and _suite_of(call) == suite:
            out.append(call)
    return out


def _offsets(source: bytes) -> list[int]:
    """Byte offset of each line's start (ast columns are UTF-8 byte offsets in a line)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _parse(source: bytes) -> ast.Module:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            raise EditError(f"the file declares encoding {encoding}; only UTF-8 files are edited")
        return ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise EditError(f"cannot parse the file: {exc}") from None


def _position(source: bytes, starts: list[int], line: int, col: int) -> int:
    bom = len(BOM) if line == 1 and source.startswith(BOM) else 0
    return starts[line - 1] + bom + col


def _pick(tree: ast.Module, markers: set[str], suite: str, line: int) -> ast.Call:
    calls = _calls(tree, markers, suite)
    if not calls:
        raise EditError(f"no top-level {'/'.join(sorted(markers)) or 'marker'}"
                        f"(..., suite={suite!r}) call")
    return next((c for c in calls if c.lineno == line), calls[0])


def _disabled_value(call: ast.Call) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == "disabled"), None)


def set_disabled(source: bytes, markers: set[str], suite: str, reason: str | None,
                 line: int = 0) -> tuple[bytes, Edit]:
    """``source`` with the registration of ``suite`` disabled for ``reason`` (or enabled
    again when ``reason`` is None); every other byte is kept."""
    tree = _parse(source)
    call = _pick(tree, markers, suite, line)
    node = _disabled_value(call)
    starts = _offsets(source)
    literal = "None" if reason is None else json.dumps(reason, ensure_ascii=False)
    if node is None:
        if reason is None:
            raise EditError(f"the call on line {call.lineno} has no disabled= argument: "
                            "it is enabled already")
        if any(k.arg is None for k in call.keywords) or any(
                isinstance(a, ast.Starred) for a in call.args):
            raise EditError(f"the call on line {call.lineno} unpacks arguments (* or **); "
                            "add disabled= by hand")
        last = max([*call.args, *(k.value for k in call.keywords)],
                   key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0), default=None)
        if last is None or last.end_lineno is None or last.end_col_offset is None:
            raise EditError(f"the call on line {call.lineno} has no arguments to follow")
        at = _position(source, starts, last.end_lineno, last.end_col_offset)
        insert = f", disabled={literal}".encode()
        result = source[:at] + insert + source[at:]
        edit = Edit(call.lineno, "", f"disabled={literal}")
    else:
        if not (isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str))):
            raise EditError(f"disabled= on line {node.lineno} is not a string literal or None")
        if reason is not None and isinstance(node.value, str):
            raise EditError(f"already disabled on line {node.lineno}: {node.value!r} "
                            "(enable it first to change the reason)")
        if reason is None and node.value is None:
            raise EditError(f"disabled=None on line {node.lineno}: it is enabled already")
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = _position(source, starts, node.lineno, node.col_offset)
        end = _position(source, starts, node.end_lineno, node.end_col_offset)
        old = source[start:end].decode("utf-8")
        result = source[:start] + literal.encode() + source[end:]
        edit = Edit(node.lineno, old, literal)
    check = _disabled_value(_pick(_parse(result), markers, suite, call.lineno))
    if not isinstance(check, ast.Constant) or check.value != reason:  # pragma: no cover
        raise EditError("the edit did not produce the expected argument; file left unchanged")
    return result, edit
