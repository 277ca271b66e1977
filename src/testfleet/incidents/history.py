"""Incidents of the newest CI runs, read from the history database.

A run is a CI run id (a local run without one: its commit). For each of the newest
``runs`` runs: every final verdict (how many files of each stage ran), the failed
ones with their signatures, and the failing tests of those files with theirs. A file
whose failing tests are recorded is counted by them (see ``incidents.group``); a
failure recorded before schema step 8 has no signature and stands alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testfleet.failures.signature import Signature, make
from testfleet.incidents.group import Failure, Incident, group, run_key

FAILING = ("FAILED", "TIMEOUT", "ERROR")
MAX_RUNS = 200


def recent_incidents(store: Any, *, runs: int = 10, stage: str | None = None) -> list[Incident]:
    """Incidents of the newest ``runs`` runs (of ``stage`` when given), newest first."""
    from sqlalchemy import and_, func, or_, select

    from testfleet.store.execution_rows import AlchemyDb
    from testfleet.store.schema import executions as ex
    from testfleet.store.signatures import read_signatures
    from testfleet.store.testcases import testcases as tc

    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise ValueError(f"runs must be an integer from 1 to {MAX_RUNS}, got {runs!r}")
    final = and_(ex.c.final.isnot(False), ex.c.outcome != "NOT_RUN")
    scope = [final] + ([ex.c.stage == stage] if stage is not None else [])
    newest = (select(ex.c.ci_run_id, ex.c.commit_sha, func.max(ex.c.ts).label("ts"))
              .where(*scope).group_by(ex.c.ci_run_id, ex.c.commit_sha)
              .order_by(func.max(ex.c.ts).desc()).limit(runs * 4))
    with store.read() as conn:
        keys: dict[str, tuple[str | None, str | None]] = {}
        for run_id, commit, _ in conn.execute(newest):
            key = run_key(run_id, commit)
            if key not in keys and len(keys) < runs:
                keys[key] = (run_id, commit)
        if not keys:
            return []
        run_ids = sorted({r for r, _ in keys.values() if r})
        commits = sorted({c for r, c in keys.values() if not r and c})
        local = any(not r and not c for r, c in keys.values())
        of_runs: list[Any] = [ex.c.ci_run_id.in_(run_ids)] if run_ids else []
        of_runs += [and_(ex.c.ci_run_id.is_(None), ex.c.commit_sha.in_(commits))] if commits else []
        of_runs += [and_(ex.c.ci_run_id.is_(None), ex.c.commit_sha.is_(None))] if local else []
        rows = list(conn.execute(
            select(ex.c.file, ex.c.stage, ex.c.backend, ex.c.outcome, ex.c.ts, ex.c.commit_sha,
                   ex.c.ci_run_id, ex.c.signature).where(*scope, or_(*of_runs))))
        failed = {(run_key(r.ci_run_id, r.commit_sha), r.stage, r.file) for r in rows
                  if r.outcome in FAILING}
        case_rows: list[Any] = []
        if failed:
            of_cases: list[Any] = [tc.c.ci_run_id.in_(run_ids)] if run_ids else []
            of_cases += [and_(tc.c.ci_run_id.is_(None), tc.c.commit_sha.in_(commits))] if commits else []
            of_cases += [and_(tc.c.ci_run_id.is_(None), tc.c.commit_sha.is_(None))] if local else []
            case_rows = list(conn.execute(
                select(tc.c.file, tc.c.stage, tc.c.backend, tc.c.name, tc.c.outcome, tc.c.ts,
                       tc.c.commit_sha, tc.c.ci_run_id, tc.c.signature)
                .where(tc.c.final.is_(True), tc.c.outcome.in_(("FAILED", "ERROR")),
                       *([tc.c.stage == stage] if stage is not None else []), or_(*of_cases))))
        digests = {r.signature for r in rows if r.signature} | {r.signature for r in case_rows
                                                                if r.signature}
        signatures = read_signatures(AlchemyDb(conn), digests)
    return incidents_of(rows, case_rows, signatures)


def incidents_of(rows: Sequence[Any], case_rows: Sequence[Any],
                 signatures: dict[str, Signature]) -> list[Incident]:
    """Pure: incidents from final execution rows and failing testcase rows (objects with
    the ``executions`` / ``testcases`` column names)."""
    ran: dict[tuple[str, str], int] = {}
    failures: list[Failure] = []
    sigs = dict(signatures)
    cases: dict[tuple[str, str, str], list[Any]] = {}
    for c in case_rows:
        cases.setdefault((run_key(c.ci_run_id, c.commit_sha), c.stage, c.file), []).append(c)
    seen: set[tuple[str, str, str]] = set()
    for r in sorted(rows, key=lambda r: r.ts, reverse=True):
        run = run_key(r.ci_run_id, r.commit_sha)
        key = (run, r.stage, r.file)
        if key in seen:  # a file run twice in one CI run (re-run job): its newest verdict
            continue
        seen.add(key)
        ran[(run, r.stage)] = ran.get((run, r.stage), 0) + 1
        if r.outcome not in FAILING:
            continue
        own = [c for c in cases.get(key, []) if c.signature]
        if own:
            for c in own:
                failures.append(Failure(run, r.stage, r.backend, r.file, c.signature, c.outcome,
                                        c.name, r.ts, r.commit_sha, r.ci_run_id))
            continue
        digest = r.signature
        if not digest:
            unsigned = make("exit", f"no signature recorded ({r.file})", "no signature recorded")
            sigs[unsigned.digest] = unsigned
            digest = unsigned.digest
        failures.append(Failure(run, r.stage, r.backend, r.file, digest, r.outcome, "", r.ts,
                                r.commit_sha, r.ci_run_id))
    return group(failures, sigs, ran)
