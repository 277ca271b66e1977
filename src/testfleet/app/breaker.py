"""The runner-class breaker on the application floor (#41): read every lane's state from
the history for the plan, fold a default-branch run's records into it after they were
merged, force it on a person's word, and say what ``check`` must.

The decisions are :mod:`testfleet.breaker`'s (pure); this module reads rows, classifies
one run's outcome of a lane with the incident grouping (:mod:`testfleet.incidents`), and
writes the events the machine returns. A pull request never gets here to write: only
``history merge`` of default-branch records and ``testfleet breaker open|close`` write.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testfleet.breaker.machine import advance, episodes, force
from testfleet.breaker.model import (
    BreakerState,
    Episode,
    Event,
    LaneOutcome,
    RunRef,
    state_from_json,
)
from testfleet.breaker.settings import BreakerSettings, lane_settings

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.findings import Finding
    from testfleet.planning.model import Plan
    from testfleet.store.breakers import EventRow

#: the events a default-branch run writes history on (history.trust.TRUSTED_EVENTS)
DEFAULT_BRANCH_EVENTS = ("push", "schedule", "workflow_dispatch", "workflow_call")
FAILING = ("FAILED", "TIMEOUT", "ERROR")
#: Exceptions of broken code that the incident grouping calls infrastructure when one lane
#: ran alone (it cannot see the other stages that would fail too): never a breaker's cause.
BROKEN_CODE = ("ImportError", "ModuleNotFoundError")


def _state(row: EventRow) -> BreakerState:
    return state_from_json(json.loads(row.state))


def _event(row: EventRow) -> Event:
    return Event(row.kind, _state(row), row.run or "")  # type: ignore[arg-type]


def states_in(conn: Any) -> dict[str, BreakerState]:
    """Every lane's newest state in the history ``conn`` reads."""
    from testfleet.store.breakers import latest, read_events

    return {lane: _state(row) for lane, row in latest(read_events(conn)).items()}


def read_breakers(project: Project, database: str | None) -> tuple[dict[str, BreakerState], list[str]]:
    """The state of every lane that opted in and has one, for a plan: fail-soft (history
    trouble is a note, and every breaker counts as closed)."""
    from testfleet.store import open_store
    from testfleet.store.errors import StoreError, StoreMissing

    opted = lane_settings(project.config)
    if not opted:
        return {}, []
    try:
        with open_store(project, database, readonly=True) as store, store.read() as conn:
            states = states_in(conn)
    except StoreMissing:
        return {}, []
    except StoreError as exc:
        return {}, [f"runner-class breakers unread for this plan (each counts as closed): {exc}"]
    except Exception as exc:  # an older schema without the breaker log, a driver error
        return {}, [f"runner-class breakers unread for this plan (each counts as closed): "
                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"]
    return {lane: s for lane, s in states.items() if lane in opted}, []


# -- one run's outcome of a lane ------------------------------------------------------


@dataclass(frozen=True)
class RunSource:
    """A default-branch run whose records a merge brought: its id and link."""

    run: str
    url: str | None


def run_sources(bundles: Sequence[Any], require_ref: str | None) -> list[RunSource]:
    """The default-branch CI runs among merged bundles' sources, each once, in order."""
    from testfleet.results.links import linker

    out: dict[str, RunSource] = {}
    for bundle in bundles:
        source = bundle.payload.source
        if not source.ci_run_id or source.event not in DEFAULT_BRANCH_EVENTS:
            continue
        if require_ref is not None and source.ref != require_ref:
            continue
        env = dict(os.environ)
        if source.repository:
            env["GITHUB_REPOSITORY"] = source.repository
        url = linker(None, None, None, env).url(source.ci_run_id)
        out.setdefault(source.ci_run_id, RunSource(source.ci_run_id, url))
    return list(out.values())


def lane_outcome(rows: Sequence[Any], case_rows: Sequence[Any], signatures: Mapping[str, Any],
                 lane: str, run: RunSource, at: float, *, probe: bool = False) -> LaneOutcome:
    """Pure: what one run's final rows of ``lane`` say about its runners. ``probe``: the
    breaker is open, the rows are its probe's, which passes only when every file passed
    on its first attempt."""
    from testfleet.incidents.group import INFRASTRUCTURE
    from testfleet.incidents.history import incidents_of

    ref = RunRef(run.run, run.url)
    newest: dict[str, Any] = {}
    for r in sorted(rows, key=lambda r: r.ts):
        newest[r.file] = r
    files = len(newest)
    if all(r.outcome not in FAILING for r in newest.values()):
        clean = all(r.outcome == "PASSED" and (not probe or r.attempt == 1)
                    for r in newest.values())
        return LaneOutcome(ref, at, "passed" if clean else "failed", files=files)
    for incident in incidents_of(list(newest.values()), case_rows, dict(signatures)):
        if incident.category != INFRASTRUCTURE or (
                incident.signature.kind != "infra"
                and incident.signature.text.startswith(BROKEN_CODE)):
            continue  # a broken import in the lane's own run is broken code, not runners
        share = next((s for s in incident.lanes if s.lane == lane), None)
        if share is not None and share.files == share.ran == files:
            text = incident.signature.label or incident.signature.text
            return LaneOutcome(ref, at, "infra", incident.signature.digest, text, files)
    return LaneOutcome(ref, at, "failed", files=files)


def _run_rows(conn: Any, run: str, lanes: Sequence[str]) -> tuple[list[Any], list[Any], dict[str, Any]]:
    from sqlalchemy import and_, select

    from testfleet.store.execution_rows import AlchemyDb
    from testfleet.store.schema import executions as ex
    from testfleet.store.signatures import read_signatures
    from testfleet.store.testcases import testcases as tc

    rows = list(conn.execute(
        select(ex.c.file, ex.c.stage, ex.c.backend, ex.c.outcome, ex.c.ts, ex.c.commit_sha,
               ex.c.ci_run_id, ex.c.signature, ex.c.attempt)
        .where(and_(ex.c.final.isnot(False), ex.c.outcome != "NOT_RUN"),
               ex.c.ci_run_id == run, ex.c.stage.in_(list(lanes)))))
    cases = list(conn.execute(
        select(tc.c.file, tc.c.stage, tc.c.backend, tc.c.name, tc.c.outcome, tc.c.ts,
               tc.c.commit_sha, tc.c.ci_run_id, tc.c.signature)
        .where(tc.c.final.is_(True), tc.c.outcome.in_(("FAILED", "ERROR")),
               tc.c.ci_run_id == run, tc.c.stage.in_(list(lanes)))))
    digests = {r.signature for r in rows if r.signature} | {c.signature for c in cases
                                                            if c.signature}
    return rows, cases, read_signatures(AlchemyDb(conn), digests)


def planned_lanes(plan: Plan) -> dict[str, int]:
    """Lanes the plan gave jobs to (probes included), with how many registrations each
    held (a lane held back by its breaker: its ``runner-broken`` fates)."""
    out: dict[str, int] = {}
    for job in plan.jobs:
        out[job.lane] = out.get(job.lane, 0) + (0 if job.probe else len(job.tests))
    for s in plan.skipped:
        if s.reason == "runner-broken":
            out[s.lane] = out.get(s.lane, 0) + 1
    return out


def observe_runs(project: Project, store: Any, runs: Sequence[RunSource], *,
                 plan: Plan | None = None, now: float | None = None) -> list[str]:
    """Fold each default-branch run's records of every opted-in lane into its breaker,
    after they were merged; what changed, as lines to print. A lane with no record in the
    run is *silent* when ``plan`` (the run's plan) gave it jobs, else not in the run."""
    from testfleet.store.breakers import event_row, insert_events, read_events

    opted = lane_settings(project.config)
    if not opted or not runs:
        return []
    at = time.time() if now is None else now
    lines: list[str] = []
    planned = planned_lanes(plan) if plan is not None else {}
    with store.write() as conn:
        states = {lane: _state(row) for lane, row in
                  _latest(read_events(conn, opted)).items()}
        new: list[EventRow] = []
        for run in runs:
            rows, cases, signatures = _run_rows(conn, run.run, list(opted))
            for lane, settings in opted.items():
                state = states.get(lane, BreakerState(lane))
                mine = [r for r in rows if r.stage == lane]
                if mine:
                    outcome = lane_outcome(mine, [c for c in cases if c.stage == lane],
                                           signatures, lane, run, at, probe=state.open)
                elif lane in planned:
                    outcome = LaneOutcome(RunRef(run.run, run.url), at, "silent",
                                          text="its jobs never started or never reported",
                                          files=planned[lane])
                else:
                    continue
                event = advance(state, outcome, settings)
                if event is None:
                    continue
                states[lane] = event.state
                new.append(event_row(lane, event.state.seq, event.state.at, event.kind,
                                     event.run or None, event.state.to_json()))
                lines += _said(event, settings)
        insert_events(conn, new)
    return lines


def observe_run(project: Project, database: str | None, run: str,
                plan: Plan | None) -> list[str]:
    """Fold one default-branch run whose jobs wrote their records straight into the history
    database (no bundle, so no merge to fold them in) into its lanes' breakers."""
    from testfleet.results.links import linker
    from testfleet.store import open_store

    with open_store(project, database) as store:
        url = linker(None, None, None, dict(os.environ)).url(run)
        return observe_runs(project, store, [RunSource(run, url)], plan=plan)


def _latest(rows: Sequence[EventRow]) -> dict[str, EventRow]:
    from testfleet.store.breakers import latest

    return latest(rows)


def _said(event: Event, settings: BreakerSettings) -> list[str]:
    s = event.state
    if event.kind == "opened":
        runs = ", ".join(r.run for r in s.runs)
        return [f"breaker {s.lane}: opened after {len(s.runs)} default-branch run(s) in a row "
                f"({runs}) failed the same infrastructure way: {s.text or s.signature}; the "
                "next plans hold the lane back and run only its probe"]
    if event.kind == "closed":
        return [f"breaker {s.lane}: closed after {s.clean} clean probe(s) in a row; it held "
                f"back {s.held_runs} run(s) and {s.held_registrations} registration(s); the "
                "next plan schedules the lane again"]
    if s.open:
        return [f"breaker {s.lane}: open; probe clean {s.clean} of {settings.close_after} "
                "in a row"]
    if s.streak:
        return [f"breaker {s.lane}: {len(s.streak)} of {settings.open_after} run(s) in a row "
                f"failed the same infrastructure way"]
    return []


# -- a person's word, the log, check ---------------------------------------------------


def author(project: Project) -> str:
    """Who forces a breaker by default: the git author of the repository, else the user."""
    import subprocess

    for key in ("GIT_AUTHOR_NAME",):
        if os.environ.get(key):
            return os.environ[key]
    try:
        out = subprocess.run(["git", "config", "user.name"], cwd=project.root, text=True,
                             capture_output=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or os.environ.get("USER", "") or "unknown"


def force_lane(project: Project, database: str | None, lane: str, *, open_it: bool,
               by: str, reason: str, now: float | None = None) -> BreakerState:
    """Open or close ``lane``'s breaker by hand, recording who and why."""
    from testfleet.errors import UsageError
    from testfleet.store import open_store
    from testfleet.store.breakers import event_row, insert_events, read_events

    opted = lane_settings(project.config)
    if lane not in opted:
        known = ", ".join(sorted(opted)) or "none"
        raise UsageError(f"lane {lane!r} has no breaker (opt in with 'breaker = true' on its "
                         f"stage or variant); lanes with one: {known}")
    at = time.time() if now is None else now
    with open_store(project, database) as store, store.write() as conn:
        rows = read_events(conn, [lane])
        state = _state(_latest(rows)[lane]) if rows else BreakerState(lane)
        if state.open == open_it:
            raise UsageError(f"breaker {lane} is {state.status} already")
        event = force(state, open_it=open_it, by=by, reason=reason, at=at, files=state.files)
        insert_events(conn, [event_row(lane, event.state.seq, at, event.kind, None,
                                       event.state.to_json())])
    return event.state


@dataclass(frozen=True)
class LaneBreaker:
    """What ``breaker list`` and the report show of one lane."""

    lane: str
    settings: BreakerSettings
    state: BreakerState
    episodes: tuple[Episode, ...]


def breaker_list(project: Project, database: str | None) -> list[LaneBreaker]:
    """Every opted-in lane (and any lane with a log) with its state and episodes."""
    from testfleet.store import open_store
    from testfleet.store.breakers import read_events
    from testfleet.store.errors import StoreMissing

    opted = lane_settings(project.config)
    try:
        with open_store(project, database, readonly=True) as store, store.read() as conn:
            rows = read_events(conn)
    except StoreMissing:
        rows = []
    by_lane: dict[str, list[EventRow]] = {}
    for row in rows:
        by_lane.setdefault(row.lane, []).append(row)
    out = []
    for lane in sorted(set(opted) | set(by_lane)):
        mine = by_lane.get(lane, [])
        state = _state(_latest(mine)[lane]) if mine else BreakerState(lane)
        settings = opted.get(lane) or BreakerSettings(0, 0, 0)
        out.append(LaneBreaker(lane, settings, state,
                               tuple(episodes(_event(r) for r in mine))))
    return out


def too_old(project: Project, states: Mapping[str, BreakerState],
            now: float | None = None) -> list[tuple[BreakerState, BreakerSettings, str]]:
    """Open breakers older than their ``max_open_days``, each with the one dormancy line
    to commit (the tracked, human decision)."""
    from testfleet.incidents.dormancy import dormant_line

    at = time.time() if now is None else now
    out = []
    for lane, settings in lane_settings(project.config).items():
        state = states.get(lane)
        if state is None or not state.open or state.age_days(at) <= settings.max_open_days:
            continue
        runs = ", ".join(r.url or r.run for r in state.runs[-3:])
        what = (f"infrastructure incident {state.signature}: {state.text}" if state.signature
                else f"breaker opened by {state.opened_by}: {state.reason}")
        reason = " ".join(f"{what}; breaker open since the runs {runs}, see #<issue>".split())
        out.append((state, settings, dormant_line(reason[:300])))
    return out


def breaker_findings(project: Project, states: Mapping[str, BreakerState],
                     now: float | None = None) -> list[Finding]:
    """``check``'s word on breakers: one open longer than its ``max_open_days`` is an error
    with the incident and the one dormancy line to commit with a reference (the tracked,
    human decision); a breaker that holds a lane back is a coverage hole already."""
    from testfleet.config.keyloc import config_line
    from testfleet.findings import Finding
    from testfleet.report.rules import _config_name

    out = []
    for state, settings, line in too_old(project, states, now):
        stage = state.lane.split(".")[0] if state.lane not in project.config.stages \
            else state.lane
        at = config_line(project.raw_config_text, stage, "breaker")
        days = state.age_days(time.time() if now is None else now)
        out.append(Finding(
            _config_name(project), at, 0, "error", "breaker-open-too-long",
            f"breaker of {state.lane} has been open {days:.1f} days (max_open_days = "
            f"{settings.max_open_days:g}): "
            + (f"infrastructure incident {state.signature}: {state.text}" if state.signature
               else f"opened by {state.opened_by}: {state.reason}")
            + f"; decide it: make the stage dormant with one tracked line under "
            f"[tool.testfleet.stages.{stage}] ({line}, with the issue that tracks the "
            "runners), or close the breaker (testfleet breaker close "
            f"{state.lane} --reason ...)", key=f"stages.{stage}.breaker"))
    return out


def held_back_lanes(project: Project, database: str | None) -> list[tuple[str, str]]:
    """(lane, why) of each lane an open breaker holds back, as the plan says it: a
    coverage hole in ``results`` as in every other output."""
    from testfleet.planning.lanes import find_lane
    from testfleet.planning.planner import held_back

    states, _ = read_breakers(project, database)
    out = []
    for key, state in sorted(states.items()):
        lane = find_lane(project.config, key)
        if lane is None or lane.config.disabled is not None:
            continue
        why = held_back(state, lane, None)
        if why is not None:
            out.append((key, why))
    return out
