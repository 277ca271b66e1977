"""The plan as data: jobs, stage summaries, skipped registrations, and its one JSON form.

A plan file is what every shard of a CI run executes from, so it must be
byte-identical for identical inputs (sorted keys, no timestamps) and must refuse
to load when it was damaged or edited (``digest`` over the canonical content).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testfleet.canonical import canonical_bytes
from testfleet.documents.vocabulary import REASONS as REASONS  # the plan's vocabulary
from testfleet.documents.vocabulary import SCHEMA as SCHEMA
from testfleet.documents.vocabulary import SOURCES as SOURCES
from testfleet.documents.vocabulary import STATUSES as STATUSES
from testfleet.errors import UsageError
from testfleet.fileio import read_capped
from testfleet.planning.jobci import DEFAULT_JOB_TIMEOUT_MINUTES, Checkout, Container, JobCI

if TYPE_CHECKING:
    from testfleet.documents.plan import (
        JobDoc,
        PlanContentDoc,
        PlanDoc,
        PlanInputsDoc,
        PlannedTestDoc,
        PolicyDoc,
        QueueDoc,
        RunnersDoc,
        SkippedDoc,
        StageDoc,
        TriggerDoc,
        TrustDoc,
    )
    from testfleet.documents.vocabulary import Reason, Source, StageCount, Status

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
    source: Source = "est_time"
    #: the command this file runs with when its stage's is ``auto`` (resolved when planning
    #: from the file's syntax tree); None: the job's command
    command: str | None = None
    # results (issue #14): why a flaky file is quarantined (runs, never blocks); "" if not
    quarantined: str = ""

    def to_json(self) -> PlannedTestDoc:
        out: PlannedTestDoc = {"file": self.file, "estimate": _r(self.estimate),
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
    # Stage variants (#12): the variant this job runs ("" for a stage without variants).
    variant: str = ""
    # Elastic execution (#40): a queue lane's jobs are runners pulling the lane's files
    # (``tests`` is this runner's planned share, not its partition); None: shard mode.
    queue: QueueDoc | None = None
    # The runner-class breaker (#41): a probe job of a lane whose breaker is open.
    breaker: bool = False

    @property
    def lane(self) -> str:
        """``<stage>.<variant>``, or the stage: what the job's history is keyed by."""
        return f"{self.stage}.{self.variant}" if self.variant else self.stage

    def to_json(self) -> JobDoc:
        out: JobDoc = {
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
        if self.probe:
            out["probe"] = True
        if self.breaker:
            out["breaker"] = True
        if self.variant:
            out["variant"] = self.variant
        if self.queue is not None:
            out["queue"] = self.queue
        return out

    def matrix_entry(self) -> dict[str, Any]:
        """The job as a CI matrix entry: everything but the file list (shards read
        their files from the plan file, so the matrix stays small)."""
        entry: dict[str, Any] = dict(self.to_json())
        entry.pop("tests")
        entry["n_tests"] = len(self.tests)
        # a generated job that runs several lanes picks each entry's runners by it
        entry["lane"] = self.lane
        return entry


@dataclass(frozen=True)
class StageSummary:
    """What happened to one configured stage under this trigger, and how well it split."""

    name: str
    backend: str
    status: Status
    reason: str
    wave: int
    counts: dict[StageCount, int]
    shards: int = 0
    makespan: float = 0.0
    lower_bound: float = 0.0
    ratio: float = 1.0
    history_share: float = 0.0
    hole: bool = False
    # Stage variants (#12): one summary per variant of a stage with variants.
    variant: str = ""

    @property
    def lane(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name

    def to_json(self) -> StageDoc:
        out: StageDoc = {
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
        if self.variant:
            out["variant"] = self.variant
        return out


@dataclass(frozen=True, order=True)
class Skipped:
    """A registration that is in no job, and the one reason why."""

    file: str
    backend: str
    suite: str
    reason: Reason
    detail: str
    # Stage variants (#12): a registration of a stage with variants has one fate per variant.
    variant: str = ""

    @property
    def lane(self) -> str:
        return f"{self.suite}.{self.variant}" if self.variant else self.suite

    def to_json(self) -> SkippedDoc:
        out: SkippedDoc = {
            "file": self.file,
            "backend": self.backend,
            "suite": self.suite,
            "reason": self.reason,
            "detail": self.detail,
        }
        if self.variant:
            out["variant"] = self.variant
        return out


@dataclass(frozen=True)
class Plan:
    """Everything one trigger decided. ``digest`` is filled by :func:`seal`."""

    policy: PolicyDoc
    jobs: tuple[Job, ...]
    stages: tuple[StageSummary, ...]
    skipped: tuple[Skipped, ...]
    warnings: tuple[str, ...]
    trigger: TriggerDoc | None = None
    digest: str = ""
    #: fork pull requests only: where the trust settings came from (planning/trust.py)
    trust: TrustDoc | None = None
    #: what the plan pins about the history it was made from (planning/inputs.py):
    #: ``{"history": "sha256:..."}``; None in plans written before it existed
    inputs: PlanInputsDoc | None = None
    #: whether runner availability was checked (#41); None: no lane runs on self-hosted runners
    runners: RunnersDoc | None = None
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
    def content(self) -> PlanContentDoc:
        """The canonical content, without the digest."""
        content: PlanContentDoc = {
            "schema": SCHEMA,
            "policy": self.policy,
            "jobs": [j.to_json() for j in self.jobs],
            "stages": [s.to_json() for s in self.stages],
            "skipped": [s.to_json() for s in self.skipped],
            "warnings": list(self.warnings),
        }
        if self.trigger is not None:
            content["trigger"] = self.trigger
        if self.trust:
            content["trust"] = self.trust
        if self.inputs:
            content["inputs"] = self.inputs
        if self.runners is not None:
            content["runners"] = self.runners
        return content

    def to_json(self) -> PlanDoc:
        content = self.content()
        return {**content, "digest": self.digest or content_digest(content)}

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """Parse and validate a plan document; raises :class:`UsageError` naming the field."""
        return _parse_plan(data)


_canonical = canonical_bytes


def content_digest(content: Mapping[str, Any]) -> str:
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


# -- reading ---------------------------------------------------------------


def _parse_plan(data: Any) -> Plan:
    """Check the schema and the digest over the raw document, validate its shape through
    :class:`~testfleet.planning.plan_file.PlanFile`, and build the planner's dataclasses."""
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
    from testfleet.planning.plan_file import validate_plan_document  # pydantic: only to read a plan

    doc = validate_plan_document(data)
    return Plan(
        policy=doc["policy"],
        trigger=doc.get("trigger"),
        jobs=tuple(_job(j) for j in doc["jobs"]),
        stages=tuple(_stage(s) for s in doc["stages"]),
        skipped=tuple(Skipped(s["file"], s["backend"], s["suite"], s["reason"], s["detail"],
                              s.get("variant", "")) for s in doc["skipped"]),
        warnings=tuple(doc["warnings"]),
        digest=doc["digest"],
        trust=doc.get("trust"),
        inputs=doc.get("inputs"),
        runners=doc.get("runners"),
    )


def _stage(s: StageDoc) -> StageSummary:
    return StageSummary(
        name=s["name"], backend=s["backend"], status=s["status"], reason=s["reason"],
        wave=s["wave"], counts=dict(s["counts"]), shards=s.get("shards", 0),
        makespan=s.get("makespan", 0.0), lower_bound=s.get("lower_bound", 0.0),
        ratio=s.get("ratio", 1.0), history_share=s.get("history_share", 0.0),
        hole=s.get("hole", False), variant=s.get("variant", ""))


def _job(j: JobDoc) -> Job:
    """A job as read (keys a plan may leave out take the defaults a writer leaves out)."""
    c = j.get("ci", {})
    box = c.get("container")
    container = (Container(box["image"], box.get("options", ""), tuple(box.get("volumes", [])))
                 if box is not None else None)
    env = dict(j.get("env", {}))
    return Job(
        id=j["id"], stage=j["stage"], backend=j["backend"], runs_on=tuple(j["runs_on"]),
        container=j["container"], command=j["command"], shard=j["shard"], shards=j["shards"],
        wave=j["wave"], needs=tuple(j["needs"]), estimate=j["estimate"],
        tests=tuple(PlannedTest(t["file"], t["estimate"], t["source"], t.get("command"),
                                t.get("quarantined", "")) for t in j["tests"]),
        env=env, probe=j.get("probe", False), breaker=j.get("breaker", False),
        timeout_minutes=j.get("timeout_minutes", DEFAULT_JOB_TIMEOUT_MINUTES),
        variant=j.get("variant", ""), queue=j.get("queue"),
        ci=JobCI(container=container, setup=tuple(c.get("setup", [])),
                 secrets=tuple(c.get("secrets", [])), fail_fast=c.get("fail_fast"),
                 max_parallel=c.get("max_parallel"), timeout_minutes=c.get("timeout_minutes"),
                 timeout_factor=c.get("timeout_factor"), env=env,
                 max_attempts=c.get("max_attempts"), retry_wait=c.get("retry_wait"),
                 python=c.get("python"), uv=c.get("uv", False),
                 checkouts=tuple(Checkout(k["repository"], k["path"], k.get("ref", ""),
                                          k.get("token_secret")) for k in c.get("checkouts", []))),
    )
