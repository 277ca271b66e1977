"""The breaker's values: one run's outcome of a lane, and a lane's state (its one JSON form,
``testfleet.breaker-state/1``, is what the history stores and bundles carry)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

STATE_SCHEMA: Final = "testfleet.breaker-state/1"
#: the most runs a state names (those that opened it; a streak is at most ``open_after``)
MAX_RUNS = 100
#: the most characters of an incident's text, a reason, a who
MAX_TEXT = 500

#: What one default-branch run of a lane says about its runners:
#: ``infra``: an infrastructure incident took the whole lane; ``silent``: the lane was
#: planned and its jobs never started or never reported; ``passed``: every file of the lane
#: (its probe, while open) passed first time; ``failed``: anything else (test failures).
OutcomeKind = Literal["infra", "silent", "passed", "failed"]
BreakerStatus = Literal["closed", "open"]
#: what an event of a lane's log records: a run observed, the breaker opened or closed by
#: its runs, or forced by a person (``testfleet breaker open|close``)
EventKind = Literal["observed", "opened", "closed", "forced-open", "forced-close"]


class StateError(ValueError):
    """A stored or bundled state that is not a ``testfleet.breaker-state/1`` document."""


@dataclass(frozen=True)
class RunRef:
    """A CI run, by id, with its link when one is known."""

    run: str
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "url": self.url}


@dataclass(frozen=True)
class LaneOutcome:
    """What one default-branch run says about one lane's runners."""

    run: RunRef
    at: float  # when the run's records were merged (POSIX seconds)
    kind: OutcomeKind
    signature: str = ""  # the infrastructure incident's digest (infra)
    text: str = ""  # its normalised text (infra), or why the lane was silent
    files: int = 0  # registrations the lane held in the run (its files, or the probe's)


@dataclass(frozen=True)
class BreakerState:
    """One lane's breaker. ``seq`` counts its events: the state with the higher ``seq``
    is the newer (two histories merged keep the newer)."""

    lane: str
    status: BreakerStatus = "closed"
    seq: int = 0
    at: float = 0.0  # the newest event's time
    last_run: str = ""  # the newest run observed (a run is folded in once)
    # closed: the consecutive runs that failed the same way so far
    streak: tuple[RunRef, ...] = ()
    streak_kind: str = ""  # "infra:<digest>" or "silent"
    # open: the incident, the runs that opened it, when and by whom, and the recovery
    signature: str = ""
    text: str = ""
    runs: tuple[RunRef, ...] = ()
    opened_at: float | None = None
    opened_by: str = ""  # "" when its runs opened it; else the person who forced it
    reason: str = ""  # a forced open's or close's reason
    clean: int = 0  # consecutive clean probes
    held_runs: int = 0  # default-branch runs it held the lane back in (this episode)
    held_registrations: int = 0  # registrations it held back over those runs
    files: int = 0  # the lane's registrations when it opened
    # the last closed episode's end, for the report
    closed_at: float | None = None
    closed_by: str = ""

    @property
    def open(self) -> bool:
        return self.status == "open"

    def age_days(self, now: float) -> float:
        """Days the breaker has been open (0 when closed)."""
        if not self.open or self.opened_at is None:
            return 0.0
        return max(0.0, now - self.opened_at) / 86400

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": STATE_SCHEMA, "lane": self.lane, "status": self.status, "seq": self.seq,
            "at": self.at, "last_run": self.last_run,
            "streak": [r.to_json() for r in self.streak], "streak_kind": self.streak_kind,
            "signature": self.signature, "text": self.text,
            "runs": [r.to_json() for r in self.runs], "opened_at": self.opened_at,
            "opened_by": self.opened_by, "reason": self.reason, "clean": self.clean,
            "held_runs": self.held_runs, "held_registrations": self.held_registrations,
            "files": self.files, "closed_at": self.closed_at, "closed_by": self.closed_by,
        }


def _text(doc: dict[str, Any], key: str, limit: int = MAX_TEXT) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str) or len(value) > limit:
        raise StateError(f"{key}: want a string of at most {limit} characters")
    return value


def _count(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise StateError(f"{key}: want a whole number from 0 to {2**31 - 1}")
    return value


def _time(doc: dict[str, Any], key: str, optional: bool = False) -> Any:
    value = doc.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StateError(f"{key}: want a finite number of seconds")
    return float(value)


def _runs(doc: dict[str, Any], key: str) -> tuple[RunRef, ...]:
    value = doc.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_RUNS:
        raise StateError(f"{key}: want a list of at most {MAX_RUNS} runs")
    out = []
    for item in value:
        if not isinstance(item, dict) or set(item) - {"run", "url"}:
            raise StateError(f"{key}: each run is {{\"run\": ..., \"url\": ...}}")
        url = item.get("url")
        if url is not None and (not isinstance(url, str) or len(url) > 2000):
            raise StateError(f"{key}: a run's url must be a string of at most 2000 characters")
        out.append(RunRef(_text(item, "run", 255), url))
    return tuple(out)


def state_from_json(doc: Any) -> BreakerState:
    """A state from its JSON form; anything else is a :class:`StateError` saying what."""
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA:
        raise StateError(f"not a {STATE_SCHEMA} document")
    known = set(BreakerState.__dataclass_fields__) | {"schema"}
    extra = sorted(set(doc) - known)
    if extra:
        raise StateError(f"unknown keys: {', '.join(extra)[:200]}")
    status = doc.get("status")
    if status not in ("closed", "open"):
        raise StateError("status: want 'closed' or 'open'")
    lane = _text(doc, "lane", 255)
    if not lane:
        raise StateError("lane: empty")
    return BreakerState(
        lane=lane, status=status, seq=_count(doc, "seq"), at=_time(doc, "at"),
        last_run=_text(doc, "last_run", 255), streak=_runs(doc, "streak"),
        streak_kind=_text(doc, "streak_kind", 100), signature=_text(doc, "signature", 100),
        text=_text(doc, "text"), runs=_runs(doc, "runs"),
        opened_at=_time(doc, "opened_at", optional=True), opened_by=_text(doc, "opened_by"),
        reason=_text(doc, "reason"), clean=_count(doc, "clean"),
        held_runs=_count(doc, "held_runs"), held_registrations=_count(doc, "held_registrations"),
        files=_count(doc, "files"), closed_at=_time(doc, "closed_at", optional=True),
        closed_by=_text(doc, "closed_by"))


@dataclass(frozen=True)
class Episode:
    """One time a lane's breaker was open: opened, closed (None: still open), and what it
    held back."""

    lane: str
    opened_at: float
    opened_by: str
    signature: str
    text: str
    runs: tuple[RunRef, ...]
    closed_at: float | None = None
    closed_by: str = ""
    held_runs: int = 0
    held_registrations: int = 0
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"lane": self.lane, "opened_at": self.opened_at, "opened_by": self.opened_by,
                "signature": self.signature, "text": self.text,
                "runs": [r.to_json() for r in self.runs], "closed_at": self.closed_at,
                "closed_by": self.closed_by, "held_runs": self.held_runs,
                "held_registrations": self.held_registrations, "reason": self.reason}


@dataclass(frozen=True)
class Event:
    """One entry of a lane's log: what happened and the state after it."""

    kind: EventKind
    state: BreakerState
    run: str = ""  # the run observed ("" for a forced event)
