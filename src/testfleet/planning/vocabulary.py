"""The plan's vocabulary: statuses, reasons and estimate sources, as literal types.

Kept apart from the pydantic models that read plan files (:mod:`.plan_file`): every
``plan`` needs these words, but only a run that loads a plan needs the models, whose
construction costs start-up time.
"""

from __future__ import annotations

from typing import Literal, get_args

SCHEMA = "testfleet.plan/1"
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
STATUSES: tuple[str, ...] = get_args(Status)
REASONS: tuple[str, ...] = get_args(Reason)
SOURCES: tuple[str, ...] = get_args(Source)
