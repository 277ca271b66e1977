"""Find the ``register_ci_gate`` calls of ONE file, without importing it.

``testfleet check`` gets gate calls from the registry's full collection; the
runner hook and ``testfleet gate evaluate`` need only the file at hand, and must
answer fast when a file has no gate at all (most files), so they read just that
file here. The calls come out in the registry's :class:`GateCall` form, so both
paths feed the same :func:`testfleet.gate.spec.parse_gate_specs`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from testfleet.config import GATE_MARKER
from testfleet.findings import Finding
from testfleet.registry.model import GateCall
from testfleet.registry.validate import duplicate_constraint_keys


def gate_calls_in_source(text: str, file: str) -> tuple[list[GateCall], list[Finding]]:
    """Top-level ``register_ci_gate(...)`` calls of ``text`` (a module's source)."""
    if GATE_MARKER not in text:
        return [], []
    try:
        tree = ast.parse(text, filename=file)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", 0) or 0
        return [], [Finding(file, line, 0, "error", "gate-syntax",
                            f"cannot parse the file to read its gates: {exc}")]
    calls: list[GateCall] = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        node = stmt.value
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name != GATE_MARKER:
            continue
        kwargs: dict[str, object] = {}
        non_literal: list[str] = []
        for kw in node.keywords:
            if kw.arg is None:  # ``**options``
                non_literal.append("**")
                continue
            try:
                kwargs[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                non_literal.append(kw.arg)
        calls.append(GateCall(file=file, line=node.lineno, col=node.col_offset + 1, kwargs=kwargs,
                              positional=len(node.args), non_literal=tuple(non_literal),
                              duplicate_keys=duplicate_constraint_keys(node)))
    return calls, []


def gate_calls_in_file(root: Path, file: str) -> tuple[list[GateCall], list[Finding]]:
    """Read ``root / file`` (repo-relative) and return its gate calls; unreadable is a finding."""
    try:
        text = (root / file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [], [Finding(file, 0, 0, "error", "gate-read", f"cannot read the test file: {exc}")]
    return gate_calls_in_source(text, file)
