"""The plan file (``testfleet.plan/1``): what ``testfleet plan`` writes and every shard of
a CI run executes from.

A plan file crosses a trust boundary (it is an artifact a CI job downloads, and it may
have been edited), so :mod:`testfleet.planning.plan_file` reads it back through these
same types, strictly: no coercion (``"1"`` is not a shard, ``true`` is not a count), no
unknown fields (a newer testfleet's plan is refused, not half-read), numbers finite and
bounded, and the invariants below. The planner's dataclasses
(:mod:`testfleet.planning.model`) are what flows; their ``to_json`` methods return these
types.

Keys that are not required are written only when they say something (a job's ``probe``,
a file's ``command``), or were added after plans without them were written; a reader
takes them as absent.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError
from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import boundary
from testfleet.documents.vocabulary import (
    MAX_JOB_TIMEOUT_MINUTES,
    Event,
    Reason,
    Source,
    StageCount,
    Status,
)

#: Far beyond any real estimate or ratio; a bigger one (1e308) is corruption, and
#: timelines and timeouts computed from it overflow.
MAX_NUMBER = 1e12

Number = Annotated[float, Field(ge=0, le=MAX_NUMBER, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]


def problem(message: str) -> PydanticCustomError:
    """A plan-level problem, reported with its path like a type error."""
    return PydanticCustomError("plan", message)


def _command(value: str, *, auto: bool) -> None:
    """A plan's command is a shorthand, a template (checked as the config checks it) or
    ``auto`` where allowed. A plan is data and may lie: it never reaches a shell."""
    from testfleet.commands import AUTO, command_problem

    if value == AUTO and not auto:
        raise problem("a file's command cannot be 'auto' (planning resolves it)")
    found = command_problem(value)
    if found:
        raise problem(found)


def _file_command(value: str) -> str:
    _command(value, auto=False)
    return value


def _job_command(value: str) -> str:
    _command(value, auto=True)
    return value


@boundary
class PlannedTestDoc(TypedDict):
    """One file in a job, with the estimate the split was made with."""

    file: str
    estimate: Number
    source: Source
    command: NotRequired[Annotated[str, AfterValidator(_file_command)]]
    """The file's own command when its stage's is ``auto``."""
    quarantined: NotRequired[str]
    """Why a flaky file is quarantined (it runs, its failure does not block)."""


@boundary
class ContainerDoc(TypedDict):
    image: Annotated[str, Field(min_length=1)]
    options: NotRequired[str]
    volumes: NotRequired[list[str]]


@boundary
class CheckoutDoc(TypedDict):
    """One more repository the job checks out."""

    repository: str
    ref: NotRequired[str]
    path: str
    token_secret: NotRequired[str | None]


@boundary
class JobCIDoc(TypedDict):
    """The stage's settings for the CI engine's job."""

    container: NotRequired[ContainerDoc | None]
    setup: NotRequired[list[str]]
    secrets: NotRequired[list[str]]
    fail_fast: NotRequired[bool | None]
    max_parallel: NotRequired[Positive | None]
    timeout_minutes: NotRequired[Annotated[int, Field(ge=1, le=MAX_JOB_TIMEOUT_MINUTES)] | None]
    timeout_factor: NotRequired[Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] | None]
    max_attempts: NotRequired[Annotated[int, Field(ge=1, le=10)] | None]
    retry_wait: NotRequired[Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)] | None]
    python: NotRequired[str | None]
    uv: NotRequired[bool]
    checkouts: NotRequired[list[CheckoutDoc]]


@boundary
class QueueDoc(TypedDict):
    """A queue lane's job (#40): one of the lane's runners, pulling its files from one
    PostgreSQL queue. The lane's jobs are a capacity (how many runners pull), not a
    partition: a job's ``tests`` are the share a static split would give it, and any of
    the lane's files may run on any of its runners."""

    execution: Literal["queue"]
    lease_seconds: Annotated[float, Field(ge=5, le=3600, allow_inf_nan=False)]
    """How long a claim holds without a heartbeat (the runner beats every third of it)."""
    infra_retries: Annotated[int, Field(ge=0, le=3)]
    """Times a file whose failure has an infrastructure signature goes back to the queue
    for another runner (a test failure never does)."""
    files: Positive
    """How many files the lane queues (every job of the lane holds its share)."""


@boundary
class JobDoc(TypedDict):
    """One shard of one stage on one runner class: the unit the CI engine schedules."""

    id: str
    stage: str
    backend: str
    runs_on: list[str]
    container: str | None
    command: Annotated[str, AfterValidator(_job_command)]
    shard: Positive
    shards: Positive
    wave: Count
    needs: list[str]
    estimate: Number
    tests: list[PlannedTestDoc]
    env: NotRequired[dict[str, str]]
    probe: NotRequired[bool]
    """A probe job: of a dormant stage, or of a lane whose breaker is open (it never blocks)."""
    breaker: NotRequired[bool]
    """A probe of a lane whose runner-class breaker is open (#41): its result closes the
    breaker after ``close_after`` clean runs in a row."""
    ci: NotRequired[JobCIDoc]
    timeout_minutes: NotRequired[Positive]
    variant: NotRequired[str]
    """The stage variant this job runs (only for a stage with variants)."""
    queue: NotRequired[QueueDoc]
    """Queue mode (#40): the job is one of its lane's runners; absent in shard mode."""


def _check_job(job: JobDoc) -> JobDoc:
    if job["shard"] > job["shards"]:
        raise problem(f"shard {job['shard']} is beyond shards {job['shards']}")
    if not job["tests"]:
        raise problem("a job must hold at least one test")
    if job["command"] == "auto" and any("command" not in t for t in job["tests"]):
        raise problem("an 'auto' job names each file's command")
    return job


@boundary
class StageDoc(TypedDict):
    """What happened to one configured stage (or variant) under this trigger."""

    name: str
    backend: str
    status: Status
    reason: str
    wave: Count
    counts: dict[StageCount, Count]
    """Its registrations (registered, enabled, scheduled, quarantined) and how many of
    them each skip reason took."""
    shards: NotRequired[Count]
    makespan: NotRequired[Number]
    lower_bound: NotRequired[Number]
    ratio: NotRequired[Number]
    history_share: NotRequired[Number]
    hole: NotRequired[bool]
    variant: NotRequired[str]


@boundary
class SkippedDoc(TypedDict):
    """A registration that is in no job, and the one reason why."""

    file: str
    backend: str
    suite: str
    reason: Reason
    detail: str
    variant: NotRequired[str]


# The docstring is the published schema's description (testfleet schema plan|report), so it
# keeps its words; Policy is testfleet.planning.policy.Policy since the floors (#37).
@boundary
class PolicyDoc(TypedDict):
    """What the trigger resolved to (:class:`testfleet.policy.Policy`)."""

    event: Event
    cadence: str
    include_labels: list[str]
    requested_labels: list[str]
    scope: str | None
    admit_nightly: bool
    bypass_fastfail: bool
    write_baseline: bool
    broad: bool
    fork: bool
    authorized: bool
    authorized_by: str | None
    notes: list[str]
    pr_labels: list[str]
    draft: bool
    exact_nightly: bool


@boundary
class ChangesDoc(TypedDict):
    """The diff a pull request's plan was pruned with."""

    source: str
    paths: Count
    error: str | None


@boundary
class TriggerFlagsDoc(TypedDict):
    """The CI event as plain values (:class:`testfleet.planning.policy.Trigger`)."""

    event: Event
    labels: list[str]
    """The pull request's labels (those that are valid label names)."""
    cadence: str | None
    schedule: str | None
    fork: bool
    match_all_labels: bool
    draft: bool


@boundary
class TriggerDoc(TriggerFlagsDoc):
    """The trigger as the plan was asked for it."""

    files: list[str]
    stages: list[str]
    include_disabled: bool
    changes: ChangesDoc | None


@boundary
class TrustDoc(TypedDict):
    """Fork pull requests only: where the trust settings came from."""

    source: Literal["base", "unavailable"]
    commit: str | None
    config: str | None
    settings: list[str]
    problem: str | None


@boundary
class PlanInputsDoc(TypedDict):
    """What the plan pins about the history it was made from."""

    history: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


@boundary
class RunnersDoc(TypedDict):
    """Whether the plan knew which self-hosted runners were online (#41, ``plan --runners``)."""

    checked: bool
    """False: runner availability was not checked; jobs may wait for runners that are not there."""
    source: NotRequired[str]
    """Where the runners were read from."""
    online: NotRequired[int]
    total: NotRequired[int]
    offline_lanes: NotRequired[list[str]]
    """Lanes no online runner serves (their registrations' fate: ``no-runner-online``)."""


class PlanContentDoc(TypedDict):
    """A plan without its digest: what the digest is computed over."""

    schema: Literal["testfleet.plan/1"]
    policy: PolicyDoc
    trigger: NotRequired[TriggerDoc]
    jobs: list[Annotated[JobDoc, AfterValidator(_check_job)]]
    stages: list[StageDoc]
    skipped: list[SkippedDoc]
    warnings: list[str]
    trust: NotRequired[TrustDoc]
    inputs: NotRequired[PlanInputsDoc | None]
    runners: NotRequired[RunnersDoc]


@boundary
class PlanDoc(PlanContentDoc):
    """``testfleet plan --format json``: the plan file every shard runs from."""

    digest: Annotated[str, Field(min_length=1)]


def unique_job_ids(plan: PlanDoc) -> PlanDoc:
    ids = [j["id"] for j in plan["jobs"]]
    dupes = sorted({i for i in ids if ids.count(i) > 1}) if len(set(ids)) < len(ids) else []
    if dupes:
        raise problem(f"duplicate job id(s) {', '.join(dupes)}")
    return plan

