"""When each adopted stage (or variant) runs, as its existing job does: the events of the
workflow that starts it (``events``), the paths that filter one of them
(``run_on_changes``), the cadences of its workflow's crons (``cadences``), and the side of
the nightly split its runner call takes (``registrations``). Decided once the schedules
are known, from the job each lane was adopted from (see ``adopted_stages``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testfleet.adopt.ci_model import CIStage

#: the events a generated workflow and ``testfleet plan`` know; a stage whose job runs on
#: all of the usual ones needs no ``events`` key
PLAN_EVENTS = ("pull_request", "pull_request_target", "push", "schedule", "workflow_call",
               "workflow_dispatch")
_USUAL = {"pull_request", "push", "schedule", "workflow_dispatch"}
_KEYS = ("events", "run_on_changes", "cadences")


def trigger_keys(job: CIStage, schedules: Mapping[str, str], cadences: set[str]) -> dict[str, Any]:
    """The trigger keys one lane's job gives it (only those that narrow anything)."""
    events = [e for e in job.events if e in PLAN_EVENTS]
    plain = sorted(e for e in events if e not in job.event_paths)
    out: dict[str, Any] = {}
    if not set(plain) >= _USUAL:
        out["events"] = plain
    changes = [{"event": e, "paths": list(job.event_paths[e])} for e in sorted(job.event_paths)
               if e in events]
    if changes:
        out["run_on_changes"] = changes
    wanted = {schedules[c] for c in job.crons if c in schedules}
    if any(e != "schedule" for e in events):
        wanted.add("regular")  # a pull request, a push, a manual run: the regular cadence
    if job.cadence_input and {"workflow_dispatch", "workflow_call"} & set(events):
        wanted = set()  # the run's cadence is an input of a manual or called run: any
    # only a scheduled lane needs cadences: without schedule its events already say when
    if "schedule" in events and wanted and wanted != cadences and wanted <= cadences:
        out["cadences"] = sorted(wanted)
    return out


def side(job: CIStage) -> str | None:
    """The side of the nightly split a job's runner call takes: a runner that keeps
    nightly and per-commit registrations apart runs ``nightly`` ones with its switch
    (``--nightly``), ``per-commit`` ones without."""
    if job.runner is None or not job.runner.exact_nightly:
        return None
    return "nightly" if job.nightly_run else "per-commit"


def apply_triggers(stages: dict[str, dict[str, Any]], lane_jobs: Mapping[tuple[str, str], CIStage],
                   schedules: Mapping[str, str], cadences: set[str], notes: list[str]) -> None:
    """Write the trigger keys onto each stage, or onto its variants where they differ."""
    by_stage: dict[str, dict[str, CIStage]] = {}
    for (suite, variant), job in lane_jobs.items():
        by_stage.setdefault(suite, {})[variant] = job
    for suite, jobs in sorted(by_stage.items()):
        stage = stages.get(suite)
        if stage is None:
            continue  # (a stage dormant for want of what its job needs keeps its triggers,
        # so removing its disabled line gives the old CI's events)
        variants = {v: j for v, j in jobs.items() if v and v in stage.get("variants", {})}
        if variants:
            lanes = variants
        elif "" in jobs:
            lanes = {"": jobs[""]}
        else:
            continue
        keys = {v: trigger_keys(j, schedules, cadences) for v, j in lanes.items()}
        if len({repr(k) for k in keys.values()}) == 1:
            _put(stage, next(iter(keys.values())))
        else:
            for variant, table in keys.items():
                _put(stage["variants"][variant], table)
            notes.append(f"stage {suite}: its variants run on their own triggers ("
                         + "; ".join(f"{v}: {_describe(k)}" for v, k in sorted(keys.items())) + ")")
        sides = {side(j) for j in lanes.values()}
        if len(sides) == 1 and None not in sides:
            stage["registrations"] = sides.pop()
        elif len(sides) > 1:
            notes.append(f"stage {suite}: its jobs take different sides of the nightly split "
                         f"({', '.join(sorted(str(s) for s in sides))}); registrations left unset, "
                         "the cadence decides")


def _put(table: dict[str, Any], keys: Mapping[str, Any]) -> None:
    for key in _KEYS:
        if key in keys:
            table[key] = keys[key]


def _describe(keys: Mapping[str, Any]) -> str:
    if not keys:
        return "every event"
    parts = []
    if "events" in keys:
        parts.append("events " + (", ".join(keys["events"]) or "none"))
    for change in keys.get("run_on_changes", []):
        parts.append(f"{change['event']} touching {', '.join(change['paths'][:2])}"
                     + (", ..." if len(change["paths"]) > 2 else ""))
    if "cadences" in keys:
        parts.append("cadences " + ", ".join(keys["cadences"]))
    return ", ".join(parts)
