"""The report's results section: pass rates, failing files, strips, flaky files, probes.

Derived from the rows the application floor read (:mod:`testfleet.app.report_history`);
nothing here opens a database.

Read-only and fail-soft like the rest of the history: a database without results (or
with a schema older than the results columns) is a note, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from testfleet.results.flaky import FlakyVerdict
from testfleet.results.links import RunLinker
from testfleet.results.summary import FailingFile, FileSummary, StageSummary

RUNS = 20  # runs per file shown in the strips and pass rates
INCIDENT_RUNS = 10  # CI runs whose incidents the report shows


@dataclass(frozen=True)
class ProbeView:
    """A dormant stage's probe history: each probed file's newest results."""

    stage: str
    reason: str
    restore_after: int
    files: tuple[FileSummary, ...]

    @property
    def clean_streak(self) -> int:
        """Probes in a row (newest first) in which every probed file passed first time."""
        if not self.files:
            return 0
        return min(next((i for i, r in enumerate(f.runs) if not r.clean), len(f.runs))
                   for f in self.files)

    @property
    def ready(self) -> bool:
        return bool(self.files) and self.clean_streak >= self.restore_after


@dataclass(frozen=True)
class ResultsSection:
    available: bool
    note: str = ""
    runs: int = RUNS
    stages: tuple[StageSummary, ...] = ()
    failing: tuple[FailingFile, ...] = ()
    files: tuple[FileSummary, ...] = ()
    flaky: tuple[FlakyVerdict, ...] = ()  # every state but healthy
    quarantine: bool = False
    links: RunLinker = field(default_factory=RunLinker)
    probes: tuple[ProbeView, ...] = ()
    # incidents (#29): the newest runs' incidents, and index -> its dormancy line
    incidents: tuple[Any, ...] = ()
    dormancy: dict[int, Any] = field(default_factory=dict)

    def url(self, run: Any) -> str | None:
        return self.links.url(run.ci_run_id, run.commit)


def results_from(project: Any, rows: Sequence[Any], cases: Sequence[Any],
                 incidents: Sequence[Any], runs: int = RUNS) -> ResultsSection:
    """The section from the history's rows (read once by the application floor): file
    verdicts of the newest ``max(runs, flaky window)`` runs, test-case verdicts of the
    flaky window, the newest CI runs' incidents."""
    from testfleet.results.flaky import classify_all
    from testfleet.results.links import linker
    from testfleet.results.settings import flaky_policy
    from testfleet.results.summary import by_file, by_stage, failing_now

    cfg = project.config
    policy = flaky_policy(cfg)
    verdicts = [v for v in classify_all([*rows, *cases], policy) if v.state != "healthy"]
    files = by_file(rows)
    shown = tuple(FileSummary(f.stage, f.file, f.runs[:runs]) for f in files)
    link = linker(cfg.results.run_url, cfg.results.github_repository,
                  cfg.results.buildkite_pipeline, os.environ)
    note = "" if rows else "no results recorded yet"
    probes = []
    from testfleet.incidents.probes import probe_streak

    for name, stage in sorted(cfg.stages.items()):
        if stage.disabled is None or stage.probe is None:
            continue
        # without probe.files: the files the probe ran last (not every file of the stage)
        _, probed_files = probe_streak([r for f in shown if f.stage == name for r in f.runs],
                                       stage.probe.files)
        probed = [f for f in shown if f.stage == name and f.file in probed_files]
        probes.append(ProbeView(name, stage.disabled, stage.probe.restore_after, tuple(probed)))
    dormancy = _dormancy(project, incidents, link)
    return ResultsSection(True, note, runs, tuple(by_stage(shown)), tuple(failing_now(files)),
                          shown, tuple(verdicts), policy.quarantine, link, tuple(probes),
                          tuple(incidents), dormancy)


def _dormancy(project: Any, incidents: Sequence[Any], link: RunLinker) -> dict[int, Any]:
    from testfleet.incidents.render import dormancy

    return {n: d for n, i in enumerate(incidents)
            if (d := dormancy(project, i, link.url)) is not None}
