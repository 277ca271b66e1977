"""``testfleet breaker list --format json`` (``testfleet.breakers/1``): each lane's
runner-class breaker (#41), its state and its episodes."""

from __future__ import annotations

from typing import Final, Literal

from typing_extensions import TypedDict

from testfleet.documents.base import closed

SCHEMA: Final = "testfleet.breakers/1"


@closed
class BreakerRunDoc(TypedDict):
    """A default-branch CI run, with its link when known."""

    run: str
    url: str | None


@closed
class BreakerEpisodeDoc(TypedDict):
    """One time the breaker was open."""

    opened_at: float
    opened_by: str
    """Who forced it open; "" when its runs opened it."""
    signature: str
    text: str
    runs: list[BreakerRunDoc]
    closed_at: float | None
    """None: still open."""
    closed_by: str
    held_runs: int
    held_registrations: int
    reason: str


@closed
class BreakerLaneDoc(TypedDict):
    """One lane with a breaker (or with a log of one)."""

    lane: str
    opted_in: bool
    open_after: int
    close_after: int
    max_open_days: float
    status: Literal["closed", "open"]
    since: float | None
    """When it opened (open) or last closed (closed); None: never."""
    age_days: float
    streak: int
    """Closed: default-branch runs in a row that failed the same infrastructure way."""
    clean: int
    """Open: clean probes in a row."""
    signature: str
    text: str
    runs: list[BreakerRunDoc]
    opened_by: str
    reason: str
    episodes: list[BreakerEpisodeDoc]


@closed
class BreakersDoc(TypedDict):
    """``testfleet breaker list --format json``."""

    schema: Literal["testfleet.breakers/1"]
    lanes: list[BreakerLaneDoc]
