"""Metric gate store: batched baseline read vs one query per coordinate.

Builds a history of ``--tests`` tests x ``--runs`` runs x ``--coords`` coordinates
(default 1,000 x 100 x 20 = 2 million values; ~10% of runs untrusted) plus the
test under evaluation, whose runs have ``--eval-coords`` coordinates (default 200,
a ``steps="all"`` curve). Then, in alternating order for ``--rounds`` rounds, it
evaluates one run of that test:

* batched: select + ONE baseline query for all coordinates (index-bounded,
  newest trusted first, limited per coordinate) + judge, as ``testfleet`` does;
* per-coordinate: the same with one query per coordinate (what gates that loop
  over coordinates do).

Both use the same open store (pooled connection), return identical baselines
(checked); the figures are median wall times of the whole evaluation and, within
it, of the baseline read alone. SQLite uses a
file under ``--workdir``; PostgreSQL uses ``--pg-url`` (default
``$TESTFLEET_TEST_PG_URL``, see ``.ci/postgres.sh``) in a schema of its own, kept
between runs so that the 2 M rows are loaded once (``--rebuild`` reloads).

CLI: ``python benchmarks/bench_gate.py [--engine sqlite|postgresql|both] [--rounds 15]``.
Exits 1 when a target is missed: batched <= 50 ms on SQLite, and batched at least
10x faster than per-coordinate on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SUITE, BACKEND = "stage-c-8-gpu-h100", "cuda"
EVAL_TEST = "tests/e2e/test_eval_target.py"
STEPS_KEY = '"all"'
CONSTRAINT_KEY = '{"abs_floor_down":0.01,"abs_floor_up":0.01,"rel_down":0.05,"rel_up":0.05}'
SCHEMA = "bench_gate"


def project_at(root: Path) -> Any:
    from testfleet.config import Config, Project

    root.mkdir(parents=True, exist_ok=True)
    return Project(root=root, config_path=root / "testfleet.toml", config=Config(),
                   raw_config_text="")


def identity(test: str) -> tuple[str, str, str, str]:
    return (test, BACKEND, SUITE, "")


def coordinate(metric: str, step: int) -> tuple[str, str, str, int]:
    return (metric, STEPS_KEY, CONSTRAINT_KEY, step)


def plan_rows(tests: int, runs: int, coords: int, eval_coords: int, seed: int = 7) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]], Any]:
    """Series and run rows; values are generated lazily (2 M of them)."""
    from testfleet.store.metrics import coord_hash, path_hash

    rng = random.Random(seed)
    layout: list[tuple[str, int]] = [(f"tests/e2e/test_{t:04d}.py", coords) for t in range(tests)]
    layout.append((EVAL_TEST, eval_coords))
    series: list[dict[str, Any]] = []
    run_rows: list[dict[str, Any]] = []
    series_of: list[list[int]] = []
    now = time.time() - runs * 3600
    sid = 0
    for test, n in layout:
        ids = []
        for c in range(n):
            sid += 1
            metric = "train/grad_norm" if test == EVAL_TEST else f"m{c % 4}"
            coord = coordinate(metric, c)
            series.append({"id": sid, "coord_hash": coord_hash(identity(test), coord),
                           "test_hash": path_hash(test), "test_path": test, "backend": BACKEND,
                           "suite": SUITE, "env_key": "", "metric_key": coord[0],
                           "steps_key": STEPS_KEY, "constraint_key": CONSTRAINT_KEY, "step": c})
            ids.append(sid)
        series_of.append(ids)
    pk = 0
    run_plan: list[tuple[int, bool, list[int]]] = []
    for r in range(runs):  # runs interleave across tests, as nightly runs do
        for t, (test, _) in enumerate(layout):
            pk += 1
            trusted = rng.random() > 0.1
            run_rows.append({"id": pk, "run_id": f"run-{r}", "test_path": test,
                             "test_hash": path_hash(test), "backend": BACKEND, "suite": SUITE,
                             "env_key": "", "ci_run_id": str(1000 + r), "commit_sha": f"{r:040x}",
                             "trusted": trusted, "recorded_at": now + r * 3600,
                             "untrusted_at": None, "untrusted_by": None})
            run_plan.append((pk, trusted, series_of[t]))

    def values() -> Any:
        vr = random.Random(seed + 1)
        for run_pk, trusted, ids in run_plan:
            for i, s in enumerate(ids):
                yield (s, run_pk, trusted, 1.0 + 0.01 * i + vr.gauss(0, 0.001), i)

    return series, run_rows, values


def load(store: Any, tests: int, runs: int, coords: int, eval_coords: int) -> float:
    from sqlalchemy import func, select

    from testfleet.store.metrics import gate_runs, gate_series, gate_values

    with store.read() as conn:
        have = conn.execute(select(func.count()).select_from(gate_values)).scalar_one()
    expected = tests * runs * coords + runs * eval_coords
    if have == expected:
        return 0.0
    if have:
        raise SystemExit(f"{store.target.display} holds {have} values, not {expected}; "
                         "use --rebuild (or another --workdir)")
    t0 = time.perf_counter()
    series, run_rows, values = plan_rows(tests, runs, coords, eval_coords)
    with store.write() as conn:
        conn.execute(gate_series.insert(), series)
        conn.execute(gate_runs.insert(), run_rows)
        if conn.dialect.name == "postgresql":
            raw = conn.connection.driver_connection
            with raw.cursor() as cur, cur.copy(
                    "COPY gate_values (series_id, run_pk, trusted, value, actual_step) "
                    "FROM STDIN") as copy:
                for row in values():
                    copy.write_row(row)
            for table in ("gate_series", "gate_runs"):  # explicit ids: move the sequences on
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT max(id) FROM {table}))")
        else:
            batch: list[dict[str, Any]] = []
            for s, r, tr, v, a in values():
                batch.append({"series_id": s, "run_pk": r, "trusted": tr, "value": v,
                              "actual_step": a})
                if len(batch) == 50_000:
                    conn.execute(gate_values.insert(), batch)
                    batch = []
            if batch:
                conn.execute(gate_values.insert(), batch)
    with store.write() as conn:
        conn.exec_driver_sql("ANALYZE")
    return time.perf_counter() - t0


def evaluate_once(ms: Any, batched: bool, eval_coords: int,
                  window: int) -> tuple[float, float, Any]:
    """One gate evaluation of the target test (records already in memory):
    (whole evaluation seconds, of which baseline read seconds, answer)."""
    from testfleet.gate.evaluate import coordinates, evaluate, select
    from testfleet.gate.records import MetricSeries, RecordSet
    from testfleet.gate.spec import GateSpec

    spec = GateSpec(file=EVAL_TEST, line=1, col=1, metric_key="train/grad_norm", steps="all",
                    constraint={"abs_floor_down": 0.01, "abs_floor_up": 0.01, "rel_down": 0.05,
                                "rel_up": 0.05})
    assert spec.steps_key == STEPS_KEY and spec.constraint_key == CONSTRAINT_KEY
    records = RecordSet(series={"train/grad_norm": MetricSeries(
        "train/grad_norm", [(i, 1.0 + 0.01 * i) for i in range(eval_coords)])})
    t0 = time.perf_counter()
    selected = select([spec], records)
    coords = coordinates(selected)
    read = ms.baselines if batched else ms.baselines_per_coordinate
    t1 = time.perf_counter()
    base = read(identity(EVAL_TEST), coords, window)
    t2 = time.perf_counter()
    results = evaluate(selected, base, window)
    elapsed = time.perf_counter() - t0
    return elapsed, t2 - t1, (base, [v.status for r in results for v in r.verdicts])


def bench_engine(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    from testfleet.store.core import connect, open_store
    from testfleet.store.metric_store import MetricStore

    work = Path(args.workdir)
    project = project_at(work / "project")
    if engine == "sqlite":
        db = work / "gate-bench.db"
        if args.rebuild and db.exists():
            for suffix in ("", "-wal", "-shm"):
                Path(str(db) + suffix).unlink(missing_ok=True)
        url = f"sqlite:///{db}"
    else:
        base = args.pg_url or os.environ.get("TESTFLEET_TEST_PG_URL", "")
        if not base:
            raise SystemExit("PostgreSQL: give --pg-url or run: eval \"$(bash .ci/postgres.sh)\"")
        import psycopg

        with psycopg.connect(base, autocommit=True) as admin:
            if args.rebuild:
                admin.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
            admin.execute(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"')
        parts = urlsplit(base)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
        query.append(("options", f"-csearch_path={SCHEMA}"))
        url = urlunsplit(parts._replace(query=urlencode(query)))
        owner = connect(project, url)
        try:
            owner.migrate()
        finally:
            owner.close()
    store = open_store(project, url)
    ms = MetricStore(store)
    load_s = load(store, args.tests, args.runs, args.coords, args.eval_coords)
    # warm up both paths (connection pool, statement caches, page cache)
    *_, a = evaluate_once(ms, True, args.eval_coords, args.window)
    *_, b = evaluate_once(ms, False, args.eval_coords, args.window)
    if a != b:
        raise SystemExit(f"{engine}: batched and per-coordinate reads disagree")
    n_hist = sum(len(v) for v in a[0].values())
    batched: list[float] = []
    per_coord: list[float] = []
    read_b: list[float] = []
    read_p: list[float] = []
    for i in range(args.rounds):
        order = (True, False) if i % 2 == 0 else (False, True)
        for is_batched in order:
            elapsed, read_s, _ = evaluate_once(ms, is_batched, args.eval_coords, args.window)
            (batched if is_batched else per_coord).append(elapsed)
            (read_b if is_batched else read_p).append(read_s)
    store.close()
    mb, mp = statistics.median(batched), statistics.median(per_coord)
    rb, rp = statistics.median(read_b), statistics.median(read_p)
    return {
        "engine": engine, "values": args.tests * args.runs * args.coords
        + args.runs * args.eval_coords, "coordinates": args.eval_coords,
        "history_values_read": n_hist, "load_seconds": round(load_s, 1),
        "batched_ms": round(mb * 1000, 2), "per_coordinate_ms": round(mp * 1000, 2),
        "speedup": round(mp / mb, 1), "rounds": args.rounds,
        "read_batched_ms": round(rb * 1000, 2), "read_per_coordinate_ms": round(rp * 1000, 2),
        "read_speedup": round(rp / rb, 1),
        "batched_min_ms": round(min(batched) * 1000, 2),
        "per_coordinate_min_ms": round(min(per_coord) * 1000, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--coords", type=int, default=20)
    parser.add_argument("--eval-coords", type=int, default=200)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--workdir", default="/tmp/testfleet-bench-gate")
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args(argv)
    engines = ["sqlite", "postgresql"] if args.engine == "both" else [args.engine]
    results = [bench_engine(e, args) for e in engines]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("| engine | values stored | coordinates | evaluation batched | per-coordinate "
              "| speed-up | read batched | per-coordinate | speed-up |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in results:
            print(f"| {r['engine']} | {r['values']:,} | {r['coordinates']} | {r['batched_ms']} ms "
                  f"| {r['per_coordinate_ms']} ms | {r['speedup']}x | {r['read_batched_ms']} ms "
                  f"| {r['read_per_coordinate_ms']} ms | {r['read_speedup']}x |")
    ok = True
    for r in results:
        if r["engine"] == "sqlite" and r["batched_ms"] > 50:
            print(f"sqlite: batched {r['batched_ms']} ms exceeds 50 ms", file=sys.stderr)
            ok = False
        if r["engine"] == "postgresql" and r["speedup"] < 10:
            print(f"postgresql: speed-up {r['speedup']}x is below 10x", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
