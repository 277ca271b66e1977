"""The report's one read of the history: durations, metric-gate history, results, test
cases, incidents and the quarantine, all from one read-only open of the database.

``report/`` derives its sections from these values and opens nothing. Every problem is
a note in the report, never a failure (the report must work on a fresh checkout), with
the same wording as when each section read the history on its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from testfleet.report.model import HistorySection
from testfleet.report.results import ResultsSection

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.registry.model import Registration, Registry


@dataclass(frozen=True)
class ReportHistory:
    """What the history adds to a report."""

    history: HistorySection
    results: ResultsSection
    #: (stage, file) of each file the plan would quarantine (the plan's own rule, so the
    #: matrix's "at risk" is exactly what ``testfleet plan`` quarantines)
    quarantined: set[tuple[str, str]] = field(default_factory=set)


def read_report_history(project: Project, registry: Registry, url: str | None = None
                        ) -> ReportHistory:
    """Open the history read-only once and read every section from it."""
    drift_factor = project.config.durations.drift_factor
    try:
        from testfleet.store import StoreError, open_store
    except ImportError as exc:  # pragma: no cover - the store ships with testfleet
        return ReportHistory(HistorySection(False, f"history store unavailable: {exc}",
                                            drift_factor=drift_factor),
                             ResultsSection(False, f"no results: {exc}"))
    try:
        store = open_store(project, url, readonly=True)
    except StoreError as exc:
        return ReportHistory(HistorySection(False, f"no history: {exc}", drift_factor=drift_factor),
                             ResultsSection(False, f"no results: {exc}"))
    with store:
        history = _history(store, project, registry.registrations,
                           sorted({g.file for g in registry.gates}))
        results, rows = _results(store, project)
    return ReportHistory(history, results, _quarantined(project, rows))


def _history(store: Any, project: Project, registrations: Sequence[Registration],
             gate_files: Sequence[str]) -> HistorySection:
    """Durations (and metric history when the store has it); notes instead of errors."""
    from testfleet.report.history import drift_rows
    from testfleet.store import StoreError

    cfg = project.config
    notes: list[str] = []
    try:
        measured = _durations(store, registrations, cfg.durations.window)
        gates, trends, gate_note = _metrics(store, project, gate_files)
        if gate_note:
            notes.append(gate_note)
    except StoreError as exc:
        return HistorySection(False, f"history unreadable: {exc}", drift_factor=cfg.durations.drift_factor)
    drift = drift_rows(registrations, measured, cfg)
    if not measured:
        notes.insert(0, "no durations recorded yet")
    return HistorySection(True, "; ".join(notes), drift=tuple(drift),
                          drift_factor=cfg.durations.drift_factor, gates=gates, trends=trends)


def _durations(store: Any, regs: Sequence[Registration], window: int) -> dict[tuple[str, str], list[float]]:
    by_stage: dict[str, set[str]] = defaultdict(set)
    for reg in regs:
        if reg.disabled is None:
            by_stage[reg.suite].add(reg.file)
    out: dict[tuple[str, str], list[float]] = {}
    for stage, files in sorted(by_stage.items()):
        for file, values in store.durations(stage, sorted(files), window).items():
            out[(stage, file)] = list(values)
    return out


def _metrics(store: Any, project: Project, gate_files: Sequence[str]) -> tuple[Any, Any, str]:
    """Gate rows and trend series; a database without the gate tables yet is a note."""
    if not gate_files:
        return (), (), ""
    from sqlalchemy.exc import SQLAlchemyError

    from testfleet.report.gates import RUNS_PER_TEST, gate_section
    from testfleet.store import StoreError
    from testfleet.store.metric_store import MetricStore

    try:
        ms = MetricStore(store)
        histories = {file: ms.history(file, runs=RUNS_PER_TEST) for file in sorted(set(gate_files))}
    except (SQLAlchemyError, StoreError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return (), (), f"metric history unreadable ({first}); run 'testfleet db upgrade'"
    return gate_section(histories, project.config.gate.window)


def _results(store: Any, project: Project) -> tuple[ResultsSection, list[Any] | None]:
    """The results section, and the file verdict rows it came from (None: unreadable)."""
    from sqlalchemy.exc import SQLAlchemyError

    from testfleet.incidents.history import recent_incidents
    from testfleet.report.results import INCIDENT_RUNS, RUNS, results_from
    from testfleet.results.query import case_results, file_results
    from testfleet.results.settings import flaky_policy
    from testfleet.store.errors import StoreError

    policy = flaky_policy(project.config)
    try:
        rows = file_results(store, runs=max(RUNS, policy.window))
    except (SQLAlchemyError, StoreError) as exc:
        return _unreadable(exc), None
    try:
        cases = case_results(store, runs=policy.window)
    except (SQLAlchemyError, StoreError) as exc:
        return _unreadable(exc), rows
    try:
        incidents = recent_incidents(store, runs=INCIDENT_RUNS)
    except StoreError as exc:
        return ResultsSection(False, f"no results: {exc}"), rows
    return results_from(project, rows, cases, incidents), rows


def _unreadable(exc: Exception) -> ResultsSection:
    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return ResultsSection(False, f"results unreadable ({first}); run 'testfleet db upgrade'")


def _quarantined(project: Project, rows: list[Any] | None) -> set[tuple[str, str]]:
    """The plan's quarantine rule on the rows already read: each (stage, file)'s newest
    ``flaky.window`` verdicts, as :func:`testfleet.results.quarantine.quarantine_for` reads
    them for a plan."""
    if not project.config.flaky.quarantine or rows is None:
        return set()
    from testfleet.results.flaky import classify_all, quarantined_files
    from testfleet.results.settings import flaky_policy

    policy = flaky_policy(project.config)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    window = []
    for row in rows:  # newest first within each (stage, file)
        key = (row.stage, row.file)
        if seen[key] < policy.window:
            seen[key] += 1
            window.append(row)
    return set(quarantined_files(classify_all(window, policy)))
