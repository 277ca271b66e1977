"""Read the records of one job (by CI run id) or of a whole database into a bundle."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from testfleet.history.bundle import (
    BreakerEventRecord,
    BundleError,
    ExecutionRecord,
    GateRunRecord,
    GateValueRecord,
    Payload,
    SignatureRecord,
    Source,
    TestcaseRecord,
    _errors,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from testfleet.store.core import Store

#: Columns of ``executions`` / ``gate_runs`` a bundle carries (all but local keys and
#: values derived from others); a test keeps these in step with the tables.
EXECUTION_COLUMNS = tuple(ExecutionRecord.model_fields)
GATE_RUN_COLUMNS = tuple(GateRunRecord.model_fields)


def export_payload(store: Store, *, run_id: str | None, source: Source) -> Payload:
    """The records ``run_id`` selects (all when ``None``), in one read transaction.

    ``run_id`` is the CI run id the runner recorded (``GITHUB_RUN_ID``): it selects the
    executions and gate runs of that run; a gate run's own run id (``<ci run>.<attempt>-
    <job>``) selects that job's gate runs too.
    """
    from testfleet import __version__
    from testfleet.store.schema import latest_version

    with store.read() as conn:
        executions, runs, values = read_records(conn, run_id)
        cases = read_testcases(conn, run_id)
        signatures = read_signature_records(
            conn, [r.signature for r in executions] + [c.signature for c in cases])
        breakers = read_breaker_records(conn) if run_id is None else []
    return Payload(store_schema=latest_version(), created_at=time.time(), testfleet=__version__,
                   source=source, executions=executions, gate_runs=runs, gate_values=values,
                   testcases=cases, signatures=signatures, breakers=breakers)


def read_breaker_records(conn: Connection) -> list[BreakerEventRecord]:
    """The breaker log (#41), whole: a lane's state is its newest event, and a history
    exported whole carries it (a job's bundle, of one run's records, does not: the merge
    of the run writes the breaker's events)."""
    from testfleet.store.breakers import read_events

    return [_record(BreakerEventRecord, {"uid": r.uid, "lane": r.lane, "seq": r.seq,
                                         "at": r.at, "kind": r.kind, "run": r.run,
                                         "state": r.state}, "breaker event")
            for r in read_events(conn)]


def read_signature_records(conn: Connection, digests: list[str | None]) -> list[SignatureRecord]:
    """The signatures the exported rows name, each once, in digest order."""
    from testfleet.store.execution_rows import AlchemyDb
    from testfleet.store.signatures import read_signatures

    found = read_signatures(AlchemyDb(conn), [d for d in digests if d])
    return [_record(SignatureRecord, {"digest": s.digest, "kind": s.kind, "label": s.label,
                                      "text": s.text}, "failure signature")
            for _, s in sorted(found.items())]


def read_testcases(conn: Connection, run_id: str | None) -> list[TestcaseRecord]:
    """The testcase rows of the executions ``run_id`` selects, each under its execution's uid.

    A testcase row is recorded with its attempt's execution (same file, stage, backend,
    attempt, CI run and time), which is how it is found here; a row whose execution was
    pruned (executions and testcases are pruned per file and per test) has nothing to
    travel with and stays behind.
    """
    from sqlalchemy import and_, select

    from testfleet.store.schema import executions as ex
    from testfleet.store.testcases import testcases as tc

    join = and_(ex.c.stage == tc.c.stage, ex.c.file == tc.c.file, ex.c.ts == tc.c.ts,
                ex.c.backend == tc.c.backend, ex.c.attempt == tc.c.attempt,
                ex.c.ci_run_id.is_not_distinct_from(tc.c.ci_run_id))
    query = (select(tc.c.id, ex.c.uid, tc.c.name, tc.c.outcome, tc.c.duration, tc.c.final,
                    tc.c.recorded_at, tc.c.signature)
             .select_from(tc.join(ex, join)).order_by(tc.c.id, ex.c.id))
    if run_id is not None:
        query = query.where(tc.c.ci_run_id == run_id)
    out: list[TestcaseRecord] = []
    last = None
    for pk, uid, name, outcome, duration, final, recorded_at, signature in conn.execute(query):
        if pk == last:  # two executions look alike: the row goes with the first
            continue
        last = pk
        out.append(_record(TestcaseRecord, {
            "execution": uid, "name": name, "outcome": outcome, "duration": float(duration),
            "final": bool(final), "recorded_at": float(recorded_at), "signature": signature},
            "testcase"))
    return out


def read_records(conn: Connection, run_id: str | None) -> tuple[
        list[ExecutionRecord], list[GateRunRecord], list[GateValueRecord]]:
    from sqlalchemy import or_, select

    from testfleet.store.metrics import gate_runs as gr
    from testfleet.store.metrics import gate_series as gs
    from testfleet.store.metrics import gate_values as gv
    from testfleet.store.schema import executions as ex

    eq = select(*[ex.c[c] for c in EXECUTION_COLUMNS]).order_by(ex.c.id)
    rq = select(gr.c.id, *[gr.c[c] for c in GATE_RUN_COLUMNS]).order_by(gr.c.id)
    if run_id is not None:
        eq = eq.where(ex.c.ci_run_id == run_id)
        rq = rq.where(or_(gr.c.ci_run_id == run_id, gr.c.run_id == run_id))
    executions = [_record(ExecutionRecord, row._mapping, "execution")
                  for row in conn.execute(eq)]
    run_uid: dict[int, str] = {}
    runs: list[GateRunRecord] = []
    for row in conn.execute(rq):
        data = dict(row._mapping)
        run_uid[int(data.pop("id"))] = data["uid"]
        data["trusted"] = bool(data["trusted"])
        runs.append(_record(GateRunRecord, data, "gate run"))
    values: list[GateValueRecord] = []
    if run_uid:
        vq = (select(gv.c.run_pk, gs.c.metric_key, gs.c.steps_key, gs.c.constraint_key, gs.c.step,
                     gv.c.value, gv.c.actual_step)
              .select_from(gv.join(gs, gs.c.id == gv.c.series_id))
              .order_by(gv.c.run_pk, gs.c.id))
        if run_id is not None:
            pks = list(run_uid)
            chunks = [pks[i:i + 500] for i in range(0, len(pks), 500)]
            rows: list[Any] = []
            for chunk in chunks:
                rows.extend(conn.execute(vq.where(gv.c.run_pk.in_(chunk))))
        else:
            rows = list(conn.execute(vq))
        for pk, metric, steps, constraint, step, value, actual in rows:
            values.append(_record(GateValueRecord, {
                "run": run_uid[int(pk)], "metric_key": metric, "steps_key": steps,
                "constraint_key": constraint, "step": int(step), "value": float(value),
                "actual_step": None if actual is None else int(actual)}, "gate value"))
    return executions, runs, values


_R = TypeVar("_R", bound=BaseModel)


def _record(model: type[_R], mapping: Any, what: str) -> _R:
    """A stored row as a bundle record, validated now so that a row the merge would
    refuse is named here, at export, instead of making the whole bundle unusable."""
    try:
        return model.model_validate(dict(mapping))
    except ValidationError as exc:
        shown = {k: mapping[k] for k in ("uid", "file", "run_id", "test_path", "run") if k in mapping}
        raise BundleError(f"cannot export {what} {shown}: " + "; ".join(_errors(exc, 5))) from None
