"""Closed vocabularies the documents share, as literal types and bounds (no testfleet
imports, no pydantic: the store, the runner, the planner and the report take their words
from here, so a schema's enum and the code cannot differ, and the words sit on the bottom
floor that every other floor may import)."""

from __future__ import annotations

from typing import Final, Literal, get_args

#: a file's final outcome in one execution (history; ``NOT_RUN``: planned, not executed)
Outcome = Literal["PASSED", "FAILED", "TIMEOUT", "FLAKY", "ERROR", "NOT_RUN"]
#: a test case's outcome (``testcases``)
CaseOutcome = Literal["PASSED", "FLAKY", "FAILED", "ERROR", "SKIPPED", "XFAILED"]
#: what the results views show: a file's executed outcome, or a test case's
ResultOutcome = Literal["PASSED", "FLAKY", "FAILED", "TIMEOUT", "ERROR", "SKIPPED", "XFAILED"]
#: a gate coordinate's (and a gated file's) verdict
GateStatus = Literal["PASS", "FAIL", "ERROR", "INACTIVE"]
GateMode = Literal["enforced", "shadow"]
FlakyState = Literal["flaky", "broken", "recovered", "healthy"]
IncidentCategory = Literal["infrastructure", "test"]
SignatureKind = Literal["infra", "timeout", "exception", "fatal", "output", "exit"]

# -- bounds: beyond them a number is a typo or corruption

#: The longest duration an est_time literal, an implicit directory or an imported JUnit
# time may claim: a week. Beyond it a number is a typo (or 1e308), and timeouts and
# shard estimates computed from it overflow.
MAX_EST_TIME = 7 * 24 * 3600.0
#: GitHub's maximum for a job on a self-hosted runner (72 hours).
MAX_JOB_TIMEOUT_MINUTES = 4320

# -- the plan's words: statuses, reasons, estimate sources (kept apart from the pydantic
# models that read plan files: every ``plan`` needs these words, only a run that loads a
# plan needs the models, whose construction costs start-up time)
SCHEMA: Final = "testfleet.plan/1"
Status = Literal["scheduled", "dormant", "unauthorized", "excluded", "unaffected", "empty",
                 # the runner-class breaker (#41): the lane's breaker is open (only its probe
                 # runs), or no online runner carries its labels (``plan --runners``)
                 "runner-broken", "no-runner-online"]
Reason = Literal[
    "disabled",
    "stage-dormant",
    "unauthorized",
    # Stages and triggers (#12): the stage is not on this cadence, the PR is a draft, the PR
    # lacks a required label; the cadence's exact nightly split leaves out per-commit tests.
    "cadence-excluded",
    # the stage (or variant) does not run on this event (its ``events``, testfleet.config.triggers)
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
    # #41: the lane's breaker is open (its runners failed the same infrastructure way in
    # consecutive default-branch runs); no online runner carries the lane's labels
    "runner-broken",
    "no-runner-online",
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

#: a finding's severity (``testfleet check``)
Severity = Literal["error", "warning"]
#: a test's health in the report
State = Literal["passing", "failing", "broken"]
#: what a reference in a disabling reason points at
RefKind = Literal["issue", "pull", "url", "custom"]
#: whether the line that disabled a test is committed (git blame)
AgeStatus = Literal["committed", "uncommitted", "unknown"]
