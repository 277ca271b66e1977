"""Flakiness of one file (or one test) in one stage, from its recent final verdicts. Pure.

Evidence, over the newest ``window`` runs:

- a **pass on a retry** (``FLAKY``): it failed and passed in the same run;
- a **split commit**: on one commit it both failed and passed in different runs, so the
  failure was not the code's. Every failing run on such a commit counts.

``rate`` = runs with evidence / runs. A file is

- ``broken`` when every run in the window failed: no evidence of a pass at all, so it
  is a real failure (or dead infrastructure), never hidden by quarantine;
- ``flaky`` when it has evidence, at least ``min_runs`` runs and ``rate >= threshold``;
- ``recovered`` when it would be flaky but its newest ``restore_after`` runs are clean
  passes (first attempt): a quarantine lifts by itself;
- ``healthy`` otherwise (a file that started failing on one commit and kept failing is
  healthy here and failing in the results: a regression, not noise).

A run counts once (:func:`one_per_run`): several executions of one file in one CI run
(a file two shards both ran, a session's pytest-xdist workers each recording their half,
an older testfleet) are one run whose verdict is the worst of them. They are never
evidence against each other: half a file passing beside the half that fails is not a
pass. So a file that fails every time is broken, never flaky. (Rows without a CI run id
are separate local runs.)

The verdict is per stage: a file flaky on H200 says nothing about MI300X.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, get_args

from testfleet.documents.vocabulary import FlakyState
from testfleet.results.model import RunResult

if TYPE_CHECKING:
    from testfleet.documents.results import FlakyVerdictDoc

STATES: tuple[FlakyState, ...] = get_args(FlakyState)


@dataclass(frozen=True)
class FlakyPolicy:
    """``[tool.testfleet.flaky]`` as the pure functions need it."""

    window: int = 30
    threshold: float = 0.1
    min_runs: int = 3
    quarantine: bool = False
    restore_after: int = 5


@dataclass(frozen=True)
class FlakyVerdict:
    """The state of one (file, stage[, test]) and the evidence behind it."""

    file: str
    stage: str
    state: FlakyState
    runs: int
    evidence_runs: int
    retry_passes: int
    failures: int
    split_commits: tuple[str, ...] = ()
    clean_streak: int = 0
    quarantined: bool = False
    test: str = ""
    evidence: tuple[RunResult, ...] = field(default=(), compare=False)

    @property
    def rate(self) -> float:
        return self.evidence_runs / self.runs if self.runs else 0.0

    def to_json(self) -> FlakyVerdictDoc:
        out: FlakyVerdictDoc = {
            "file": self.file, "stage": self.stage, "state": self.state,
            "rate": round(self.rate, 4), "runs": self.runs, "evidence_runs": self.evidence_runs,
            "retry_passes": self.retry_passes, "failures": self.failures,
            "split_commits": list(self.split_commits), "clean_streak": self.clean_streak,
            "quarantined": self.quarantined,
            "evidence": [{"ci_run_id": r.ci_run_id, "commit": r.commit, "outcome": r.outcome,
                          "ts": r.ts} for r in self.evidence],
        }
        if self.test:
            out["test"] = self.test
        return out


#: worst first: the one verdict of several executions in one run
_SEVERITY = ("TIMEOUT", "ERROR", "FAILED", "FLAKY", "PASSED")


def one_per_run(runs: Sequence[RunResult]) -> list[RunResult]:
    """``runs`` (newest first) with the executions of each CI run (same ``ci_run_id`` and
    commit) folded into one, at the newest one's place, with the worst outcome among
    them; runs without a CI run id stay as they are."""
    groups: dict[tuple[str, str | None], list[RunResult]] = {}
    for r in runs:
        if r.ci_run_id is not None:
            groups.setdefault((r.ci_run_id, r.commit), []).append(r)
    out: list[RunResult] = []
    for r in runs:
        if r.ci_run_id is None:
            out.append(r)
            continue
        group = groups.get((r.ci_run_id, r.commit))
        if group is None or group[0] is not r:
            continue  # folded into its run's newest execution
        worst = min(group, key=lambda g: _SEVERITY.index(g.outcome)
                    if g.outcome in _SEVERITY else len(_SEVERITY))
        out.append(r if worst.outcome == r.outcome else replace(r, outcome=worst.outcome))
    return out


def classify(runs: Sequence[RunResult], policy: FlakyPolicy) -> FlakyVerdict | None:
    """The verdict on one key's runs (newest first, all of one file/stage/test);
    ``None`` when there are no runs."""
    window = [r for r in one_per_run(runs) if r.passed or r.failed][:policy.window]
    if not window:
        return None
    first = window[0]
    passing_commits = {r.commit for r in window if r.passed and r.commit}
    failing_commits = {r.commit for r in window if r.failed and r.commit}
    split = passing_commits & failing_commits
    evidence = [r for r in window
                if r.outcome == "FLAKY" or (r.failed and r.commit in split)]
    failures = sum(1 for r in window if r.failed)
    streak = 0
    for r in window:
        if not r.clean:
            break
        streak += 1
    rate = len(evidence) / len(window)
    state: FlakyState
    if failures == len(window):
        state = "broken"
    elif evidence and len(window) >= policy.min_runs and rate >= policy.threshold:
        state = "recovered" if streak >= policy.restore_after else "flaky"
    else:
        state = "healthy"
    return FlakyVerdict(
        file=first.file, stage=first.stage, state=state, runs=len(window),
        evidence_runs=len(evidence), retry_passes=sum(1 for r in window if r.outcome == "FLAKY"),
        failures=failures, split_commits=tuple(sorted(split)), clean_streak=streak,
        quarantined=policy.quarantine and state == "flaky", test=first.test,
        evidence=tuple(evidence))


def classify_all(results: Sequence[RunResult], policy: FlakyPolicy) -> list[FlakyVerdict]:
    """Every key's verdict, sorted by (stage, file, test); runs may come in any order."""
    groups: dict[tuple[str, str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.stage, r.file, r.test), []).append(r)
    out: list[FlakyVerdict] = []
    for key in sorted(groups):
        runs = sorted(groups[key], key=lambda r: r.ts, reverse=True)
        verdict = classify(runs, policy)
        if verdict is not None:
            out.append(verdict)
    return out


def quarantined_files(verdicts: Sequence[FlakyVerdict]) -> dict[tuple[str, str], FlakyVerdict]:
    """(stage, file) -> verdict of each quarantined file (per-test verdicts do not quarantine a file)."""
    return {(v.stage, v.file): v for v in verdicts if v.quarantined and not v.test}
