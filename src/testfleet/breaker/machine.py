"""The breaker's state machine: one run's outcome of a lane folded into the lane's state.
Pure: no store, no clock (times come in with the outcome or the forced event).

Closed, a lane counts the consecutive default-branch runs that failed it the same
infrastructure way (one incident signature that took the whole lane, or jobs that never
started or never reported); ``open_after`` of them open the breaker. A run that passed,
failed otherwise (a test incident: an assertion, a broken import, a wrong result) or
failed another way starts the count again. Open, the lane runs only its probe; each
default-branch run is one run held back, and ``close_after`` clean probes in a row close
it. A run is folded in once (merging the same records twice changes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from testfleet.breaker.model import MAX_RUNS, MAX_TEXT, BreakerState, Episode, Event, LaneOutcome
from testfleet.breaker.settings import BreakerSettings


def _way(outcome: LaneOutcome) -> str:
    """What makes two failed runs "the same way"."""
    return f"infra:{outcome.signature}" if outcome.kind == "infra" else outcome.kind


def advance(state: BreakerState, outcome: LaneOutcome, settings: BreakerSettings) -> Event | None:
    """The event ``outcome`` makes of ``state`` (None: the run was folded in already)."""
    if outcome.run.run and outcome.run.run == state.last_run:
        return None
    base = replace(state, seq=state.seq + 1, at=outcome.at, last_run=outcome.run.run)
    if state.open:
        held = replace(base, held_runs=state.held_runs + 1,
                       held_registrations=state.held_registrations + state.files)
        if outcome.kind != "passed":
            return Event("observed", replace(held, clean=0), outcome.run.run)
        clean = state.clean + 1
        if clean < settings.close_after:
            return Event("observed", replace(held, clean=clean), outcome.run.run)
        return Event("closed", replace(held, status="closed", clean=clean,
                                       closed_at=outcome.at, closed_by="",
                                       streak=(), streak_kind=""), outcome.run.run)
    if outcome.kind not in ("infra", "silent"):
        return Event("observed", replace(base, streak=(), streak_kind=""), outcome.run.run)
    way = _way(outcome)
    streak = (state.streak if state.streak_kind == way else ()) + (outcome.run,)
    streak = streak[-MAX_RUNS:]
    if len(streak) < settings.open_after:
        return Event("observed", replace(base, streak=streak, streak_kind=way), outcome.run.run)
    return Event("opened", replace(
        base, status="open", streak=(), streak_kind="", signature=outcome.signature,
        text=outcome.text[:MAX_TEXT], runs=streak, opened_at=outcome.at, opened_by="",
        reason="", clean=0, held_runs=0, held_registrations=0, files=outcome.files,
        closed_at=None, closed_by=""), outcome.run.run)


def force(state: BreakerState, *, open_it: bool, by: str, reason: str, at: float,
          files: int = 0) -> Event:
    """A person's decision (``testfleet breaker open|close``): recorded with who and why."""
    base = replace(state, seq=state.seq + 1, at=at, reason=reason[:MAX_TEXT], streak=(),
                   streak_kind="")
    if open_it:
        return Event("forced-open", replace(
            base, status="open", signature="", text="", runs=(), opened_at=at,
            opened_by=by[:MAX_TEXT], clean=0, held_runs=0, held_registrations=0, files=files,
            closed_at=None, closed_by=""))
    return Event("forced-close", replace(base, status="closed", clean=0, closed_at=at,
                                         closed_by=by[:MAX_TEXT]))


def episodes(events: Iterable[Event]) -> list[Episode]:
    """Each time the lane was open, from its log in order: opened, closed (None while
    open), the runs and registrations it held back."""
    out: list[Episode] = []
    current: Episode | None = None
    for event in events:
        s = event.state
        if event.kind in ("opened", "forced-open"):
            if current is not None:  # opened again without a close: the old one ends here
                out.append(replace(current, closed_at=s.at))
            current = Episode(s.lane, s.opened_at or s.at, s.opened_by, s.signature, s.text,
                              s.runs, reason=s.reason)
        elif current is not None:
            current = replace(current, held_runs=s.held_runs,
                              held_registrations=s.held_registrations)
            if event.kind in ("closed", "forced-close"):
                out.append(replace(current, closed_at=s.closed_at, closed_by=s.closed_by,
                                   reason=s.reason or current.reason))
                current = None
    if current is not None:
        out.append(current)
    return out
