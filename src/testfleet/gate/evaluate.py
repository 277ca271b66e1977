"""Evaluation: a run's recorded values against the mean of their trusted history.

Pure functions, no I/O: :func:`select` turns specs + records into the values of
each coordinate (or an ERROR), the caller reads the baselines of all those
coordinates in one batched query, and :func:`judge` / :func:`evaluate` give the
verdicts. Keeping the store read in the middle, outside, lets the same code run
with a real store, with no store (history unavailable) and in tests.

Per coordinate:
- ERROR: metric missing, series empty, required step missing, step duplicated,
  value non-finite, or the record lines of the metric were broken;
- INACTIVE: fewer than ``min_history`` trusted values (cold start is not a failure);
- PASS / FAIL: inside / outside the corridor around the mean of the last N trusted
  values; hard limits FAIL a coordinate whatever the history.
The run is trusted iff every coordinate is PASS or INACTIVE.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple

from testfleet.gate.records import MetricSeries, RecordSet
from testfleet.gate.spec import STEP_LAST, GateSpec

if TYPE_CHECKING:
    from testfleet.documents.gate import GateCountsDoc, NonFinite, SpecResultDoc, VerdictDoc

Status = Literal["PASS", "FAIL", "INACTIVE", "ERROR"]
_RANK = {"ERROR": 3, "FAIL": 2, "PASS": 1, "INACTIVE": 0}


class Coordinate(NamedTuple):
    """The stored identity of one gated value (within one run identity).

    A plain tuple on purpose: the store takes and returns these as tuples
    without depending on the gate package.
    """

    metric_key: str
    steps_key: str
    constraint_key: str
    step: int


@dataclass(frozen=True)
class Selected:
    """One coordinate's value taken from the records, or why it could not be."""

    spec: GateSpec
    step: int | None  # coordinate step (-1 for "last"); None when the spec has no coordinate yet
    actual_step: int | None = None
    value: float | None = None
    error: str | None = None

    @property
    def coordinate(self) -> Coordinate | None:
        if self.step is None:
            return None
        return Coordinate(self.spec.metric_key, self.spec.steps_key, self.spec.constraint_key,
                          self.step)


@dataclass(frozen=True)
class Verdict:
    """One coordinate's verdict, with everything needed to understand it."""

    spec: GateSpec
    step: int | None
    status: Status
    actual_step: int | None = None
    value: float | None = None
    reference: float | None = None
    lower: float | None = None
    upper: float | None = None
    abs_dev: float | None = None
    rel_dev: float | None = None
    n: int = 0
    message: str = ""

    def to_json(self) -> VerdictDoc:
        return {
            "file": self.spec.file, "metric_key": self.spec.metric_key,
            "steps_key": self.spec.steps_key, "constraint_key": self.spec.constraint_key,
            "step": self.step, "actual_step": self.actual_step, "status": self.status,
            "value": _json_number(self.value), "reference": self.reference,
            "lower": self.lower, "upper": self.upper, "abs_dev": self.abs_dev,
            "rel_dev": self.rel_dev, "n": self.n, "message": self.message,
            "enforce": self.spec.enforce,
        }


@dataclass
class SpecResult:
    """All verdicts of one declaration; ``first_fail_step`` names where a fanned-out gate broke."""

    spec: GateSpec
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def status(self) -> Status:
        if not self.verdicts:
            return "ERROR"
        return max((v.status for v in self.verdicts), key=lambda s: _RANK[s])

    @property
    def first_fail_step(self) -> int | None:
        failing = [v for v in self.verdicts if v.status == "FAIL"]
        if not failing:
            return None
        first = min(failing, key=lambda v: (v.actual_step if v.actual_step is not None else -1))
        return first.actual_step

    def counts(self) -> GateCountsDoc:
        out: GateCountsDoc = {"ERROR": 0, "FAIL": 0, "PASS": 0, "INACTIVE": 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out

    def to_json(self) -> SpecResultDoc:
        return {
            "file": self.spec.file, "line": self.spec.line, "metric_key": self.spec.metric_key,
            "label": self.spec.label, "status": self.status, "enforce": self.spec.enforce,
            "reason": self.spec.reason, "first_fail_step": self.first_fail_step,
            "counts": self.counts(), "verdicts": [v.to_json() for v in self.verdicts],
        }


def _json_number(v: float | None) -> float | NonFinite | None:
    if v is None or math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


# --------------------------------------------------------------------------- selection


def select_spec(spec: GateSpec, series: MetricSeries | None) -> list[Selected]:
    """The coordinates of ``spec`` with their values from ``series``."""
    explicit = spec.steps if isinstance(spec.steps, tuple) else None

    def all_error(msg: str) -> list[Selected]:
        if explicit is not None:
            return [Selected(spec, s, s, error=msg) for s in explicit]
        return [Selected(spec, STEP_LAST if spec.steps == "last" else None, error=msg)]

    if series is None:
        return all_error(f"metric {spec.metric_key!r} was not recorded")
    if series.problems:
        more = f" (+{len(series.problems) - 1} more)" if len(series.problems) > 1 else ""
        return all_error(f"broken record line: {series.problems[0]}{more}")
    if not series.points:
        return all_error(f"metric {spec.metric_key!r} has an empty series")
    by_step: dict[int, list[float]] = {}
    for step, value in series.points:
        by_step.setdefault(step, []).append(value)

    first, last = min(by_step), max(by_step)  # once: a steps list may name 10,000 missing steps
    span = f"{first}..{last}" if len(by_step) > 1 else str(first)

    def pick(coord: int, step: int) -> Selected:
        values = by_step.get(step)
        if values is None:
            return Selected(spec, coord, step, error=f"step {step} missing (recorded steps {span}, "
                            f"{len(by_step)} points)")
        if len(values) > 1:
            return Selected(spec, coord, step, error=f"step {step} recorded {len(values)} times")
        value = values[0]
        if not math.isfinite(value):
            return Selected(spec, coord, step, value=value,
                            error=f"value at step {step} is {_json_number(value)}")
        return Selected(spec, coord, step, value=value)

    if spec.steps == "last":
        return [pick(STEP_LAST, last)]
    if spec.steps == "all":
        return [pick(s, s) for s in sorted(by_step)]
    return [pick(s, s) for s in explicit or ()]


def select(specs: Sequence[GateSpec], records: RecordSet) -> list[Selected]:
    out: list[Selected] = []
    for spec in specs:
        out.extend(select_spec(spec, records.get(spec.metric_key)))
    return out


def coordinates(selected: Sequence[Selected]) -> list[Coordinate]:
    """The distinct coordinates whose history is needed (ERRORs need none)."""
    seen: dict[Coordinate, None] = {}
    for s in selected:
        c = s.coordinate
        if c is not None and s.error is None:
            seen[c] = None
    return list(seen)


# --------------------------------------------------------------------------- judging


def judge(sel: Selected, history: Sequence[float] | None, window: int) -> Verdict:
    """The verdict of one coordinate; ``history`` is newest-first trusted values, ``None`` if unknown."""
    spec = sel.spec
    if sel.error is not None:
        return Verdict(spec, sel.step, "ERROR", sel.actual_step, sel.value, message=sel.error)
    value = sel.value
    assert value is not None
    hard: list[str] = []
    if spec.hard_min is not None and value < spec.hard_min:
        hard.append(f"below hard_min {spec.hard_min:g}")
    if spec.hard_max is not None and value > spec.hard_max:
        hard.append(f"above hard_max {spec.hard_max:g}")
    used = list(history[:window]) if history is not None else []
    n = len(used)
    if history is None or n < spec.min_history:
        why = ("history unavailable" if history is None
               else f"cold start: {n} trusted value{'s' if n != 1 else ''}, "
                    f"{spec.min_history} needed")
        if hard:
            return Verdict(spec, sel.step, "FAIL", sel.actual_step, value, n=n,
                           message="; ".join(hard) + f" ({why})")
        return Verdict(spec, sel.step, "INACTIVE", sel.actual_step, value, n=n, message=why)
    reference = math.fsum(used) / n
    lower, upper = spec.corridor(reference)
    abs_dev = value - reference
    rel_dev = abs_dev / abs(reference) if reference != 0 else None
    problems = list(hard)
    if value < lower:
        problems.append("below the corridor")
    elif value > upper:
        problems.append("above the corridor")
    status: Status = "FAIL" if problems else "PASS"
    return Verdict(spec, sel.step, status, sel.actual_step, value, reference, lower, upper,
                   abs_dev, rel_dev, n, "; ".join(problems))


def evaluate(
    selected: Sequence[Selected],
    baselines: Mapping[Coordinate, Sequence[float]] | None,
    window: int,
) -> list[SpecResult]:
    """Verdicts grouped per spec, in declaration order. ``baselines=None``: history unavailable."""
    results: dict[int, SpecResult] = {}
    for sel in selected:
        coord = sel.coordinate
        history: Sequence[float] | None
        if baselines is None:
            history = None
        else:
            history = baselines.get(coord, ()) if coord is not None else ()
        result = results.setdefault(id(sel.spec), SpecResult(sel.spec))
        result.verdicts.append(judge(sel, history, window))
    return list(results.values())


def run_trusted(results: Sequence[SpecResult]) -> bool:
    """A run may enter the baseline only when every coordinate is PASS or INACTIVE."""
    return all(v.status in ("PASS", "INACTIVE") for r in results for v in r.verdicts) and all(
        r.verdicts for r in results
    )
