"""``testfleet shadow compare --format json`` (``testfleet.shadow/1``): what testfleet would
run for one CI event against what the existing CI ran in that same run, lane by lane
(files, runner labels, shard count), and the history of such comparisons that says when
switching the old test jobs off is safe (``testfleet.shadow-history/1``, read back through
the same types)."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from testfleet.documents.base import boundary, closed

#: How a lane can differ between the plan and the existing CI's run.
Difference = Literal["only-planned", "only-observed", "files", "runs-on", "shards"]


@closed
class FileDiffDoc(TypedDict):
    """A file one side ran in a lane and the other did not."""

    file: str
    why: str
    """For a file only the existing CI ran: the plan's fate for it (``not-selected-by-labels
    (...)``), or "not in the plan"; for a file only testfleet would run: "not run by the
    existing CI"."""


@closed
class LaneDoc(TypedDict):
    """One stage (or one variant of it) on both sides."""

    stage: str
    variant: str
    """The variant's name; "" for the stage's own runners."""
    differences: list[Difference]
    """Empty: the lane is the same on both sides."""
    planned_files: int
    observed_files: int
    only_planned: list[FileDiffDoc]
    only_observed: list[FileDiffDoc]
    runs_on_planned: list[str] | None
    """The plan's runner labels for the lane; null: the plan has no job for it."""
    runs_on_observed: list[str] | None
    """The labels the existing CI's job ran on; null: its record did not say."""
    shards_planned: int
    """0: the plan has no job for the lane."""
    shards_observed: int | None
    """null: the existing CI did not run the lane, or its record did not say."""


@boundary
class ShadowRunDoc(TypedDict):
    """One comparison kept in the shadow history."""

    run_id: str
    commit: str
    event: str
    same: bool
    differences: int
    """Lanes that differ."""
    recorded_at: str
    """ISO 8601, UTC."""


@boundary
class ShadowHistoryDoc(TypedDict):
    """The file the comparisons of default-branch and scheduled runs are kept in (a pull
    request never writes it), newest last."""

    schema: Literal["testfleet.shadow-history/1"]
    runs: list[ShadowRunDoc]


@closed
class VerdictDoc(TypedDict):
    """Whether the recorded runs show that the switch is safe."""

    safe: bool
    needed: int
    """Consecutive clean runs required (``--runs``)."""
    clean_streak: int
    """The newest recorded runs without a difference, counted back to the first that had one."""
    recorded: int
    events: list[str]
    """The events of the runs in the streak."""
    message: str


@closed
class ShadowDoc(TypedDict):
    """One run of the existing CI, compared with the plan testfleet made for its event."""

    schema: Literal["testfleet.shadow/1"]
    same: bool
    """No lane differs."""
    event: str
    plan_digest: str
    run_id: str
    commit: str
    lanes: list[LaneDoc]
    notes: list[str]
    """What was not compared (a record without runner labels or shard count) and why."""
    recorded: bool
    """This comparison was added to the shadow history."""
    verdict: VerdictDoc | None
    """null: no history was given."""
