"""The report's data: everything every renderer shows, computed once, rendered many ways.

Plain frozen dataclasses with no I/O; :mod:`testfleet.report.collect` builds them and
the renderers (text, markdown, json, html) only format them, so all four formats say
the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from testfleet.report.health import StageHealth
from testfleet.report.links import RepoLinks
from testfleet.report.references import Reference

if TYPE_CHECKING:
    from testfleet.documents.plan import PolicyDoc
    from testfleet.documents.report import CountsDoc, HoleCause
    from testfleet.documents.vocabulary import AgeStatus, GateMode, Source, Status
    from testfleet.report.results import ResultsSection

SCHEMA: Final = "testfleet.report/1"

Category = Literal["enabled", "label-gated", "nightly-only", "at-risk", "disabled"]
CATEGORIES: tuple[Category, ...] = ("enabled", "label-gated", "nightly-only", "at-risk", "disabled")
CATEGORY_HELP: dict[str, str] = {
    "at-risk": "quarantined as flaky (#14): it runs, but its failure does not fail the job, so "
               "it counts as at risk, never as healthy coverage",
    "enabled": "runs on every regular run (no labels, not nightly-only)",
    "label-gated": "runs when one of its labels is selected (PR label or broad cadence)",
    "nightly-only": "nightly=True: runs only on cadences that admit nightly tests",
    "disabled": "disabled=... in the test file: never scheduled",
}


@dataclass(frozen=True)
class Counts:
    """Registrations by category; the categories are exclusive and sum to ``total``."""

    enabled: int = 0
    label_gated: int = 0
    nightly_only: int = 0
    disabled: int = 0
    est_seconds: float = 0.0
    at_risk: int = 0  # quarantined: scheduled, but its failure does not block

    @property
    def total(self) -> int:
        return self.enabled + self.label_gated + self.nightly_only + self.at_risk + self.disabled

    @property
    def active(self) -> int:
        """Registrations that some cadence schedules (everything but disabled)."""
        return self.enabled + self.label_gated + self.nightly_only + self.at_risk

    def get(self, category: str) -> int:
        return {"enabled": self.enabled, "label-gated": self.label_gated,
                "nightly-only": self.nightly_only, "at-risk": self.at_risk,
                "disabled": self.disabled}[category]

    def to_json(self) -> CountsDoc:
        return {"enabled": self.enabled, "label-gated": self.label_gated,
                "nightly-only": self.nightly_only, "at-risk": self.at_risk,
                "disabled": self.disabled,
                "active": self.active, "total": self.total,
                "est_seconds": round(self.est_seconds, 3)}


@dataclass(frozen=True)
class StageRow:
    """One row of the coverage matrix.

    ``status`` is ``active`` (scheduled when selected), ``dormant`` (config
    ``disabled``: nothing scheduled) or ``unconfigured`` (registrations name a
    suite the config does not declare).
    """

    name: str
    backend: str
    status: Literal["active", "dormant", "unconfigured"]
    counts: Counts
    reason: str | None = None
    references: tuple[Reference, ...] = ()
    trusted_only: bool = False
    runs_on: tuple[str, ...] = ()
    config_line: int = 0  # line of the stage's ``disabled`` key (or header) in the config
    # #12: the row's table in the config ("stages.<stage>.variants.<variant>" for a variant
    # lane, whose name is "<stage>.<variant>"); "" means "stages.<name>"
    config_key: str = ""


@dataclass(frozen=True)
class BrokenLane:
    """A lane its runner-class breaker holds back (#41): a coverage hole like a dormant
    stage, that comes back by itself when its probe passes."""

    lane: str
    backend: str
    detail: str  # the incident (or who forced it), since when, the runs
    opened_at: float | None
    held_runs: int
    held_registrations: int
    lost: int  # registrations that would run but for it


@dataclass(frozen=True)
class GroupRow:
    """Coverage totals per backend or per label; ``scheduled`` excludes dormant stages."""

    name: str
    counts: Counts
    scheduled: int
    stages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hole:
    """A stage or backend with zero registrations that can run: the loudest thing we report."""

    kind: Literal["stage", "backend"]
    name: str
    cause: HoleCause
    detail: str
    lost: int = 0  # registrations that would run but for this hole


@dataclass(frozen=True)
class LedgerEntry:
    """One disabled registration, with what it takes to get it back."""

    file: str
    line: int
    backend: str
    suite: str
    reason: str
    references: tuple[Reference, ...]
    age_days: int | None
    age_status: AgeStatus
    age_note: str
    changed: str | None  # ISO date of the change, when known
    commit: str | None
    age_lower_bound: bool
    expiry: str | None  # ISO date named in the reason
    expiry_error: str | None
    expired: bool
    days_left: int | None
    shared_reason: int  # how many disabled registrations carry exactly this reason
    stage_dormant: bool
    labels: tuple[str, ...] = ()
    reason_line: int = 0  # the line of ``disabled=`` (multi-line calls), else ``line``
    runners: tuple[str, ...] = ()  # runner label patterns it is disabled on (else everywhere)


@dataclass(frozen=True)
class DriftRow:
    """A literal ``est_time`` far from what history measured."""

    file: str
    stage: str
    literal: float
    measured: float
    samples: int
    factor: float  # measured / literal (>1: slower than declared)


@dataclass(frozen=True)
class GateRow:
    """One gated (test, metric): the gate's verdict in the file's last gated run, and how
    many baseline runs are stored (and untrusted).

    The verdict is the file's (a gate judges all its metrics together) and comes from the
    file's recorded results, as "Failing now" does (``last_source = "result"``); a file
    with no such result keeps its last stored baseline run's (``"baseline"``). See
    :mod:`testfleet.report.gate_verdicts`.
    """

    file: str
    backend: str
    suite: str
    metric: str
    coordinates: int
    last_verdict: Literal["PASS", "FAIL", "ERROR", "INACTIVE", "UNTRUSTED"] | None
    last_run: str | None
    runs: int  # baseline runs stored in the gate's history
    untrusted_runs: int
    last_mode: GateMode | None = None  # from a result
    last_source: Literal["result", "baseline"] | None = None
    last_ts: float | None = None
    last_ci_run_id: str | None = None
    last_url: str | None = None


@dataclass(frozen=True)
class TrendPoint:
    when: str
    value: float
    trusted: bool
    run: str = ""


@dataclass(frozen=True)
class TrendSeries:
    """A metric's values for one coordinate over runs, with the current band."""

    file: str
    metric: str
    step: int
    points: tuple[TrendPoint, ...]
    reference: float | None = None
    band: tuple[float, float] | None = None
    label: str = ""


@dataclass(frozen=True)
class ShardBar:
    shard: int
    estimate: float
    files: tuple[tuple[str, float, Source], ...]  # (file, estimate, source)
    job_id: str = ""


@dataclass(frozen=True)
class StageTimeline:
    """The plan's shards of one stage, estimated, against the lower bound."""

    stage: str
    backend: str
    status: Status
    reason: str | None
    shards: tuple[ShardBar, ...]
    makespan: float
    lower_bound: float
    ratio: float | None


@dataclass(frozen=True)
class PlanSection:
    source: str
    digest: str | None
    policy: PolicyDoc
    timelines: tuple[StageTimeline, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class HistorySection:
    """What the history database contributed; ``note`` says why a part is missing."""

    available: bool
    note: str = ""
    drift: tuple[DriftRow, ...] = ()
    drift_factor: float = 2.0
    gates: tuple[GateRow, ...] = ()
    trends: tuple[TrendSeries, ...] = ()


@dataclass(frozen=True)
class Report:
    project: str
    generated: str  # ISO timestamp (UTC)
    stages: tuple[StageRow, ...]
    backends: tuple[GroupRow, ...]
    labels: tuple[GroupRow, ...]
    totals: Counts
    holes: tuple[Hole, ...]
    ledger: tuple[LedgerEntry, ...]
    git: str  # "repository", "shallow repository" or why ages are unknown
    history: HistorySection
    plan: PlanSection | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    findings: tuple[str, ...] = field(default_factory=tuple)  # check-rule findings, rendered
    config_file: str = ""
    links: RepoLinks | None = None
    # results (issue #14): pass rates, failing files, strips, flaky files, probes
    results: ResultsSection | None = None
    # #26: each stage's health from its results (stages without results have none)
    health: tuple[StageHealth, ...] = ()
    # #41: lanes held back by an open runner-class breaker
    broken: tuple[BrokenLane, ...] = ()

    @property
    def runnable(self) -> int:
        """Registrations some cadence can schedule: enabled and in a stage that is not dormant."""
        return sum(g.scheduled for g in self.backends)

    @property
    def dormant(self) -> tuple[StageRow, ...]:
        return tuple(s for s in self.stages if s.status == "dormant")

    def health_of(self, stage: str) -> StageHealth | None:
        return next((h for h in self.health if h.stage == stage), None)

    @property
    def failing_stages(self) -> tuple[StageHealth, ...]:
        """Stages whose files failed their last run, broken first, then longest failing;
        a dormant stage's (probe) failures are its own business, not a failing stage."""
        dormant = {s.name for s in self.dormant} | {b.lane for b in self.broken}
        failing = [h for h in self.health if h.failing and h.stage not in dormant]
        return tuple(sorted(failing, key=lambda h: (h.state != "broken", -h.streak,
                                                    h.since or 0.0, h.stage)))

    def headline(self) -> str:
        """One sentence a person can act on: what is failing first, then coverage."""
        t = self.totals
        parts = [f"{self.runnable} of {t.total} registrations can run"]
        if self.holes:
            parts.append(f"{len(self.holes)} coverage hole{'s' if len(self.holes) != 1 else ''}")
        if self.dormant:
            parts.append(f"{len(self.dormant)} dormant stage{'s' if len(self.dormant) != 1 else ''}")
        if self.broken:
            n = len(self.broken)
            parts.append(f"{n} runner class{'es' if n != 1 else ''} broken, held back by "
                         f"{'their breakers' if n != 1 else 'its breaker'} "
                         f"({', '.join(b.lane for b in self.broken)})")
        parts.append(f"{len(self.ledger)} disabled")
        expired = sum(1 for e in self.ledger if e.expired)
        if expired:
            parts.append(f"{expired} past their expiry")
        coverage = ", ".join(parts)
        failing = self.failing_stages
        if not failing:
            return coverage
        names = [f"{h.stage} broken ({h.streak_text})" if h.state == "broken" else h.stage
                 for h in failing[:HEADLINE_STAGES]]
        if len(failing) > HEADLINE_STAGES:
            names.append(f"{len(failing) - HEADLINE_STAGES} more")
        n = len(failing)
        return f"{n} stage{'s' if n != 1 else ''} failing: {', '.join(names)}; {coverage}"


#: Failing stages the headline names; the rest are counted.
HEADLINE_STAGES = 3
