"""One marker call, read as its marker's signature declares it.

Adoption runs before any configuration exists, so it cannot use the registry (which
validates against configured stages and labels): it reads the literal arguments of each
top-level ``register_<backend>_ci(...)`` call the scanner found, composing the suite the
way the project's own marker does, and says what it cannot read as a finding.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from testfleet.adopt.signatures import SignatureRead, template_fields
from testfleet.config import NAME_RE
from testfleet.findings import Finding
from testfleet.registry.scan import MarkerCall

MARKER_RE = re.compile(r"^register_([A-Za-z0-9]+)_ci$")
#: Any ``register_<backend>_ci`` name: before a config exists, every backend is possible.
MARKER_SCAN = re.compile(r"register_(?:[A-Za-z0-9]+_ci|ci_gate)(?!\w)")
GATE = "register_ci_gate"
NEEDLES = (b"register_",)
ALIASES = {"amd": "rocm"}
NAME = re.compile(NAME_RE)


@dataclass(frozen=True)
class FoundCall:
    """One literal ``register_<backend>_ci(...)`` call as written in a file."""

    file: str
    line: int
    col: int
    marker: str
    backend: str
    suite: str
    est_time: float
    labels: tuple[str, ...] = ()
    nightly: bool = False
    disabled: str | None = None


def backend_of(marker: str) -> str:
    m = MARKER_RE.match(marker)
    assert m is not None
    name = m.group(1).lower()
    return ALIASES.get(name, name)


def literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def parse_call(rel: str, call_at: MarkerCall, findings: list[Finding],
                sig: SignatureRead | None = None) -> FoundCall | None:
    """One call read as the marker's signature says (testfleet's own when ``sig`` is None:
    ``marker(est_time, suite, *, labels, nightly, disabled)``)."""
    call, marker = call_at.node, call_at.name
    where = (rel, call_at.line, call_at.col)
    sig = sig or SignatureRead()
    keywords = {"est_time", "suite", "labels", "nightly", "disabled", *dict(sig.keywords), *sig.ignore}

    def bad(message: str) -> None:
        findings.append(Finding(*where, "error", "adopt-call", f"{marker}(...): {message}"))

    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        bad("starred arguments cannot be read statically")
        return None
    values: dict[str, Any] = {}
    names = sig.positional
    if len(call.args) > len(names):
        bad(f"{len(call.args)} positional arguments; at most {', '.join(names)}")
        return None
    for name, arg in zip(names, call.args, strict=False):
        ok, value = literal(arg)
        if not ok:
            bad(f"argument {name} is not a literal")
            return None
        values[name] = value
    for kw in call.keywords:
        assert kw.arg is not None
        if kw.arg not in keywords:
            bad(f"unknown keyword {kw.arg!r} (testfleet reads {', '.join(sorted(keywords))}; a "
                "project's own keywords are read from the module that defines its markers)")
            return None
        if kw.arg in sig.ignore:
            continue
        ok, value = literal(kw.value)
        if not ok:
            bad(f"argument {kw.arg} is not a literal")
            return None
        values[kw.arg] = value
    fields = sorted(template_fields(sig.suite_template))
    given = [f for f in fields if f in values]
    if given and "suite" in values and values["suite"] is not None:
        bad(f"gives both suite and {', '.join(given)}, which compose the suite ({sig.suite_template!r})")
        return None
    if given:
        if len(given) < len(fields) or not all(isinstance(values[f], (str, int))
                                               and not isinstance(values[f], bool) for f in fields):
            bad(f"the suite is composed as {sig.suite_template!r}: give every field as a "
                "string literal")
            return None
        values["suite"] = str(sig.suite_template).format(**{f: values[f] for f in fields})
    suite, est = values.get("suite"), values.get("est_time")
    if not isinstance(suite, str) or not (suite or sig.empty_suite):
        bad("suite must be a non-empty string literal")
        return None
    zero_ok = not sig.is_default  # the project's own parser decides; 0 is a number to it
    if isinstance(est, bool) or not isinstance(est, (int, float)) or not (est > 0 or (zero_ok and est == 0)):
        bad(f"est_time must be a number > 0, got {est!r}")
        return None
    labels = values.get("labels") or ()
    if not isinstance(labels, (list, tuple)) or not all(isinstance(x, str) for x in labels):
        bad("labels must be a list of string literals")
        return None
    nightly = values.get("nightly", False)
    if not isinstance(nightly, bool):
        bad("nightly must be True or False")
        return None
    disabled = values.get("disabled")
    if disabled is not None and (not isinstance(disabled, str) or not disabled.strip()):
        bad("disabled must be a non-empty reason string or None")
        return None
    return FoundCall(rel, call_at.line, call_at.col, marker, backend_of(marker), suite,
                     float(est), tuple(labels), nightly, disabled)


def check_gate(rel: str, call: MarkerCall, findings: list[Finding]) -> None:
    """A gate that leaves ``steps``/``constraint`` to a config default needs one that
    no tree can supply by itself: say so rather than invent thresholds."""
    given = {k.arg for k in call.node.keywords if k.arg}
    missing = [k for k in ("steps", "constraint") if k not in given]
    if not missing:
        return
    key = next((k.value for k in call.node.keywords if k.arg == "metric_key"), None)
    metric = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "?"
    findings.append(Finding(
        rel, call.line, call.col, "error", "adopt-gate-default",
        f"register_ci_gate(metric_key={metric!r}) omits {' and '.join(missing)}: add them to the "
        f'call or add [tool.testfleet.gate.defaults."{metric}"] with steps and constraint'))
