"""The plan file's shape as pydantic models: what ``load_plan`` validates against, and the
JSON Schema ``testfleet schema plan`` publishes.

A plan file crosses a trust boundary (it is an artifact a CI job downloads, and it may
have been edited), so it is read strictly: no coercion (``"1"`` is not a shard, ``true``
is not a count), no unknown fields (a newer testfleet's plan is refused, not half-read),
numbers finite and bounded. Every problem is reported with its path, all of them at
once. The planner's dataclasses (``planning/model.py``) stay the in-memory form; these
models only guard the door.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from testfleet.errors import UsageError
from testfleet.planning.jobci import DEFAULT_JOB_TIMEOUT_MINUTES, MAX_JOB_TIMEOUT_MINUTES
from testfleet.planning.vocabulary import Reason, Source, Status

#: Far beyond any real estimate or ratio; a bigger one (1e308) is corruption, and
#: timelines and timeouts computed from it overflow.
MAX_NUMBER = 1e12
#: How many problems one error message lists before it counts the rest.
SHOWN_PROBLEMS = 10

Number = Annotated[float, Field(ge=0, le=MAX_NUMBER, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("plan", message)


def _command(value: str, *, auto: bool) -> None:
    """A plan's command is a shorthand, a template (checked as the config checks it) or
    ``auto`` where allowed. A plan is data and may lie: it never reaches a shell."""
    from testfleet.commands import AUTO, command_problem

    if value == AUTO and not auto:
        raise _problem("a file's command cannot be 'auto' (planning resolves it)")
    problem = command_problem(value)
    if problem:
        raise _problem(problem)


class PlannedTestFile(_Strict):
    file: str
    estimate: Number
    source: Source
    command: str | None = None
    quarantined: str = ""

    @field_validator("command")
    @classmethod
    def _check_command(cls, value: str | None) -> str | None:
        if value is not None:
            _command(value, auto=False)
        return value


class ContainerFile(_Strict):
    image: Annotated[str, Field(min_length=1)]
    options: str = ""
    volumes: list[str] = Field(default_factory=list)


class CheckoutFile(_Strict):
    repository: str
    ref: str = ""
    path: str
    token_secret: str | None = None


class JobCIFile(_Strict):
    container: ContainerFile | None = None
    setup: list[str] = Field(default_factory=list)
    secrets: list[str] = Field(default_factory=list)
    fail_fast: bool | None = None
    max_parallel: Positive | None = None
    timeout_minutes: Annotated[int, Field(ge=1, le=MAX_JOB_TIMEOUT_MINUTES)] | None = None
    timeout_factor: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] | None = None
    max_attempts: Annotated[int, Field(ge=1, le=10)] | None = None
    retry_wait: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] | None = None
    python: str | None = None
    uv: bool = False
    checkouts: list[CheckoutFile] = Field(default_factory=list)


class JobFile(_Strict):
    id: str
    stage: str
    backend: str
    runs_on: list[str]
    container: str | None
    command: str
    shard: Positive
    shards: Positive
    wave: Count
    needs: list[str]
    estimate: Number
    tests: list[PlannedTestFile]
    env: dict[str, str] = Field(default_factory=dict)
    probe: bool = False
    ci: JobCIFile = Field(default_factory=JobCIFile)
    timeout_minutes: Positive = DEFAULT_JOB_TIMEOUT_MINUTES
    # stage variants (#12): written only for a job of a stage with variants
    variant: str = ""

    @field_validator("command")
    @classmethod
    def _check_command(cls, value: str) -> str:
        _command(value, auto=True)
        return value

    @model_validator(mode="after")
    def _check_job(self) -> JobFile:
        if self.shard > self.shards:
            raise _problem(f"shard {self.shard} is beyond shards {self.shards}")
        if not self.tests:
            raise _problem("a job must hold at least one test")
        if self.command == "auto" and any(t.command is None for t in self.tests):
            raise _problem("an 'auto' job names each file's command")
        return self


class StageFile(_Strict):
    name: str
    backend: str
    status: Status
    reason: str
    wave: Count
    counts: dict[str, Count]
    shards: Count = 0
    makespan: Number = 0.0
    lower_bound: Number = 0.0
    ratio: Number = 1.0
    history_share: Number = 0.0
    hole: bool = False
    variant: str = ""  # stage variants (#12): one summary per variant


class SkippedFile(_Strict):
    file: str
    backend: str
    suite: str
    reason: Reason
    detail: str
    variant: str = ""  # stage variants (#12): one fate per variant


class PlanInputsFile(_Strict):
    """What the plan pins about the history it was made from (planning/inputs.py)."""

    history: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class PlanFile(_Strict):
    """``testfleet plan --format json``: the plan file every shard runs from."""

    schema_: Literal["testfleet.plan/1"] = Field(alias="schema")
    digest: Annotated[str, Field(min_length=1)]
    policy: dict[str, Any]
    trigger: dict[str, Any] = Field(default_factory=dict)
    jobs: list[JobFile]
    stages: list[StageFile]
    skipped: list[SkippedFile]
    warnings: list[str]
    #: fork pull requests only: where the trust settings came from (planning/trust.py)
    trust: dict[str, Any] = Field(default_factory=dict)
    #: the digest of the history-derived inputs (estimates, quarantine) the plan used
    inputs: PlanInputsFile | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> PlanFile:
        ids = [j.id for j in self.jobs]
        dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) < len(ids) else []
        if dupes:
            raise _problem(f"duplicate job id(s) {', '.join(dupes)}")
        return self


def validate_plan_document(data: dict[str, Any]) -> PlanFile:
    """Validate a decoded plan document; raises :class:`UsageError` listing every problem
    with its path (``jobs[0].tests[2].estimate: expected a number >= 0``)."""
    try:
        return PlanFile.model_validate(data)
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
