"""What a gate's ``steps`` and ``constraint`` may be: checked the same way in a
``register_ci_gate`` call (:mod:`testfleet.gate.spec`) and in a ``[gate.defaults]`` table
of the configuration, which must not import the gate feature to say so."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Literal

CONSTRAINT_KEYS = ("rel_up", "abs_floor_up", "rel_down", "abs_floor_down")
#: The most step indices one ``steps`` list may name (a pull request controls the list;
#: every check, record selection and stored key is linear in it). docs/gate.md says so.
MAX_STEPS = 10_000

Steps = Literal["last", "all"] | tuple[int, ...]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def validate_steps(value: Any) -> tuple[Steps | None, str | None]:
    """``"last"``, ``"all"`` or a non-empty list of distinct non-negative ints (no bools)."""
    if isinstance(value, str):
        import difflib  # lazy: only a misspelt value pays for it

        if value in ("last", "all"):
            return value, None  # type: ignore[return-value]
        hint = difflib.get_close_matches(value, ["last", "all"], n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else ""
        return None, f"steps must be 'last', 'all' or a list of step indices, got {value!r}{extra}"
    if isinstance(value, (list, tuple)):
        if not value:
            return None, "steps must not be an empty list (use 'last', 'all' or list step indices)"
        if len(value) > MAX_STEPS:
            return None, (f"steps lists {len(value)} step indices; at most {MAX_STEPS} are "
                          "allowed (use 'all' to gate every step)")
        bad = [s for s in value if isinstance(s, bool) or not isinstance(s, int) or s < 0]
        if bad:
            return None, f"steps must be non-negative integers (not booleans), got {bad[0]!r}"
        if len(set(value)) != len(value):
            dups = sorted(s for s, n in Counter(value).items() if n > 1)
            return None, f"steps lists step {dups[0]} more than once"
        return tuple(value), None
    return None, f"steps must be 'last', 'all' or a list of step indices, got {value!r}"


def validate_constraint(value: Any) -> tuple[dict[str, float] | None, list[str]]:
    """Every problem of a constraint dict; the dict itself when there are none."""
    if not isinstance(value, dict):
        return None, [f"constraint must be a dict with {', '.join(CONSTRAINT_KEYS)}, got {value!r}"]
    problems: list[str] = []
    out: dict[str, float] = {}
    for key, v in value.items():
        if key not in CONSTRAINT_KEYS:
            import difflib  # lazy: only an unknown key pays for it

            hint = difflib.get_close_matches(str(key), CONSTRAINT_KEYS, n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            problems.append(f"constraint: unknown key {key!r}{extra} "
                            f"(valid: {', '.join(CONSTRAINT_KEYS)})")
            continue
        if not _is_number(v):
            problems.append(f"constraint.{key} must be a number, got {v!r}")
        elif not math.isfinite(v):
            problems.append(f"constraint.{key} must be finite, got {v!r}")
        elif v < 0:
            problems.append(f"constraint.{key} must be >= 0, got {v!r}")
        else:
            out[key] = float(v)
    known = {k for k in value if k in CONSTRAINT_KEYS}
    for side in ("up", "down"):
        if not known & {f"rel_{side}", f"abs_floor_{side}"}:
            problems.append(f"constraint needs rel_{side} or abs_floor_{side} (or both): "
                            f"the {'upper' if side == 'up' else 'lower'} side of the corridor is unbounded")
    return (None, problems) if problems else (out, [])
