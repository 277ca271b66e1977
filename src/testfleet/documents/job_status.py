"""The job status file (``testfleet.job-status/1``): what one job that executed part of a
plan says it did. It is an artifact a CI job uploaded, written next to a pull request's
code, so :mod:`testfleet.reconcile.status` reads it back through these types, strictly and
with bounds on every string."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from testfleet.documents.base import boundary
from testfleet.documents.vocabulary import Outcome

#: far beyond any plan's shard count (a stage's ``shards``/``max_shards`` are at most 256)
MAX_SHARDS = 100_000
#: CI attempts of one job (GitHub's run attempts, Buildkite's retries) stay far below this
MAX_CI_ATTEMPT = 1_000_000

Text = Annotated[str, Field(max_length=4096)]
Name = Annotated[str, Field(max_length=500)]
Digest = Annotated[str, Field(max_length=100)]
Runner = Literal["testfleet run", "pytest"]


@boundary
class FileStatusDoc(TypedDict):
    """One planned file as the job saw it."""

    file: Annotated[str, Field(min_length=1, max_length=4096)]
    stage: Name
    outcome: Outcome
    attempts: Annotated[int, Field(ge=0, le=1000)]
    quarantined: bool


@boundary
class RescueRefDoc(TypedDict):
    """A rescue job's status (#40): which rescue wave it ran from and whose files."""

    digest: Digest
    origin: Annotated[str, Field(min_length=1, max_length=500)]


@boundary
class JobStatusDoc(TypedDict):
    """One job's account of its part of a plan. testfleet writes every key; the ones not
    required are read with their defaults (no list, "testfleet run", "", 0, null)."""

    schema: Literal["testfleet.job-status/1"]
    plan_digest: Digest
    plan_file: NotRequired[Text | None]
    job_id: Annotated[str, Field(min_length=1, max_length=500)]
    jobs: NotRequired[list[Name]]
    stage: Name
    variant: Name
    shard: Annotated[int, Field(ge=0, le=MAX_SHARDS)]
    shards: Annotated[int, Field(ge=0, le=MAX_SHARDS)]
    run_id: Name
    ci_run_id: Name | None
    ci_attempt: NotRequired[Annotated[int, Field(ge=1, le=MAX_CI_ATTEMPT)] | None]
    runner: NotRequired[Runner]
    empty: bool
    complete: bool
    exit_status: Annotated[int, Field(ge=-1, le=255)]
    reason: NotRequired[Text]
    started_at: NotRequired[Annotated[float, Field(ge=0, allow_inf_nan=False)]]
    finished_at: NotRequired[Annotated[float, Field(ge=0, allow_inf_nan=False)] | None]
    testfleet_version: NotRequired[Name]
    files: list[FileStatusDoc]
    rescue: NotRequired[RescueRefDoc | None]
