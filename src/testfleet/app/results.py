"""What ``testfleet results`` and ``testfleet flaky`` read from the history: one open of
the database per command, rows handed to the pure functions of ``results/`` and
``incidents/`` (classification, summaries, grouping by cause) and to ``cli/`` to render."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.failures.signature import Signature
    from testfleet.incidents.group import Incident
    from testfleet.results.model import RunResult


@dataclass(frozen=True)
class ResultsRows:
    """The rows ``testfleet results`` shows."""

    #: the newest ``runs`` final verdicts per (stage, file)
    results: list[RunResult]
    #: the rows probes are judged on (the newest ``max(runs, flaky window)``)
    probe_rows: list[RunResult]
    #: test-case verdicts (only with ``--tests``)
    cases: list[RunResult]
    #: the newest CI runs' incidents (none for one file)
    incidents: list[Incident]


#: What the read-only commands say on a project whose history does not exist yet.
NO_RUNS = "no runs recorded yet (`testfleet run` records them; CI merges them with `history merge`)"


def history_missing(project: Project, database: str | None) -> bool:
    """True when the history is an SQLite file that does not exist yet: a read-only
    command then reads nothing and creates nothing (a first ``results`` or ``flaky`` used
    to leave an empty database behind, and say "no failures" as if runs had passed)."""
    from testfleet.store.engine import resolve_target

    target = resolve_target(project, database)
    return target.path is not None and not target.path.exists()


def read_results(project: Project, database: str | None, *, stage: str | None,
                 file: str | None, runs: int, tests: bool) -> ResultsRows:
    from testfleet.incidents.history import recent_incidents
    from testfleet.results.query import case_results, file_results
    from testfleet.results.settings import flaky_policy
    from testfleet.store import open_store

    probe_window = max(runs, flaky_policy(project.config).window)
    if history_missing(project, database):
        return ResultsRows([], [], [], [])
    with open_store(project, database) as store:
        results = file_results(store, runs=runs, stage=stage, file=file)
        probe_rows = file_results(store, runs=probe_window, stage=stage)
        cases = case_results(store, runs=runs, stage=stage, file=file) if tests else []
        incidents = [] if file is not None else recent_incidents(store, runs=min(runs, 200),
                                                                 stage=stage)
    return ResultsRows(results, probe_rows, cases, incidents)


@dataclass(frozen=True)
class FlakyRows:
    """The rows ``testfleet flaky`` classifies, and each key's recurring failure cause."""

    rows: list[RunResult]
    cause: dict[tuple[str, str, str], str]
    signatures: dict[str, Signature]


def read_flaky(project: Project, database: str | None, *, stage: str | None) -> FlakyRows:
    from testfleet.incidents.flaky_groups import causes
    from testfleet.results.query import case_results, file_results
    from testfleet.results.settings import flaky_policy
    from testfleet.store import open_store
    from testfleet.store.execution_rows import AlchemyDb
    from testfleet.store.signatures import read_signatures

    policy = flaky_policy(project.config)
    if history_missing(project, database):
        return FlakyRows([], {}, {})
    with open_store(project, database) as store:
        rows = file_results(store, runs=policy.window, stage=stage)
        rows += case_results(store, runs=policy.window, stage=stage)
        cause = causes(rows, policy.window)
        with store.read() as conn:
            signatures = read_signatures(AlchemyDb(conn), set(cause.values()))
    return FlakyRows(rows, cause, signatures)


def read_incidents(project: Project, database: str | None, *, runs: int,
                   stage: str | None) -> list[Incident]:
    """The incidents of the newest ``runs`` CI runs (of ``stage``), newest first:
    ``testfleet incident list`` and ``incident suggest``."""
    from testfleet.incidents.history import recent_incidents
    from testfleet.store import open_store

    if history_missing(project, database):
        return []
    with open_store(project, database) as store:
        return recent_incidents(store, runs=runs, stage=stage)
