"""``testfleet report --format json`` (``testfleet.report/1``): everything the report
shows, for tools. Consumers should check ``schema``; testfleet adds keys without raising
its number, so a reader that validates with this schema uses the one of its version."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import closed
from testfleet.documents.plan import PolicyDoc
from testfleet.documents.results import FlakyVerdictDoc, ResultFileDoc
from testfleet.documents.vocabulary import (
    AgeStatus,
    GateMode,
    RefKind,
    ResultOutcome,
    Source,
    State,
    Status,
)

#: why a stage or backend has nothing that can run
HoleCause = Literal["dormant", "all-stages-dormant", "all-invalid", "no-registrations",
                    "all-disabled", "nothing-scheduled",
                    # #41: the lane's runner-class breaker is open (only its probe runs)
                    "runner-broken"]

CountsDoc = TypedDict("CountsDoc", {
    "enabled": int, "label-gated": int, "nightly-only": int, "at-risk": int, "disabled": int,
    "active": int, "total": int, "est_seconds": float})
"""Registrations by category (the five categories are exclusive and sum to ``total``;
``active`` is every one but ``disabled``) and their literal est_time, in seconds."""
closed(CountsDoc)


@closed
class ReferenceDoc(TypedDict):
    """A tracking reference cited in a reason: ``#123``, ``owner/repo#123``, a URL."""

    kind: RefKind
    text: str
    """The citation exactly as written."""
    number: int | None
    repo: str | None
    url: str | None


@closed
class HoleDoc(TypedDict):
    """A stage or backend with zero registrations that can run."""

    kind: Literal["stage", "backend"]
    name: str
    cause: HoleCause
    detail: str
    lost: int
    """Registrations that would run but for this hole."""


@closed
class LastRunDoc(TypedDict):
    """A stage's newest run: every result that shares its CI run id (or commit)."""

    ts: float
    when: str
    outcome: Literal["PASSED", "FAILED"]
    ci_run_id: str | None
    commit: str | None
    url: str | None


@closed
class HealthDoc(TypedDict):
    """A stage's health from its recorded results."""

    state: State
    failing_files: int
    streak: int
    """The longest run of failures in a row of one of its failing files."""
    streak_complete: bool
    """False: every run read of that file failed (the streak is a lower bound)."""
    since: float | None
    file: str | None
    summary: str
    last_run: LastRunDoc


@closed
class StageRowDoc(TypedDict):
    """One row of the coverage matrix."""

    name: str
    backend: str
    status: Literal["active", "dormant", "unconfigured"]
    """The configuration's: ``dormant`` (config ``disabled``), ``unconfigured``
    (registrations name a stage the config does not declare)."""
    reason: str | None
    references: list[ReferenceDoc]
    trusted_only: bool
    runs_on: list[str]
    counts: CountsDoc
    config_line: int
    health: HealthDoc | None
    """What its results say (null: none recorded)."""


@closed
class DormantDoc(TypedDict):
    """A dormant stage and what it holds back."""

    name: str
    backend: str
    reason: str | None
    references: list[ReferenceDoc]
    registrations: int
    would_run: int


@closed
class GroupDoc(TypedDict):
    """Coverage per backend or per label."""

    name: str
    counts: CountsDoc
    scheduled: int
    """Registrations some cadence can schedule (dormant stages excluded)."""
    stages: list[str]


@closed
class AgeDoc(TypedDict):
    """How long a registration has been disabled, from git."""

    days: int | None
    status: AgeStatus
    note: str
    changed: str | None
    """The ISO date of the change that disabled it, when known."""
    commit: str | None
    lower_bound: bool
    """The history is shallow: at least this old."""


@closed
class ExpiryDoc(TypedDict):
    """A date named in the reason ("until 2026-09-01")."""

    date: str | None
    error: str | None
    expired: bool
    days_left: int | None


@closed
class LedgerEntryDoc(TypedDict):
    """One disabled registration, with what it takes to get it back."""

    file: str
    line: int
    reason_line: int
    """The line of ``disabled=`` (a multi-line call), else ``line``."""
    backend: str
    suite: str
    labels: list[str]
    reason: str
    references: list[ReferenceDoc]
    age: AgeDoc
    expiry: ExpiryDoc | None
    shared_reason: int
    """How many disabled registrations carry exactly this reason."""
    stage_dormant: bool
    runners: NotRequired[list[str]]
    """Runner label patterns (fnmatch) it is disabled on; absent when it is disabled on
    every runner."""


@closed
class DriftDoc(TypedDict):
    """A literal ``est_time`` far from what history measured."""

    file: str
    stage: str
    literal: float
    measured: float
    samples: int
    factor: float
    """measured / literal (above 1: slower than declared)."""


@closed
class GateRowDoc(TypedDict):
    """One gated (test, metric): the verdict of the file's last gated run and its
    stored baseline runs."""

    file: str
    backend: str
    suite: str
    metric: str
    coordinates: int
    last_verdict: Literal["PASS", "FAIL", "ERROR", "INACTIVE", "UNTRUSTED"] | None
    """``UNTRUSTED``: only from a stored baseline run that is not trusted."""
    last_run: str | None
    last_mode: GateMode | None
    last_source: Literal["result", "baseline"] | None
    """Where the verdict comes from: the file's recorded result, else its last stored
    baseline run."""
    last_ts: float | None
    last_ci_run_id: str | None
    last_url: str | None
    runs: int
    untrusted_runs: int


@closed
class TrendPointDoc(TypedDict):
    when: str
    value: float | None
    """null: the value was not finite."""
    trusted: bool
    run: str


@closed
class TrendDoc(TypedDict):
    """A metric's values for one coordinate over runs, with the current band."""

    file: str
    metric: str
    step: int
    label: str
    reference: float | None
    band: Annotated[list[float], Field(min_length=2, max_length=2)] | None
    """The corridor around the reference: [lower, upper]."""
    points: list[TrendPointDoc]


@closed
class HistorySectionDoc(TypedDict):
    """What the history database contributed; ``note`` says why a part is missing."""

    available: bool
    note: str
    drift_factor: float
    drift: list[DriftDoc]
    gates: list[GateRowDoc]
    trends: list[TrendDoc]


@closed
class ShardTestDoc(TypedDict):
    file: str
    estimate: float
    source: Source


@closed
class ShardDoc(TypedDict):
    shard: int
    job: str
    estimate: float
    tests: list[ShardTestDoc]


@closed
class TimelineDoc(TypedDict):
    """The plan's shards of one stage, estimated, against the lower bound."""

    stage: str
    backend: str
    status: Status
    reason: str | None
    makespan: float
    lower_bound: float
    ratio: float | None
    """makespan / lower bound (1.0 is a perfect split)."""
    shards: list[ShardDoc]


@closed
class PlanSectionDoc(TypedDict):
    """The plan given with ``--plan``."""

    source: str
    digest: str | None
    policy: PolicyDoc
    warnings: list[str]
    stages: list[TimelineDoc]


@closed
class ResultStageDoc(TypedDict):
    stage: str
    files: int
    runs: int
    passes: int
    pass_rate: float
    last_outcome: Literal["PASSED", "FAILED"]
    """Of the stage's newest run: FAILED if any file failed in it."""
    last_run_id: str | None


@closed
class FailingDoc(TypedDict):
    """A file whose last run failed: since when, and the streak's first failing commit."""

    stage: str
    file: str
    streak: int
    since: float
    complete: bool
    """False: every run read failed (the streak may be older)."""
    first_commit: str | None
    first_run_id: str | None
    last_reason: str | None
    last_outcome: ResultOutcome
    last_ts: float
    last_ci_run_id: str | None
    last_url: str | None


@closed
class ProbeFileDoc(TypedDict):
    file: str
    strip: str


@closed
class ReportProbeDoc(TypedDict):
    """A dormant stage's probe history."""

    stage: str
    reason: str
    restore_after: int
    clean_streak: int
    ready: bool
    files: list[ProbeFileDoc]


@closed
class ReportResultsDoc(TypedDict):
    """Pass rates, failing files, strips, flaky files and probes."""

    available: bool
    note: str
    runs: int
    stages: list[ResultStageDoc]
    failing: list[FailingDoc]
    files: list[ResultFileDoc]
    flaky: list[FlakyVerdictDoc]
    probes: list[ReportProbeDoc]


@closed
class ReportDoc(TypedDict):
    """The disabled ledger, coverage, holes, shard balance, results and metric trends."""

    schema: Literal["testfleet.report/1"]
    project: str
    config_file: str
    generated: str
    """When (ISO 8601, UTC)."""
    headline: str
    failing_stages: list[str]
    broken_stages: list[str]
    totals: CountsDoc
    runnable: int
    holes: list[HoleDoc]
    stages: list[StageRowDoc]
    dormant: list[DormantDoc]
    backends: list[GroupDoc]
    labels: list[GroupDoc]
    ledger: list[LedgerEntryDoc]
    git: str
    """"repository", "shallow repository", or why ages are unknown."""
    results: ReportResultsDoc | None
    history: HistorySectionDoc
    plan: PlanSectionDoc | None
    notes: list[str]
    findings: list[str]
    """The check rules' findings, one line each."""
