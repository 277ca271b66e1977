"""Per (file, stage) duration estimates: measured history where there is enough of
it, the file's literal ``est_time`` otherwise.

The statistic is robust on purpose (median by default, p90 configurable) over the
last ``durations.window`` *passing* executions in that stage: one slow outlier must not
move a shard, and a file's H200 time never stands in for its MI300X time. A timeout is
different: it says the file needs *at least* that long, and a file that keeps timing
out has no passing samples to learn from. So when any of the file's last ``window``
executions in that stage (all outcomes) timed out, the estimate is at least the longest
such duration, and the warnings name those files. History is read through a read-only store open that never creates or migrates
anything; when the database is missing, locked, corrupt or of a newer schema,
estimates fall back to the literals and the returned warnings say so — a plan never
fails because history is unavailable.

Everything here is pure (planning does no I/O): the application floor reads the samples
once (:mod:`testfleet.app.estimates`) and hands them to :func:`compute`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testfleet.registry.model import Registration

if TYPE_CHECKING:
    from testfleet.config import DurationsConfig
    from testfleet.documents.vocabulary import Source

Key = tuple[str, str]  # (file, stage)
History = Mapping[str, Mapping[str, Sequence[float]]]  # stage -> file -> durations, newest first
Timeouts = Mapping[str, Mapping[str, float]]  # stage -> file -> longest recent TIMEOUT duration
# The timed-out-files warning names at most this many (file, stage) pairs.
MAX_TIMEOUTS_NAMED = 10


@dataclass(frozen=True)
class EstimateRow:
    """What planning knows about one registration's duration, and why."""

    file: str
    stage: str
    backend: str
    literal: float
    history: float | None  # the statistic over the samples, when there are enough
    samples: int  # passing executions in the window
    line: int
    implicit: bool
    timeout: float | None = None  # longest TIMEOUT among the last ``window`` executions
    # A variant with no measured history of its own is planned on its stage's; this names
    # that stage, so that ``durations show`` says what the plan uses.
    history_from: str | None = None

    @property
    def estimate(self) -> float:
        """The statistic (or the literal), raised to the longest recent timeout."""
        base = self.history if self.history is not None else self.literal
        return base if self.timeout is None else max(base, self.timeout)

    @property
    def source(self) -> Source:
        """``history`` when measured history (samples or a timeout) decided the value."""
        if self.history is not None:
            return "history"
        if self.timeout is not None and self.timeout > self.literal:
            return "history"
        return "est_time"

    @property
    def drift(self) -> float | None:
        """history / literal (2.0 = twice as slow as declared), when both exist."""
        if self.history is None or self.literal <= 0:
            return None
        return self.history / self.literal


def statistic(samples: Sequence[float], kind: str) -> float:
    """``median`` or ``p90`` (linear interpolation between order statistics)."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    q = {"median": 0.5, "p90": 0.9}.get(kind)
    if q is None:
        raise ValueError(f"unknown statistic {kind!r}; valid: median, p90")
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def compute(registrations: Iterable[Registration], history: History,
            settings: DurationsConfig, stages: Iterable[str] | None = None,
            timeouts: Timeouts | None = None) -> list[EstimateRow]:
    """One row per registration; history counts only for ``stages`` (all when None)
    and only with at least ``settings.min_samples`` samples. ``timeouts`` (the longest
    recent timed-out duration per stage and file) is a lower bound on the estimate
    whatever the sample count."""
    allowed = None if stages is None else set(stages)
    rows = []
    for reg in registrations:
        samples: Sequence[float] = ()
        timeout: float | None = None
        if allowed is None or reg.suite in allowed:
            samples = list(history.get(reg.suite, {}).get(reg.file, ()))[: settings.window]
            timeout = (timeouts or {}).get(reg.suite, {}).get(reg.file)
        value = (statistic(samples, settings.statistic)
                 if samples and len(samples) >= settings.min_samples else None)
        rows.append(EstimateRow(
            file=reg.file, stage=reg.suite, backend=reg.backend, literal=float(reg.est_time),
            history=value, samples=len(samples), line=reg.line, implicit=reg.implicit,
            timeout=timeout,
        ))
    return rows


def timeout_warning(rows: Iterable[EstimateRow], window: int) -> list[str]:
    """One warning naming the files whose recent history has a timeout (at most
    :data:`MAX_TIMEOUTS_NAMED` of them, longest first), or none."""
    hit = sorted({(row.stage, row.file): row.timeout for row in rows if row.timeout is not None}.items(),
                 key=lambda kv: (-kv[1], kv[0]))
    if not hit:
        return []
    named = ", ".join(f"{file} [{stage}] ({seconds:,.0f}s)"
                      for (stage, file), seconds in hit[:MAX_TIMEOUTS_NAMED])
    more = f" and {len(hit) - MAX_TIMEOUTS_NAMED} more" if len(hit) > MAX_TIMEOUTS_NAMED else ""
    return [f"{len(hit)} file(s) timed out in their last {window} run(s); each estimate is at "
            f"least the timed-out duration: {named}{more}"]


def registrations_of(value: Any) -> list[Registration]:
    """Accept a ``Registry`` or any iterable of registrations."""
    regs = getattr(value, "registrations", value)
    return list(regs)


def lane_registrations(config: Any, regs: Iterable[Registration]) -> list[Registration]:
    """A stage variant runs on other hardware, so its history is its own, keyed by the lane
    ``<stage>.<variant>``: one copy of each registration per variant of its backend, whose
    estimate the planner prefers when it comes from history (else the stage's is used)."""
    from dataclasses import replace

    from testfleet.planning.lanes import stage_lanes

    if not any(stage.variants for stage in config.stages.values()):
        return []
    lanes = {name: stage_lanes(config, name) for name, stage in config.stages.items()
             if stage.variants}
    return [replace(r, suite=lane.key) for r in regs for lane in lanes.get(r.suite, ())
            if lane.backend == r.backend]


def variant_stages(config: Any) -> dict[str, str]:
    """Each variant's lane key -> its stage's name."""
    from testfleet.planning.lanes import stage_lanes

    return {lane.key: name for name, stage in config.stages.items() if stage.variants
            for lane in stage_lanes(config, name)}


def fall_back_to_stages(rows: list[EstimateRow], parents: dict[str, str]) -> list[EstimateRow]:
    """The planner's rule (:func:`~testfleet.planning.lanes.uses_stage_estimate`), shown: a
    variant's row takes its stage's history when it has none of its own."""
    if not parents:
        return rows
    from dataclasses import replace

    from testfleet.planning.lanes import uses_stage_estimate

    stage_rows = {(r.file, r.stage): r for r in rows if r.stage not in parents}
    out = []
    for row in rows:
        stage = parents.get(row.stage)
        base = stage_rows.get((row.file, stage)) if stage is not None else None
        if base is not None and uses_stage_estimate(row.source, base.source):
            row = replace(row, history=base.history, samples=base.samples, timeout=base.timeout,
                          history_from=stage)
        out.append(row)
    return out
