"""Per-file and per-stage summaries of final verdicts, for ``testfleet results`` and the report. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from testfleet.results.model import RunResult

if TYPE_CHECKING:
    from testfleet.documents.results import ResultFileDoc

LETTERS = {"PASSED": "P", "FLAKY": "R", "FAILED": "F", "TIMEOUT": "T", "ERROR": "E"}


@dataclass(frozen=True)
class FileSummary:
    """One (stage, file): its recent runs (newest first) and what they add up to."""

    stage: str
    file: str
    runs: tuple[RunResult, ...]

    @property
    def last(self) -> RunResult:
        return self.runs[0]

    @property
    def passes(self) -> int:
        return sum(1 for r in self.runs if r.passed)

    @property
    def pass_rate(self) -> float:
        return self.passes / len(self.runs)

    @property
    def failing_streak(self) -> tuple[RunResult, ...]:
        """The newest runs that failed in a row (empty when the last run passed)."""
        out: list[RunResult] = []
        for r in self.runs:
            if not r.failed:
                break
            out.append(r)
        return tuple(out)

    @property
    def strip(self) -> str:
        """One letter per run, oldest first (P pass, R pass on retry, F fail, T timeout, E error)."""
        return "".join(LETTERS.get(r.outcome, "?") for r in reversed(self.runs))


@dataclass(frozen=True)
class FailingFile:
    """A file whose last run failed: since when, and the first failing commit of the streak.

    ``complete`` is False when every run read failed, so the streak may be older than
    what was read (the oldest failure read is then a lower bound)."""

    stage: str
    file: str
    streak: int
    since: float
    first_commit: str | None
    first_run_id: str | None
    last: RunResult
    complete: bool


@dataclass(frozen=True)
class StageSummary:
    stage: str
    files: int
    runs: int
    passes: int
    last_outcome: Literal["PASSED", "FAILED"]  # of the stage's newest run: FAILED if any file failed in it
    last_ts: float
    last_run_id: str | None

    @property
    def pass_rate(self) -> float:
        return self.passes / self.runs if self.runs else 0.0


def by_file(results: Sequence[RunResult]) -> list[FileSummary]:
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        if not r.test:
            groups.setdefault((r.stage, r.file), []).append(r)
    return [FileSummary(stage, file, tuple(sorted(runs, key=lambda r: r.ts, reverse=True)))
            for (stage, file), runs in sorted(groups.items())]


def failing_now(files: Sequence[FileSummary]) -> list[FailingFile]:
    """Files whose last run failed, longest-failing first."""
    out = []
    for f in files:
        streak = f.failing_streak
        if not streak:
            continue
        first = streak[-1]
        out.append(FailingFile(f.stage, f.file, len(streak), first.ts, first.commit,
                               first.ci_run_id, f.last, len(streak) < len(f.runs)))
    return sorted(out, key=lambda x: (x.since, x.stage, x.file))


def by_stage(files: Sequence[FileSummary]) -> list[StageSummary]:
    """Per stage: pass rate over the runs read, and the newest run's outcome: a stage's
    newest run is the CI run id (or, without one, the commit) of its newest result."""
    stages: dict[str, list[FileSummary]] = {}
    for f in files:
        stages.setdefault(f.stage, []).append(f)
    out = []
    for stage, group in sorted(stages.items()):
        runs = [r for f in group for r in f.runs]
        newest = max(runs, key=lambda r: r.ts)
        key = (newest.ci_run_id, None) if newest.ci_run_id else (None, newest.commit)
        same = [r for r in runs if (r.ci_run_id, None if r.ci_run_id else r.commit) == key] \
            if (newest.ci_run_id or newest.commit) else [newest]
        last: Literal["PASSED", "FAILED"] = "FAILED" if any(r.failed for r in same) else "PASSED"
        out.append(StageSummary(stage, len(group), len(runs), sum(1 for r in runs if r.passed),
                                last, newest.ts, newest.ci_run_id))
    return out


def summary_json(f: FileSummary, url: Any = None) -> ResultFileDoc:
    """A file's JSON form; ``url(run)`` adds each run's CI link."""
    return {
        "stage": f.stage, "file": f.file, "pass_rate": round(f.pass_rate, 4),
        "last": f.last.outcome, "strip": f.strip,
        "runs": [{**r.to_json(), "url": url(r) if url else None} for r in f.runs],
    }
