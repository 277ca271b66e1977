"""Duration estimates from the history: the samples read once, then planning's pure
:func:`~testfleet.planning.estimates.compute`.

An SQLite history is read with the standard library (store.sqlite_read; SQLAlchemy's
import alone would dominate a small project's plan), PostgreSQL through the store. An
unavailable history is never an error: the estimates are the literals and the warnings
say why.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from testfleet.planning.estimates import (
    EstimateRow,
    Key,
    compute,
    fall_back_to_stages,
    lane_registrations,
    registrations_of,
    timeout_warning,
    variant_stages,
)

if TYPE_CHECKING:
    from testfleet.config import Project
    from testfleet.registry.model import Registration

# How long a plan waits for a history database another process has locked before it
# falls back to literals: long enough for a runner's write, short for a CI plan step.
BUSY_TIMEOUT = 5.0


def read_durations(project: Project, stages: Iterable[str], files: Iterable[str] | None = None,
                 *, url: str | None = None,
                 ) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, float]], list[str]]:
    """Passing durations and longest recent timeouts per stage and file from the
    history database, or ``({}, {}, warnings)`` saying why there are none. Never
    raises for an unavailable database."""
    from testfleet.store.engine import resolve_target
    from testfleet.store.errors import StoreError

    fallback = "all estimates are est_time literals"
    try:
        target = resolve_target(project, url)
    except StoreError as exc:
        return {}, {}, [f"history database not usable ({exc}); {fallback}"]
    if target.path is not None and not target.path.exists():
        return {}, {}, [f"no history database at {target.display} yet; {fallback}"]
    if target.path is not None and not target.path.is_file():  # a FIFO, device, directory
        from testfleet.fileio import file_kind

        kind = file_kind(target.path.stat().st_mode)
        return {}, {}, [f"history database {target.display} is {kind}, not a database file; "
                        f"{fallback}"]
    window = project.config.durations.window
    wanted = None if files is None else sorted(set(files))
    if target.path is not None:  # SQLite: the standard library, not SQLAlchemy (start-up)
        import sqlite3

        from testfleet.store.engine import translate
        from testfleet.store.sqlite_read import read_samples

        try:
            read = read_samples(target.path, list(stages), wanted, window=window,
                                busy_timeout=BUSY_TIMEOUT)
        except sqlite3.Error as exc:
            return {}, {}, [f"history unavailable: {translate(exc, target)}; {fallback}"]
        if read is not None:
            return ({stage: {f: s.passing for f, s in got.items() if s.passing}
                     for stage, got in read.items()},
                    {stage: {f: s.timeout for f, s in got.items() if s.timeout is not None}
                     for stage, got in read.items()}, [])
        # another schema version: the general path below says what it makes of it
    try:
        from testfleet.store import open_store

        history: dict[str, dict[str, list[float]]] = {}
        timeouts: dict[str, dict[str, float]] = {}
        with open_store(project, url, readonly=True, busy_timeout=BUSY_TIMEOUT) as store:
            for stage in sorted(set(stages)):
                samples = store.duration_samples(stage, wanted, window)
                history[stage] = {f: s.passing for f, s in samples.items() if s.passing}
                timeouts[stage] = {f: s.timeout for f, s in samples.items() if s.timeout is not None}
        return history, timeouts, []
    except StoreError as exc:
        return {}, {}, [f"history unavailable: {exc}; {fallback}"]
    except Exception as exc:  # the promise: history trouble never fails a plan
        return {}, {}, [f"history unavailable ({type(exc).__name__}: {exc}); {fallback}"]


def estimates_for(
    project: Project,
    registrations: Iterable[Registration] | Any,
    *,
    url: str | None = None,
    stages: Iterable[str] | None = None,
) -> tuple[dict[Key, tuple[float, str]], list[str]]:
    """``(file, stage) -> (seconds, "history" | "est_time")`` for every registration,
    and warnings (e.g. the database was missing or locked and literals were used).

    ``stages`` limits which stages read history; the others get their literals.
    """
    regs = registrations_of(registrations)
    regs += lane_registrations(project.config, regs)
    allowed = None if stages is None else set(stages)
    wanted = sorted({r.suite for r in regs if allowed is None or r.suite in allowed})
    history: dict[str, dict[str, list[float]]] = {}
    timeouts: dict[str, dict[str, float]] = {}
    warnings: list[str] = []
    if wanted:
        files = {r.file for r in regs if r.suite in wanted}
        history, timeouts, warnings = read_durations(project, wanted, files, url=url)
    rows = compute(regs, history, project.config.durations, wanted, timeouts)
    warnings += timeout_warning(rows, project.config.durations.window)
    return {(row.file, row.stage): (row.estimate, row.source) for row in rows}, warnings


def estimate_rows(project: Project, registrations: Iterable[Registration] | Any, *,
                  url: str | None = None, stages: Iterable[str] | None = None,
                  ) -> tuple[list[EstimateRow], list[str]]:
    """Like :func:`estimates_for`, with samples and drift (for ``durations show``)."""
    regs = registrations_of(registrations)
    regs += lane_registrations(project.config, regs)
    parents = variant_stages(project.config)
    keep = None if stages is None else set(stages)
    if keep is not None:  # a variant's rows may fall back on its stage's: read that too
        read = keep | {parents[k] for k in keep if k in parents}
        regs = [r for r in regs if r.suite in read]
    wanted = sorted({r.suite for r in regs})
    history, timeouts, warnings = (read_durations(project, wanted, {r.file for r in regs}, url=url)
                                   if wanted else ({}, {}, []))
    rows = fall_back_to_stages(compute(regs, history, project.config.durations, timeouts=timeouts),
                                parents)
    if keep is not None:
        rows = [r for r in rows if r.stage in keep]
    return rows, warnings + timeout_warning(rows, project.config.durations.window)
