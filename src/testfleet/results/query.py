"""Read final verdicts from the history database into :class:`RunResult` lists.

Only rows with ``final`` true are results: a retried attempt's row is evidence for
the retry, not a verdict. ``NOT_RUN`` is never a result. Each (stage, file) — or
(stage, file, test) — yields its newest ``runs`` verdicts, through one window-function
query (SQLite >= 3.25 and PostgreSQL both have ``row_number``).
"""

from __future__ import annotations

from typing import Any

from testfleet.results.model import RunResult

MAX_RUNS = 1000


def file_results(store: Any, *, runs: int, stage: str | None = None,
                 file: str | None = None) -> list[RunResult]:
    """Newest ``runs`` final verdicts per (stage, file), newest first within each."""
    from sqlalchemy import func, select

    from testfleet.store.schema import executions as ex

    _check_runs(runs)
    rn = func.row_number().over(partition_by=(ex.c.stage, ex.c.file),
                                order_by=(ex.c.ts.desc(), ex.c.id.desc())).label("rn")
    inner = select(ex.c.file, ex.c.stage, ex.c.outcome, ex.c.ts, ex.c.commit_sha,
                   ex.c.ci_run_id, ex.c.attempt, ex.c.duration, ex.c.gate_status,
                   ex.c.gate_mode, ex.c.reason, ex.c.signature, rn).where(
        ex.c.final.isnot(False), ex.c.outcome != "NOT_RUN")  # NULL: a row merged from a bundle
    if stage is not None:
        inner = inner.where(ex.c.stage == stage)
    if file is not None:
        inner = inner.where(ex.c.file == file)
    sub = inner.subquery()
    query = select(sub).where(sub.c.rn <= runs).order_by(sub.c.stage, sub.c.file, sub.c.rn)
    with store.read() as conn:
        return [RunResult(file=r.file, stage=r.stage, outcome=r.outcome, ts=float(r.ts),
                          commit=r.commit_sha, ci_run_id=r.ci_run_id, attempt=int(r.attempt),
                          duration=float(r.duration), gate_status=r.gate_status,
                          gate_mode=r.gate_mode, reason=r.reason, signature=r.signature)
                for r in conn.execute(query)]


def case_results(store: Any, *, runs: int, stage: str | None = None,
                 file: str | None = None) -> list[RunResult]:
    """Newest ``runs`` final verdicts per (stage, file, test), newest first within each."""
    from sqlalchemy import func, select

    from testfleet.store.testcases import testcases as tc

    _check_runs(runs)
    rn = func.row_number().over(partition_by=(tc.c.stage, tc.c.file, tc.c.name),
                                order_by=(tc.c.ts.desc(), tc.c.id.desc())).label("rn")
    inner = select(tc.c.file, tc.c.stage, tc.c.name, tc.c.outcome, tc.c.ts, tc.c.commit_sha,
                   tc.c.ci_run_id, tc.c.attempt, tc.c.duration, tc.c.signature,
                   rn).where(tc.c.final.is_(True))
    if stage is not None:
        inner = inner.where(tc.c.stage == stage)
    if file is not None:
        inner = inner.where(tc.c.file == file)
    sub = inner.subquery()
    query = select(sub).where(sub.c.rn <= runs).order_by(sub.c.stage, sub.c.file, sub.c.name,
                                                         sub.c.rn)
    with store.read() as conn:
        return [RunResult(file=r.file, stage=r.stage, outcome=r.outcome, ts=float(r.ts),
                          commit=r.commit_sha, ci_run_id=r.ci_run_id, attempt=int(r.attempt),
                          duration=float(r.duration), test=r.name, signature=r.signature)
                for r in conn.execute(query)]


def _check_runs(runs: int) -> None:
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise ValueError(f"runs must be an integer from 1 to {MAX_RUNS}, got {runs!r}")
