"""The triggers an adoption report compares the two sides for, each with the workflow
events that deliver it and the id a saved runner selection names it by.
"""

from __future__ import annotations

from dataclasses import dataclass

from testfleet.planning.policy import Trigger


@dataclass(frozen=True)
class TriggerCase:
    title: str
    trigger: Trigger
    events: tuple[str, ...]  # workflow events that deliver this trigger
    id: str = ""  # the name a saved runner selection uses for it (docs/adopt.md)


def trigger_cases(labels: list[str], schedules: dict[str, str],
                  gate: str | None = None, release: bool = True) -> list[TriggerCase]:
    """push, PR without and with labels, every adopted cadence, manual runs, and a release
    run where the existing CI has one (``release``: a job takes its cadence as an input).
    With a required PR label (``gate``) the labelled PR cases carry it too."""
    extra = (gate,) if gate else ()
    cases = [
        TriggerCase("push", Trigger(event="push"), ("push",), "push"),
        TriggerCase("PR, no labels", Trigger(event="pull_request"), ("pull_request",), "pr"),
        TriggerCase("PR, every domain label" + (f" and {gate}" if gate else ""), Trigger(
            event="pull_request", labels=(*extra, *(f"run-ci-{lb}" for lb in sorted(labels)))),
            ("pull_request",), "pr-labels"),
        TriggerCase("PR, run-ci-all" + (f" and {gate}" if gate else ""),
                    Trigger(event="pull_request", labels=(*extra, "run-ci-all")),
                    ("pull_request",), "pr-all"),
    ]
    for cadence in ("nightly", "weekly"):
        if cadence in schedules.values():
            cases.append(TriggerCase(f"{cadence} (schedule)",
                                     Trigger(event="schedule", cadence=cadence), ("schedule",),
                                     cadence))
    if release or "release" in schedules.values():
        cases.append(TriggerCase("release", Trigger(event="workflow_dispatch", cadence="release"),
                                 ("workflow_call", "workflow_dispatch"), "release"))
    cases.append(TriggerCase("manual run (all labels)",
                             Trigger(event="workflow_dispatch", match_all_labels=True),
                             ("workflow_dispatch",), "manual"))
    return cases


CASE_IDS = ("push", "pr", "pr-labels", "pr-all", "nightly", "weekly", "release", "manual")
