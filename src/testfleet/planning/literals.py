"""Rewrite one registration's ``est_time`` literal in place, and nothing else.

``testfleet durations suggest --write`` corrects literals that drifted from measured
history. Test files are people's code: the edit replaces exactly the bytes of the
number token, keeps every other byte (line endings, comments, encoding, BOM)
unchanged, is verified by re-parsing, and is written atomically.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass


class LiteralNotFound(Exception):
    """The registration's call or its numeric ``est_time`` literal was not found."""


@dataclass(frozen=True)
class Edit:
    line: int
    old: str
    new: str


def format_seconds(value: float) -> str:
    """How a suggested value is written: whole seconds, at least 1."""
    return str(max(1, int(-(-value // 1))))


def _marker_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal_str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def find_est_time(tree: ast.Module, markers: set[str], suite: str, line: int = 0) -> ast.Constant:
    """The ``est_time`` literal of the top-level marker call registering ``suite``."""
    found: list[ast.Call] = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call) or _marker_name(call.func) not in markers:
            continue
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        call_suite = _literal_str(kw.get("suite")) or (
            _literal_str(call.args[1]) if len(call.args) > 1 else None)
        if call_suite == suite:
            found.append(call)
    if not found:
        raise LiteralNotFound(f"no top-level {'/'.join(sorted(markers))}(..., suite={suite!r}) call")
    call = next((c for c in found if c.lineno == line), found[0])
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    node = kw.get("est_time", call.args[0] if call.args else None)
    if (not isinstance(node, ast.Constant) or isinstance(node.value, bool)
            or not isinstance(node.value, (int, float))):
        raise LiteralNotFound(f"est_time of the call on line {call.lineno} is not a plain number")
    if node.end_lineno != node.lineno:
        raise LiteralNotFound(f"est_time literal on line {node.lineno} spans lines")
    return node


def rewrite_est_time(source: bytes, markers: set[str], suite: str, new_value: float,
                     line: int = 0) -> tuple[bytes, Edit]:
    """``source`` with that literal replaced; every other byte is kept."""
    try:
        tree = ast.parse(source)
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except (SyntaxError, ValueError) as exc:
        raise LiteralNotFound(f"cannot parse the file: {exc}") from None
    node = find_est_time(tree, markers, suite, line)
    lines = source.splitlines(keepends=True)
    raw = lines[node.lineno - 1]
    bom = b""
    if node.lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
        bom, raw = raw[:3], raw[3:]
    text_encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    text = raw.decode(text_encoding)
    utf8 = text.encode("utf-8")
    start = len(utf8[: node.col_offset].decode("utf-8"))
    end = len(utf8[: node.end_col_offset].decode("utf-8"))
    old = text[start:end]
    new = format_seconds(new_value)
    lines[node.lineno - 1] = bom + (text[:start] + new + text[end:]).encode(text_encoding)
    result = b"".join(lines)
    check = find_est_time(ast.parse(result), markers, suite, line)
    if check.value != int(new):  # pragma: no cover - a bug guard, not a user path
        raise LiteralNotFound("rewrite did not produce the expected literal; file left unchanged")
    return result, Edit(node.lineno, old, new)
