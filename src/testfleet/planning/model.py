"""The plan as data: jobs, stage summaries, skipped registrations, and its one JSON form.

A plan file is what every shard of a CI run executes from, so it must be
byte-identical for identical inputs (sorted keys, no timestamps) and must refuse
to load when it was damaged or edited (``digest`` over the canonical content).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from testfleet.errors import UsageError
from testfleet.fileio import read_capped
from testfleet.planning.jobci import DEFAULT_JOB_TIMEOUT_MINUTES, JobCI, parse_job_ci

SCHEMA = "testfleet.plan/1"
STATUSES = ("scheduled", "dormant", "unauthorized", "excluded", "unaffected", "empty")
REASONS = (
    "disabled",
    "stage-dormant",
    "unauthorized",
    # Stages and triggers (#12): the stage is not on this cadence, the PR is a draft, the PR
    # lacks a required label; the cadence's exact nightly split leaves out per-commit tests.
    "cadence-excluded",
    "draft",
    "label-required",
    "per-commit-only",
    "nightly-only",
    "not-selected-by-labels",
    "stage-unaffected",
    "not-requested",
    # #12: a marker call the registry rejected; a registration with suite "" (run by path only)
    "invalid",
    "path-only",
)
SOURCES = ("history", "est_time")
#: Shorthands; a job's command may also be "auto" or a template, a test's a shorthand or a
#: template (see testfleet.commands; a template is checked like the config checks it).
COMMANDS = ("pytest", "python")


def _r(x: float, digits: int = 3) -> float:
    """Round so that float noise never changes the canonical bytes (whole numbers, the
    common case for estimates, skip the comparatively slow ``round``)."""
    f = float(x)
    return f if f.is_integer() else round(f, digits)


@dataclass(frozen=True)
class PlannedTest:
    """One file in a job, with the estimate the split was made with and where it came from."""

    file: str
    estimate: float
    source: str = "est_time"
    #: the command this file runs with when its stage's is ``auto`` (resolved when planning
    #: from the file's syntax tree); None: the job's command
    command: str | None = None
    # results (issue #14): why a flaky file is quarantined (runs, never blocks); "" if not
    quarantined: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "estimate": _r(self.estimate),
                               "source": self.source}
        if self.command is not None:
            out["command"] = self.command
        if self.quarantined:
            out["quarantined"] = self.quarantined
        return out


@dataclass(frozen=True)
class Job:
    """One shard of one stage on one runner class: the unit the CI engine schedules."""

    id: str
    stage: str
    backend: str
    runs_on: tuple[str, ...]
    container: str | None
    command: str
    shard: int
    shards: int
    wave: int
    needs: tuple[str, ...]
    estimate: float
    tests: tuple[PlannedTest, ...]
    env: dict[str, str] = field(default_factory=dict)
    # results (issue #14): a dormant stage's probe job (never blocks; not a fate)
    probe: bool = False
    # CI job settings (#11): the stage's container/setup/secrets/fail-fast for the CI
    # engine, and this shard's job timeout (sized from its estimate when configured).
    ci: JobCI = field(default_factory=JobCI)
    timeout_minutes: int = DEFAULT_JOB_TIMEOUT_MINUTES

    def to_json(self) -> dict[str, Any]:
        return {**({"probe": True} if self.probe else {}),
            "id": self.id,
            "stage": self.stage,
            "backend": self.backend,
            "runs_on": list(self.runs_on),
            "container": self.container,
            "command": self.command,
            "shard": self.shard,
            "shards": self.shards,
            "wave": self.wave,
            "needs": list(self.needs),
            "estimate": _r(self.estimate),
            "tests": [t.to_json() for t in self.tests],
            "env": dict(sorted(self.env.items())),
            "ci": self.ci.to_json(),
            "timeout_minutes": self.timeout_minutes,
        }

    def matrix_entry(self) -> dict[str, Any]:
        """The job as a CI matrix entry: everything but the file list (shards read
        their files from the plan file, so the matrix stays small)."""
        entry = self.to_json()
        entry.pop("tests")
        entry["n_tests"] = len(self.tests)
        return entry


@dataclass(frozen=True)
class StageSummary:
    """What happened to one configured stage under this trigger, and how well it split."""

    name: str
    backend: str
    status: str
    reason: str
    wave: int
    counts: dict[str, int]
    shards: int = 0
    makespan: float = 0.0
    lower_bound: float = 0.0
    ratio: float = 1.0
    history_share: float = 0.0
    hole: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": self.backend,
            "status": self.status,
            "reason": self.reason,
            "wave": self.wave,
            "counts": dict(sorted(self.counts.items())),
            "shards": self.shards,
            "makespan": _r(self.makespan),
            "lower_bound": _r(self.lower_bound),
            "ratio": _r(self.ratio, 4),
            "history_share": _r(self.history_share, 4),
            "hole": self.hole,
        }


@dataclass(frozen=True, order=True)
class Skipped:
    """A registration that is in no job, and the one reason why."""

    file: str
    backend: str
    suite: str
    reason: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "backend": self.backend,
            "suite": self.suite,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Plan:
    """Everything one trigger decided. ``digest`` is filled by :func:`seal`."""

    policy: dict[str, Any]
    jobs: tuple[Job, ...]
    stages: tuple[StageSummary, ...]
    skipped: tuple[Skipped, ...]
    warnings: tuple[str, ...]
    trigger: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    #: fork pull requests only: where the trust settings came from (planning/trust.py)
    trust: dict[str, Any] = field(default_factory=dict)
    #: canonical bytes of ``content()``, kept by :func:`seal` so writing the plan does
    #: not encode it twice; not an init field, so ``replace()`` never carries it over.
    _content_bytes: bytes | None = field(default=None, init=False, repr=False, compare=False)

    # -- derived views ---------------------------------------------------
    @property
    def holes(self) -> list[StageSummary]:
        return [s for s in self.stages if s.hole]

    @property
    def waves(self) -> int:
        return 1 + max((s.wave for s in self.stages), default=-1) if self.stages else 0

    def job(self, job_id: str) -> Job:
        for job in self.jobs:
            if job.id == job_id:
                return job
        known = ", ".join(j.id for j in self.jobs) or "none"
        raise UsageError(f"the plan has no job {job_id!r}; its jobs: {known}")

    # -- JSON ------------------------------------------------------------
    def content(self) -> dict[str, Any]:
        """The canonical content, without the digest."""
        content = {
            "schema": SCHEMA,
            "policy": self.policy,
            "trigger": self.trigger,
            "jobs": [j.to_json() for j in self.jobs],
            "stages": [s.to_json() for s in self.stages],
            "skipped": [s.to_json() for s in self.skipped],
            "warnings": list(self.warnings),
        }
        if self.trust:
            content["trust"] = self.trust
        return content

    def to_json(self) -> dict[str, Any]:
        data = self.content()
        data["digest"] = self.digest or content_digest(data)
        return data

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """Parse and validate a plan document; raises :class:`UsageError` naming the field."""
        return _parse_plan(data)


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def content_digest(content: dict[str, Any]) -> str:
    body = {k: v for k, v in content.items() if k != "digest"}
    return "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()


def seal(plan: Plan) -> Plan:
    """Return the plan with its digest set.

    The planner rounds every float when it builds the plan (see :func:`rounded`),
    so the sealed value equals what :func:`load_plan` reads back.
    """
    from dataclasses import replace

    body = _canonical(plan.content())
    sealed = replace(plan, digest="sha256:" + hashlib.sha256(body).hexdigest())
    object.__setattr__(sealed, "_content_bytes", body)
    return sealed


def rounded(x: float, digits: int = 3) -> float:
    """The planner's rounding: the same as the JSON form's, applied up front."""
    return _r(x, digits)


def plan_bytes(plan: Plan) -> bytes:
    """The one on-disk form: canonical JSON (sorted keys, compact) plus a newline."""
    body = plan._content_bytes
    if body is not None and plan.digest:
        # "digest" sorts first among the top-level keys, so the canonical form of the
        # sealed plan is the content's canonical form with the digest spliced in front.
        return b'{"digest":' + _canonical(plan.digest) + b"," + body[1:] + b"\n"
    return _canonical(plan.to_json()) + b"\n"


MAX_PLAN_BYTES = 256 << 20  # a 10,000-file plan is a few MiB


def load_plan(path: str | Path) -> Plan:
    """Read, validate and verify a plan file written by ``testfleet plan --format json``."""
    p = Path(path)
    try:
        raw = read_capped(p, MAX_PLAN_BYTES)
    except FileNotFoundError:
        raise UsageError(f"plan file {p} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"plan file {p} is a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot read plan file {p}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise UsageError(f"plan file {p} is not valid JSON: {exc}") from None
    except RecursionError:
        raise UsageError(f"plan file {p} is not a plan: JSON nested too deeply") from None
    try:
        raw.decode("utf-8").encode("utf-8")
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"plan file {p} holds a lone surrogate (\\ud800-style escape), "
                         "which no plan testfleet writes can hold") from None
    try:
        return _parse_plan(data)
    except UsageError as exc:
        raise UsageError(f"plan file {p}: {exc}") from None


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON, and no plan testfleet writes holds them."""
    raise ValueError(f"{name} is not a JSON number")


# -- validation -------------------------------------------------------------

T = TypeVar("T")


def _fail(where: str, message: str) -> UsageError:
    return UsageError(f"{where}: {message}")


def _get(obj: dict[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise _fail(where, f"missing field {key!r}")
    return obj[key]


def _typed(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise _fail(where, f"expected {what}, got {value!r}")
    if not isinstance(value, kind):
        raise _fail(where, f"expected {what}, got {type(value).__name__}")
    return value


# Far beyond any real estimate or ratio; a bigger one (1e308) is corruption, and timelines
# and timeouts computed from it overflow.
_MAX_NUMBER = 1e12


def _num(value: Any, where: str) -> float:
    v = float(_typed(value, (int, float), where, "a number"))
    if not math.isfinite(v) or v < 0 or v > _MAX_NUMBER:
        raise _fail(where, f"expected a finite number >= 0 (at most {_MAX_NUMBER:g}), "
                           f"got {value!r}")
    return v


def _int(value: Any, where: str, low: int = 0) -> int:
    v = _typed(value, int, where, "an integer")
    if v < low:
        raise _fail(where, f"expected an integer >= {low}, got {v}")
    return int(v)


def _str(value: Any, where: str, choices: tuple[str, ...] | None = None) -> str:
    v = _typed(value, str, where, "a string")
    if choices is not None and v not in choices:
        raise _fail(where, f"expected one of {', '.join(choices)}, got {v!r}")
    return str(v)


def _strs(value: Any, where: str) -> tuple[str, ...]:
    items = _typed(value, list, where, "a list")
    return tuple(_str(v, f"{where}[{i}]") for i, v in enumerate(items))


def _list(data: dict[str, Any], key: str, parse: Callable[[Any, str], T]) -> tuple[T, ...]:
    items = _typed(_get(data, key, key), list, key, "a list")
    return tuple(parse(item, f"{key}[{i}]") for i, item in enumerate(items))


def _obj(value: Any, where: str) -> dict[str, Any]:
    return dict(_typed(value, dict, where, "an object"))


def _command(value: Any, where: str, *, auto: bool) -> str:
    """A command from a plan: shorthand, template (checked as the config checks it), or
    ``auto`` where allowed. A plan is data and may lie: it never reaches a shell."""
    from testfleet.commands import AUTO, command_problem

    v = _str(value, where)
    if v == AUTO and not auto:
        raise _fail(where, "a file's command cannot be 'auto' (planning resolves it)")
    problem = command_problem(v)
    if problem:
        raise _fail(where, problem)
    return v


def _parse_test(value: Any, where: str) -> PlannedTest:
    d = _obj(value, where)
    command = d.get("command")
    return PlannedTest(
        file=_str(_get(d, "file", where), f"{where}.file"),
        estimate=_num(_get(d, "estimate", where), f"{where}.estimate"),
        source=_str(_get(d, "source", where), f"{where}.source", SOURCES),
        command=None if command is None else _command(command, f"{where}.command", auto=False),
        quarantined=_str(d.get("quarantined", ""), f"{where}.quarantined"),
    )


def _parse_job(value: Any, where: str) -> Job:
    d = _obj(value, where)
    container = _get(d, "container", where)
    env = _obj(d.get("env", {}), f"{where}.env")
    job = Job(
        id=_str(_get(d, "id", where), f"{where}.id"),
        stage=_str(_get(d, "stage", where), f"{where}.stage"),
        backend=_str(_get(d, "backend", where), f"{where}.backend"),
        runs_on=_strs(_get(d, "runs_on", where), f"{where}.runs_on"),
        container=None if container is None else _str(container, f"{where}.container"),
        command=_command(_get(d, "command", where), f"{where}.command", auto=True),
        shard=_int(_get(d, "shard", where), f"{where}.shard", 1),
        shards=_int(_get(d, "shards", where), f"{where}.shards", 1),
        wave=_int(_get(d, "wave", where), f"{where}.wave"),
        needs=_strs(_get(d, "needs", where), f"{where}.needs"),
        estimate=_num(_get(d, "estimate", where), f"{where}.estimate"),
        tests=tuple(
            _parse_test(t, f"{where}.tests[{i}]")
            for i, t in enumerate(_typed(_get(d, "tests", where), list, f"{where}.tests", "a list"))
        ),
        env={k: _str(v, f"{where}.env.{k}") for k, v in env.items()},
        probe=_typed(d.get("probe", False), bool, f"{where}.probe", "true or false"),
        timeout_minutes=_int(d.get("timeout_minutes", DEFAULT_JOB_TIMEOUT_MINUTES),
                             f"{where}.timeout_minutes", 1),
    )
    job = replace(job, ci=parse_job_ci(d.get("ci", {}), job.env, f"{where}.ci"))
    if job.shard > job.shards:
        raise _fail(where, f"shard {job.shard} is beyond shards {job.shards}")
    if not job.tests:
        raise _fail(where, "a job must hold at least one test")
    if job.command == "auto" and any(t.command is None for t in job.tests):
        raise _fail(where, "an 'auto' job names each file's command")
    return job


def _parse_stage(value: Any, where: str) -> StageSummary:
    d = _obj(value, where)
    counts = _obj(_get(d, "counts", where), f"{where}.counts")
    return StageSummary(
        name=_str(_get(d, "name", where), f"{where}.name"),
        backend=_str(_get(d, "backend", where), f"{where}.backend"),
        status=_str(_get(d, "status", where), f"{where}.status", STATUSES),
        reason=_str(_get(d, "reason", where), f"{where}.reason"),
        wave=_int(_get(d, "wave", where), f"{where}.wave"),
        counts={k: _int(v, f"{where}.counts.{k}") for k, v in counts.items()},
        shards=_int(d.get("shards", 0), f"{where}.shards"),
        makespan=_num(d.get("makespan", 0.0), f"{where}.makespan"),
        lower_bound=_num(d.get("lower_bound", 0.0), f"{where}.lower_bound"),
        ratio=_num(d.get("ratio", 1.0), f"{where}.ratio"),
        history_share=_num(d.get("history_share", 0.0), f"{where}.history_share"),
        hole=bool(_typed(d.get("hole", False), bool, f"{where}.hole", "true or false")),
    )


def _parse_skipped(value: Any, where: str) -> Skipped:
    d = _obj(value, where)
    return Skipped(
        file=_str(_get(d, "file", where), f"{where}.file"),
        backend=_str(_get(d, "backend", where), f"{where}.backend"),
        suite=_str(_get(d, "suite", where), f"{where}.suite"),
        reason=_str(_get(d, "reason", where), f"{where}.reason", REASONS),
        detail=_str(_get(d, "detail", where), f"{where}.detail"),
    )


def _parse_plan(data: Any) -> Plan:
    if not isinstance(data, dict):
        raise UsageError(f"a plan must be a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise UsageError(
            f"unsupported plan schema {schema!r} (this testfleet reads {SCHEMA!r}); "
            "re-run 'testfleet plan' with this version"
        )
    digest = data.get("digest")
    if not isinstance(digest, str) or not digest:
        raise UsageError("missing field 'digest'")
    try:
        expected = content_digest(data)
    except (UnicodeEncodeError, ValueError) as exc:  # a lone surrogate, NaN: not a plan's
        raise UsageError(f"not a plan testfleet wrote: {exc}") from None
    if digest != expected:
        raise UsageError(
            f"digest mismatch (file says {digest[:19]}…, content is {expected[:19]}…): "
            "the plan was edited or damaged after it was written"
        )
    policy = _obj(_get(data, "policy", "plan"), "policy")
    trigger = _obj(data.get("trigger", {}), "trigger")
    plan = Plan(
        policy=policy,
        trigger=trigger,
        jobs=_list(data, "jobs", _parse_job),
        stages=_list(data, "stages", _parse_stage),
        skipped=_list(data, "skipped", _parse_skipped),
        warnings=_strs(_get(data, "warnings", "plan"), "warnings"),
        digest=digest,
        trust=_obj(data.get("trust", {}), "trust"),
    )
    ids = [j.id for j in plan.jobs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UsageError(f"jobs: duplicate job id(s) {', '.join(dupes)}")
    return plan
