"""Reading a plan file through its document type (:mod:`testfleet.documents.plan`), the
one the planner writes and ``testfleet schema plan`` publishes.

A plan file crosses a trust boundary (it is an artifact a CI job downloads, and it may
have been edited), so it is read strictly: no coercion (``"1"`` is not a shard, ``true``
is not a count), no unknown fields (a newer testfleet's plan is refused, not half-read),
numbers finite and bounded. Every problem is reported with its path, all of them at
once, in the plan's own words. The planner's dataclasses (``planning/model.py``) stay
the in-memory form.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from pydantic import AfterValidator, TypeAdapter, ValidationError

from testfleet.documents.plan import MAX_NUMBER, PlanDoc, unique_job_ids
from testfleet.documents.vocabulary import MAX_JOB_TIMEOUT_MINUTES
from testfleet.errors import UsageError

#: How many problems one error message lists before it counts the rest.
SHOWN_PROBLEMS = 10


@cache
def _reader() -> TypeAdapter[PlanDoc]:
    return TypeAdapter(Annotated[PlanDoc, AfterValidator(unique_job_ids)])


def validate_plan_document(data: dict[str, Any]) -> PlanDoc:
    """Validate a decoded plan document; raises :class:`UsageError` listing every problem
    with its path (``jobs[0].tests[2].estimate: expected a number >= 0``)."""
    try:
        return _reader().validate_python(data)
    except ValidationError as exc:
        problems = [_describe(err) for err in exc.errors(include_url=False)]
    if len(problems) == 1:
        raise UsageError(problems[0])
    shown = problems[:SHOWN_PROBLEMS]
    more = len(problems) - len(shown)
    lines = "\n".join(f"  {p}" for p in shown)
    tail = f"\n  … and {more} more" if more else ""
    raise UsageError(f"{len(problems)} problems:\n{lines}{tail}")


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


#: pydantic's error types in the plan's own words
_EXPECTED = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def _describe(err: Any) -> str:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return f"{_path(loc[:-1]) or 'plan'}: missing field {loc[-1]!r}"
    where = _path(loc) or "plan"
    if kind == "extra_forbidden":
        return f"{where}: unknown field (this testfleet writes no such field; " \
               "was the plan written by another version?)"
    if kind == "plan":
        return f"{where}: {err['msg']}"
    if kind in _EXPECTED:
        return f"{where}: expected {_EXPECTED[kind]}, got {_shown(value)}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than",
                "finite_number"):
        return f"{where}: {_range(loc, ctx)}, got {_shown(value)}"
    if kind == "literal_error":
        return f"{where}: expected one of {ctx.get('expected', '')}, got {_shown(value)}"
    if kind in ("string_too_short",):
        return f"{where}: must not be empty"
    return f"{where}: {err['msg']}"


def _range(loc: tuple[int | str, ...], ctx: dict[str, Any]) -> str:
    field = loc[-1] if loc else ""
    if field in ("timeout_minutes",) and "ci" in loc:
        return f"expected an integer in 1..{MAX_JOB_TIMEOUT_MINUTES}"
    if field == "timeout_factor":
        return "expected a number in (0, 100]"
    if field in ("shard", "shards", "timeout_minutes", "max_parallel"):
        return "expected an integer >= 1"
    if field in ("wave",) or (len(loc) >= 2 and loc[-2] == "counts"):
        return "expected an integer >= 0"
    return f"expected a finite number >= 0 (at most {MAX_NUMBER:g})"


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return type(value).__name__
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
