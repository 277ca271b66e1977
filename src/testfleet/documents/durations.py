"""``testfleet durations show`` and ``durations suggest``, ``--format json``
(``testfleet.durations/1``, ``testfleet.durations-suggest/1``)."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from testfleet.documents.base import closed
from testfleet.documents.registrations import InvalidDoc
from testfleet.documents.vocabulary import Source


@closed
class EstimateRowDoc(TypedDict):
    """What planning knows about one registration's duration (seconds), and why."""

    file: str
    stage: str
    """The lane: ``<stage>`` or ``<stage>.<variant>``."""
    backend: str
    est_time: float
    """The literal in the test file (or its implicit directory)."""
    history: float | None
    """The statistic over the measured passing runs, when there are enough samples."""
    samples: int
    estimate: float
    """What a plan uses: the statistic (or the literal), raised to a recent timeout."""
    source: Source
    drift: float | None
    """history / literal (2.0: twice as slow as declared), when both exist."""
    implicit: bool
    timeout: float | None
    """The longest recent execution that timed out, if any."""
    history_from: str | None
    """The stage whose history a variant without its own is planned on, else null."""


@closed
class DurationsDoc(TypedDict):
    """``durations show``: one row per registration."""

    schema: Literal["testfleet.durations/1"]
    statistic: Literal["median", "p90"]
    window: int
    min_samples: int
    rows: list[EstimateRowDoc]
    warnings: list[str]
    invalid: list[InvalidDoc]
    """Rejected registrations (no estimate; the command exits 1)."""


@closed
class SuggestionDoc(EstimateRowDoc):
    """A literal off from history by more than the factor, and what to write instead."""

    suggested: int
    written: str | None
    """With ``--write``: what happened to the literal (``updated line N: a -> b`` or
    ``skipped: why``); null otherwise."""


@closed
class DurationsSuggestDoc(TypedDict):
    """``durations suggest``: the literals that drifted."""

    schema: Literal["testfleet.durations-suggest/1"]
    factor: float
    suggestions: list[SuggestionDoc]
    warnings: list[str]
