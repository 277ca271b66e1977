"""Each stage's health from its recorded results: passing, failing or broken. Pure.

The coverage matrix says what a stage *would* run; this says how its runs went, so that
a stage whose tests fail every night is never drawn as a green "active" stage.

- **failing**: at least one of the stage's files failed its last run (the same files
  "Failing now" lists, so the two can never disagree);
- **broken**: one of those files has failed :data:`BROKEN_AFTER` or more runs in a row:
  one failure may be a bad commit, a second a bad retry; three in a row is a failure
  nobody is fixing;
- **passing**: results are recorded and the last run of every file passed.

A stage without recorded results has no health at all (not "passing"). Each stage also
carries its last run: the CI run (or, without a run id, the commit) of its newest
result, when it ran, whether any file failed in it, and its link where one is known.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from testfleet.documents.vocabulary import State

if TYPE_CHECKING:
    from testfleet.documents.report import HealthDoc, LastRunDoc

BROKEN_AFTER = 3

STATES: tuple[State, ...] = ("broken", "failing", "passing")  # most urgent first


def when(ts: float) -> str:
    """A result's time as the report prints it (UTC, to the minute)."""
    try:
        return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return "?"


@dataclass(frozen=True)
class LastRun:
    """A stage's newest run: every result that shares its CI run id (or commit)."""

    ts: float
    outcome: Literal["PASSED", "FAILED"]
    ci_run_id: str | None = None
    commit: str | None = None
    url: str | None = None

    @property
    def when(self) -> str:
        return when(self.ts)

    @property
    def label(self) -> str:
        """How the run is named in a cell: its CI run id, else its commit, else its time."""
        if self.ci_run_id:
            return f"run {self.ci_run_id}"
        if self.commit:
            return f"commit {self.commit[:12]}"
        return self.when

    def to_json(self) -> LastRunDoc:
        return {"ts": self.ts, "when": self.when, "outcome": self.outcome,
                "ci_run_id": self.ci_run_id, "commit": self.commit, "url": self.url}


@dataclass(frozen=True)
class StageHealth:
    stage: str
    state: State
    last: LastRun
    failing_files: int = 0
    streak: int = 0  # the longest run of failures in a row of one of its failing files
    complete: bool = True  # False: every run read of that file failed (streak is a lower bound)
    since: float | None = None  # when that streak began
    file: str | None = None  # the file with that streak

    @property
    def failing(self) -> bool:
        return self.state != "passing"

    @property
    def streak_text(self) -> str:
        """``≥7 runs in a row`` / ``1 run``; empty when passing."""
        if not self.failing:
            return ""
        bound = "" if self.complete else "≥"
        return f"{bound}{self.streak} run{'s' if self.streak != 1 else ''} in a row"

    @property
    def summary(self) -> str:
        """One line: the state and why (``broken: tests/x.py failed ≥7 runs in a row``)."""
        if not self.failing:
            return f"passing: every file passed its last run ({self.last.label}, {self.last.when})"
        more = (f" (and {self.failing_files - 1} more file"
                f"{'s' if self.failing_files > 2 else ''} failing)" if self.failing_files > 1 else "")
        return f"{self.state}: {self.file} failed {self.streak_text}{more}"

    def to_json(self) -> HealthDoc:
        return {"state": self.state, "failing_files": self.failing_files, "streak": self.streak,
                "streak_complete": self.complete, "since": self.since, "file": self.file,
                "summary": self.summary, "last_run": self.last.to_json()}


def stage_health(files: Sequence[Any], failing: Sequence[Any],
                 url: Callable[[Any], str | None] = lambda run: None) -> tuple[StageHealth, ...]:
    """Health of every stage with results. ``files`` are per-file summaries (``stage``,
    ``runs`` newest first), ``failing`` the files whose last run failed (``stage``,
    ``file``, ``streak``, ``since``, ``complete``), ``url(run)`` a run's CI link."""
    runs: dict[str, list[Any]] = {}
    for f in files:
        runs.setdefault(f.stage, []).extend(f.runs)
    worst: dict[str, Any] = {}
    count: dict[str, int] = {}
    for f in failing:
        count[f.stage] = count.get(f.stage, 0) + 1
        best = worst.get(f.stage)
        if best is None or (f.streak, -f.since) > (best.streak, -best.since):
            worst[f.stage] = f
    out = []
    for stage in sorted(set(runs) | set(worst)):
        last = _last_run(runs.get(stage, []), url)
        w = worst.get(stage)
        if w is None:
            if last is not None:
                out.append(StageHealth(stage, "passing", last))
            continue
        if last is None:  # failing, but its runs were not read (cannot happen from one query)
            last = LastRun(w.last.ts, "FAILED", w.last.ci_run_id, w.last.commit, url(w.last))
        state: State = "broken" if w.streak >= BROKEN_AFTER else "failing"
        out.append(StageHealth(stage, state, last, count[stage], w.streak, w.complete, w.since,
                               w.file))
    return tuple(out)


def _last_run(runs: Sequence[Any], url: Callable[[Any], str | None]) -> LastRun | None:
    if not runs:
        return None
    newest = max(runs, key=lambda r: r.ts)
    if newest.ci_run_id:
        same = [r for r in runs if r.ci_run_id == newest.ci_run_id]
    elif newest.commit:
        same = [r for r in runs if not r.ci_run_id and r.commit == newest.commit]
    else:
        same = [newest]
    outcome: Literal["PASSED", "FAILED"] = "FAILED" if any(r.failed for r in same) else "PASSED"
    return LastRun(newest.ts, outcome, newest.ci_run_id, newest.commit, url(newest))
