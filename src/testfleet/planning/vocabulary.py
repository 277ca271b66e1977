"""The plan's vocabulary: statuses, reasons and estimate sources, as literal types.

Kept apart from the pydantic models that read plan files (:mod:`.plan_file`): every
``plan`` needs these words, but only a run that loads a plan needs the models, whose
construction costs start-up time.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

SCHEMA: Final = "testfleet.plan/1"
Status = Literal["scheduled", "dormant", "unauthorized", "excluded", "unaffected", "empty"]
Reason = Literal[
    "disabled",
    "stage-dormant",
    "unauthorized",
    # Stages and triggers (#12): the stage is not on this cadence, the PR is a draft, the PR
    # lacks a required label; the cadence's exact nightly split leaves out per-commit tests.
    "cadence-excluded",
    # the stage (or variant) does not run on this event (its ``events``, testfleet.stage_triggers)
    "event-excluded",
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
]
Source = Literal["history", "est_time"]
#: what a stage summary counts: its registrations, and how many of them each skip reason took
StageCount = Literal["registered", "enabled", "scheduled", "quarantined", Reason]
#: the CI events a trigger can be (policy.EVENTS)
Event = Literal["pull_request", "pull_request_target", "push", "schedule", "workflow_call",
                "workflow_dispatch"]
STATUSES: tuple[Status, ...] = get_args(Status)
REASONS: tuple[Reason, ...] = get_args(Reason)
SOURCES: tuple[Source, ...] = get_args(Source)
