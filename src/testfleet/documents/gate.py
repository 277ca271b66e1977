"""``testfleet gate evaluate`` and ``gate history``, ``--format json``
(``testfleet.gate-evaluate/1``, ``testfleet.gate-history/1``)."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict

from testfleet.documents.base import closed
from testfleet.documents.check import FindingDoc
from testfleet.documents.vocabulary import GateMode, GateStatus

#: a recorded value JSON cannot hold as a number (the gate judges it ERROR)
NonFinite = Literal["NaN", "Infinity", "-Infinity"]


@closed
class GateCountsDoc(TypedDict):
    """How many of a declaration's verdicts have each status."""

    ERROR: int
    FAIL: int
    PASS: int
    INACTIVE: int


@closed
class VerdictDoc(TypedDict):
    """One coordinate's verdict: the value against the mean of its trusted history."""

    file: str
    metric_key: str
    steps_key: str
    """The declaration's steps as canonical JSON (``"last"``, ``[0,10,20]``)."""
    constraint_key: str
    """The declaration's corridor as canonical JSON."""
    step: int | None
    """The coordinate's step (-1: the last step); null when no coordinate was found."""
    actual_step: int | None
    """The step the value was taken at (for ``last``, the last recorded step)."""
    status: GateStatus
    value: float | NonFinite | None
    reference: float | None
    """The mean of the trusted history the value was compared with."""
    lower: float | None
    upper: float | None
    abs_dev: float | None
    rel_dev: float | None
    n: int
    """Trusted values the reference is the mean of."""
    message: str
    enforce: bool


@closed
class SpecResultDoc(TypedDict):
    """All verdicts of one ``register_ci_gate(...)`` declaration."""

    file: str
    line: int
    metric_key: str
    label: str
    status: GateStatus
    """The worst of its verdicts (ERROR when it has none)."""
    enforce: bool
    reason: str | None
    first_fail_step: int | None
    counts: GateCountsDoc
    verdicts: list[VerdictDoc]


@closed
class GateEvaluateDoc(TypedDict):
    """The gate's verdict on one test's records."""

    schema: Literal["testfleet.gate-evaluate/1"]
    fails_test: bool
    trusted: bool | None
    """Whether the run may join the baseline; null when nothing was evaluated."""
    written: bool
    """The run's values were stored (a cadence that writes baselines)."""
    status: GateStatus | None
    """The file's verdict, worst first; null when it is not gated."""
    mode: GateMode | None
    history_available: bool
    specs: list[SpecResultDoc]
    declaration_errors: list[FindingDoc]
    lines: list[str]
    """What the runner prints, one line each."""


@closed
class GateValueDoc(TypedDict):
    """One stored value with the gated run it belongs to."""

    run_pk: int
    run_id: str
    recorded_at: float
    trusted: bool
    ci_run_id: str | None
    commit: str | None
    backend: str
    suite: str
    env_key: str
    metric_key: str
    steps_key: str
    constraint_key: str
    step: int
    actual_step: int | None
    value: float
    untrusted_by: str | None
    """What took the run out of the baseline (a verdict, ``gate untrust``, a bundle)."""


@closed
class GateHistoryDoc(TypedDict):
    """Stored values of a test's gated runs, newest run first."""

    schema: Literal["testfleet.gate-history/1"]
    test: str
    metric: str | None
    values: list[GateValueDoc]
