"""Gate declarations: ``register_ci_gate(...)`` calls turned into validated :class:`GateSpec` s.

Collection (the registry) finds the calls and literal-evaluates their arguments;
this module says what they mean and reports every mistake at once, each with
file and line. Two things ``ast.literal_eval`` hides are recovered from the
syntax tree here: duplicate keys inside the ``constraint`` dict literal (which
it silently merges) and the exact source position of the call.

The stored identity of a gated value is ``(metric_key, steps_key, constraint_key,
step)`` where the keys are canonical JSON of the literals as written (or of the
config default that filled them), so editing a declaration starts a fresh
history on purpose.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from testfleet.canonical import canonical_json as canonical_json  # stored identities
from testfleet.config.gate_keys import CONSTRAINT_KEYS as CONSTRAINT_KEYS
from testfleet.config.gate_keys import MAX_STEPS as MAX_STEPS
from testfleet.config.gate_keys import Steps as Steps
from testfleet.config.gate_keys import _is_number
from testfleet.config.gate_keys import validate_constraint as validate_constraint
from testfleet.config.gate_keys import validate_steps as validate_steps
from testfleet.findings import Finding

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.registry.model import GateCall

GATE_KEYS = (
    "metric_key", "steps", "constraint", "hard_min", "hard_max", "min_history", "enforce", "reason",
)
_GATE_KEY_SET = frozenset(GATE_KEYS)
_CONTROL = re.compile("[\x00-\x1f\x7f]")
STEP_LAST = -1  # the coordinate of ``steps="last"``



@dataclass(frozen=True)
class GateSpec:
    """One validated gate of one test file."""

    file: str
    line: int
    col: int
    metric_key: str
    steps: Steps
    constraint: Mapping[str, float]
    hard_min: float | None = None
    hard_max: float | None = None
    min_history: int = 1
    enforce: bool = False
    reason: str | None = None
    defaults_from: tuple[str, ...] = field(default=())

    @cached_property
    def steps_key(self) -> str:
        return canonical_json(self.steps if isinstance(self.steps, str) else list(self.steps))

    @cached_property
    def constraint_key(self) -> str:
        return canonical_json({k: float(v) for k, v in self.constraint.items()})

    @property
    def label(self) -> str:
        """``metric[steps]`` for humans; the key is shown with repr when it is unusual."""
        key = self.metric_key if self.metric_key.isprintable() and len(self.metric_key) <= 80 \
            else repr(self.metric_key[:80]) + ("..." if len(self.metric_key) > 80 else "")
        steps = self.steps if isinstance(self.steps, str) else ",".join(map(str, self.steps))
        return f"{key}[{steps}]"

    def corridor(self, reference: float) -> tuple[float, float]:
        """``[ref - max(rel_down*|ref|, abs_floor_down), ref + max(rel_up*|ref|, abs_floor_up)]``."""
        c = self.constraint
        down = max(c.get("rel_down", 0.0) * abs(reference), c.get("abs_floor_down", 0.0))
        up = max(c.get("rel_up", 0.0) * abs(reference), c.get("abs_floor_up", 0.0))
        return reference - down, reference + up

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file, "line": self.line, "metric_key": self.metric_key,
            "steps": self.steps if isinstance(self.steps, str) else list(self.steps),
            "constraint": dict(self.constraint), "hard_min": self.hard_min,
            "hard_max": self.hard_max, "min_history": self.min_history,
            "enforce": self.enforce, "reason": self.reason,
            "steps_key": self.steps_key, "constraint_key": self.constraint_key,
            "defaults_from": list(self.defaults_from),
        }


# --------------------------------------------------------------------------- validation


def _finite_or_none(name: str, v: Any) -> tuple[float | None, str | None]:
    if v is None:
        return None, None
    if not _is_number(v):
        return None, f"{name} must be a number or None, got {v!r}"
    if not math.isfinite(v):
        return None, f"{name} must be finite, got {v!r}"
    return float(v), None


# --------------------------------------------------------------------------- parsing


def parse_gate_call(
    call: GateCall,
    defaults: Mapping[str, Any] | None = None,
    *,
    window: int = 20,
) -> tuple[GateSpec | None, list[Finding]]:
    """Validate one call; ``defaults`` maps metric keys to ``{"steps", "constraint"}``."""
    problems: list[tuple[str, str, str]] = []  # (code, message, key)

    def err(code: str, message: str, key: str = "") -> None:
        problems.append((code, message, key))

    if call.positional:
        err("gate-positional", "register_ci_gate takes keyword arguments only "
            f"({call.positional} positional argument{'s' if call.positional > 1 else ''} given)")
    for name in call.non_literal:
        err("gate-non-literal", f"argument {name!r} must be a literal (a constant, list or dict "
            "written in place), so that it can be read without running the file", name)
    kwargs = dict(call.kwargs)
    for key in kwargs:
        if key not in _GATE_KEY_SET:
            hint = difflib.get_close_matches(key, GATE_KEYS, n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            err("gate-unknown-key", f"unknown argument {key!r}{extra} (valid: {', '.join(GATE_KEYS)})",
                key)
    for dup in call.duplicate_keys:
        err("gate-duplicate-key", f"constraint: key {dup} is written more than once "
            "(only the last would count)", "constraint")

    metric = kwargs.get("metric_key")
    metric_ok = False
    if "metric_key" not in kwargs and "metric_key" not in call.non_literal:
        err("gate-missing", "metric_key is required", "metric_key")
    elif "metric_key" in kwargs:
        if not isinstance(metric, str) or not metric.strip():
            err("gate-metric-key", f"metric_key must be a non-empty string, got {metric!r}",
                "metric_key")
        elif _CONTROL.search(metric):
            err("gate-metric-key", f"metric_key must not contain control characters, got {metric!r}",
                "metric_key")
        else:
            metric_ok = True

    default: Mapping[str, Any] = {}
    if metric_ok and defaults:
        found = defaults.get(metric)  # type: ignore[arg-type]
        if found is not None:
            default = found if isinstance(found, Mapping) else {
                "steps": getattr(found, "steps", None), "constraint": getattr(found, "constraint", None)
            }
    filled: list[str] = []

    def given_or_default(key: str) -> Any:
        """The call's literal, else the metric's configured default (recorded in ``filled``);
        with neither, an error once the metric is known. A non-literal is never replaced."""
        value = kwargs.get(key)
        if value is None and key not in call.non_literal:
            if default.get(key) is not None:
                value = default[key]
                filled.append(key)
            elif metric_ok:
                err("gate-missing", f"{key} is required: no [tool.testfleet.gate.defaults] entry "
                    f"for {metric!r} supplies it", key)
        return value

    steps: Steps | None = None
    raw_steps = given_or_default("steps")
    if raw_steps is not None:
        steps, problem = validate_steps(raw_steps)
        if problem:
            err("gate-steps", problem, "steps")

    constraint: dict[str, float] | None = None
    raw_constraint = given_or_default("constraint")
    if "constraint" in filled:  # a configured default may be any mapping; validation wants a dict
        raw_constraint = dict(raw_constraint)
    if raw_constraint is not None:
        constraint, msgs = validate_constraint(raw_constraint)
        for msg in msgs:
            err("gate-constraint", msg, "constraint")

    hard_min, p1 = _finite_or_none("hard_min", kwargs.get("hard_min"))
    hard_max, p2 = _finite_or_none("hard_max", kwargs.get("hard_max"))
    for p, key in ((p1, "hard_min"), (p2, "hard_max")):
        if p:
            err("gate-hard-limit", p, key)
    if hard_min is not None and hard_max is not None and hard_min > hard_max:
        err("gate-hard-limit", f"hard_min {hard_min!r} is greater than hard_max {hard_max!r}", "hard_min")

    min_history = kwargs.get("min_history", 1)
    if isinstance(min_history, bool) or not isinstance(min_history, int) or min_history < 1:
        err("gate-min-history", f"min_history must be an integer >= 1, got {min_history!r}",
            "min_history")
    elif min_history > window:
        err("gate-min-history", f"min_history {min_history} exceeds the baseline window {window} "
            "([tool.testfleet.gate] window): the gate could never become active", "min_history")

    enforce = kwargs.get("enforce", False)
    if not isinstance(enforce, bool):
        err("gate-enforce", f"enforce must be True or False, got {enforce!r}", "enforce")
    reason = kwargs.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        err("gate-reason", f"reason must be a non-empty string or None, got {reason!r}", "reason")

    findings = [
        Finding(call.file, call.line, call.col, "error", code, msg, key) for code, msg, key in problems
    ]
    if findings or steps is None or constraint is None or not metric_ok:
        return None, findings
    return GateSpec(
        file=call.file, line=call.line, col=call.col, metric_key=metric,  # type: ignore[arg-type]
        steps=steps, constraint=constraint, hard_min=hard_min, hard_max=hard_max,
        min_history=min_history, enforce=enforce, reason=reason, defaults_from=tuple(filled),
    ), []


def parse_gate_specs(
    project: Project | None, gate_calls: Iterable[GateCall]
) -> tuple[list[GateSpec], list[Finding]]:
    """Every valid spec and every problem of ``gate_calls`` (all of them, never only the first).

    Two declarations of one file with the same identity would write the same
    coordinates twice, so the second is an error.
    """
    gate_cfg = project.config.gate if project is not None else None
    defaults = dict(gate_cfg.defaults) if gate_cfg is not None else {}
    window = gate_cfg.window if gate_cfg is not None else 20
    specs: list[GateSpec] = []
    findings: list[Finding] = []
    seen: dict[tuple[str, str, Steps, tuple[tuple[str, str], ...]], GateSpec] = {}
    for call in gate_calls:
        spec, problems = parse_gate_call(call, defaults, window=window)
        findings.extend(problems)
        if spec is None:
            continue
        ident = (spec.file, spec.metric_key, spec.steps, _constraint_ident(spec.constraint))
        if ident in seen:
            first = seen[ident]
            findings.append(Finding(spec.file, spec.line, spec.col, "error", "gate-duplicate",
                                    f"gate {spec.label} repeats the declaration at line {first.line}",
                                    "metric_key"))
            continue
        seen[ident] = spec
        specs.append(spec)
    return specs, findings


def _constraint_ident(constraint: Mapping[str, float]) -> tuple[tuple[str, str], ...]:
    """Equal exactly when two constraints' stored keys (:attr:`GateSpec.constraint_key`) are,
    without writing JSON for each of tens of thousands of gates: that key is the sorted
    keys with ``float.__repr__`` of each value, which is what this holds."""
    return tuple(sorted((k, float.__repr__(float(v))) for k, v in constraint.items()))


def specs_for_file(specs: Sequence[GateSpec], file: str) -> list[GateSpec]:
    return [s for s in specs if s.file == file]
