"""``testfleet reconcile --format json`` (``testfleet.reconcile/1``): a plan against what
its jobs reported."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from testfleet.documents.base import closed
from testfleet.documents.vocabulary import Outcome


@closed
class FileProblemDoc(TypedDict):
    """A planned or executed (stage, file) that is not accounted for exactly once."""

    stage: str
    file: str
    planned_job: str | None
    """The job the plan gave it; null: the plan does not hold it."""
    jobs: list[str]
    """The jobs that executed (or reported) it."""


@closed
class JobProblemDoc(TypedDict):
    """A planned job that did not report, or a status that cannot count as its job's."""

    job_id: str
    stage: str
    detail: str
    source: str
    """The status file it comes from ("" for a missing job)."""


@closed
class PlannedDoc(TypedDict):
    jobs: int
    files: int


@closed
class ReportedDoc(TypedDict):
    statuses: int
    files_executed: int


@closed
class ReconcileDoc(TypedDict):
    """Every planned file ran exactly once, or what did not."""

    schema: Literal["testfleet.reconcile/1"]
    ok: bool
    plan_digest: str
    planned: PlannedDoc
    reported: ReportedDoc
    outcomes: dict[Outcome, int]
    """Files per outcome, over the statuses that count."""
    missing_jobs: list[JobProblemDoc]
    missing: list[FileProblemDoc]
    not_run: list[FileProblemDoc]
    duplicated: list[FileProblemDoc]
    moved: list[FileProblemDoc]
    unplanned: list[FileProblemDoc]
    other_plan: list[JobProblemDoc]
    incomplete: list[JobProblemDoc]
    unplanned_jobs: list[JobProblemDoc]
    impossible: list[JobProblemDoc]
    """Statuses with a field their plan job cannot have (another stage, shard, job id,
    lane or quarantine; an executed file without an attempt, more attempts than any run
    makes; a complete placeholder)."""
    empty_shards: list[JobProblemDoc]
    """Statuses of shards the plan left without files (accepted, shown)."""
    superseded: list[JobProblemDoc]
    """Statuses a later CI attempt of the same job replaced (accepted, shown)."""
    failed: list[FileProblemDoc]
    """With a rescue wave: files whose final report is a failure, not quarantined."""
    rescue_digest: str | None
    """The rescue wave reconciled with (``--rescue``), or null."""
    rescued_jobs: list[JobProblemDoc]
    """Planned jobs that never reported or did not finish, whose files the rescue ran
    (accepted, shown)."""
    rescued: list[FileProblemDoc]
    """Files whose one final report came from the rescue wave (accepted, shown)."""
    late: list[FileProblemDoc]
    """Files a rescue job ran that their own shard reported after all: the shard's report
    counts (accepted, shown)."""
    problems: list[str]
    """One line per kind of problem."""
