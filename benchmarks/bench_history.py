"""History bundles: merge one CI run's job bundles into a cached SQLite history.

Builds, under ``--workdir`` (a temporary directory by default):

* a history of ``--history`` executions (default 100,000) over ``--jobs`` x ``--files``
  (stage, file) pairs (default 50 x 300 = 15,000, i.e. ~7 earlier runs of the whole
  fleet; 95% passed, 3% failed, 2% flaky) plus 10 nightly gate runs of 2 gated files
  per job (50 values each);
* one run's ``--jobs`` job bundles: each job records its ``--files`` executions and 2
  gate runs in a job database of its own, exported by ``testfleet history export``
  as the generated workflow does.

Then, for ``--repeat`` rounds, on a fresh copy of the history each time, it measures as
fresh processes (wall clock, the command as CI runs it):

* merge: ``testfleet history merge <50 bundles>`` with pruning on (``--keep 50``, the
  ``db prune`` default): read and verify every bundle, one transaction, prune,
  checkpoint; the size of the history file after it;
* merge again: the same bundles into the merged history (all records already there);
* reference: the same rows written straight into the history through the store API
  (``record_executions`` + ``MetricStore.write_run``) and pruned: what a job with a
  shared database would do, without bundles.

Sizes: the history file after the merge (SQLite, checkpointed and VACUUMed by the merge),
what the Actions cache stores of it (``zstd -3 --long=30``, the compression ``actions/cache``
applies, when the ``zstd`` program is present; gzip -6 otherwise), and where its bytes are:
each table with its indexes (SQLite's ``dbstat``).

CLI: ``python benchmarks/bench_history.py [--repeat 5]``. Exits 1 when a target is
missed: merge median < 5 s and history file < 20 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

STAGES = 5
CONFIG = 'roots = ["tests"]\n' + "".join(
    f'\n[stages.stage-{s}]\nbackend = "cuda"\n' for s in range(STAGES))
TARGET_SECONDS = 5.0
TARGET_BYTES = 20_000_000


def project_at(root: Path) -> Any:
    from testfleet.config import load_project

    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "testfleet.toml").write_text(CONFIG, encoding="utf-8")
    return load_project(root)


def stage_of(job: int) -> str:
    return f"stage-{job % STAGES}"


def job_rows(job: int, files: int, run: int, t0: float, rng: random.Random) -> list[Any]:
    from testfleet.store.durations import Execution

    rows = []
    for i in range(files):
        roll = rng.random()
        outcome = "FAILED" if roll < 0.03 else "FLAKY" if roll < 0.05 else "PASSED"
        rows.append(Execution(f"tests/job{job:02d}/test_{i:03d}.py", stage_of(job), "cuda",
                              round(rng.uniform(1, 600), 3), outcome=outcome,
                              attempt=2 if outcome == "FLAKY" else 1, commit=f"{run:040x}",
                              ci_run_id=str(run), timestamp=t0 + i))
    return rows


def gate_runs(job: int, run: int, t0: float, rng: random.Random) -> list[tuple[Any, list[Any]]]:
    from testfleet.store.metrics import GateRun, StoredValue

    out = []
    for g in range(2):
        test = f"tests/job{job:02d}/test_{g:03d}.py"
        run_ = GateRun(f"{run}.1-job{job}", test, "cuda", stage_of(job), ci_run_id=str(run),
                       commit=f"{run:040x}", recorded_at=t0 + g)
        values = [StoredValue("train/loss", "all", '{"rel_up":0.05}', s, rng.uniform(0, 3))
                  for s in range(50)]
        out.append((run_, values))
    return out


def write(store: Any, rows: list[Any], runs: list[tuple[Any, list[Any]]]) -> None:
    from testfleet.store.metric_store import MetricStore

    store.record_executions(rows)
    ms = MetricStore(store)
    for run, values in runs:
        ms.write_run(run, values, trusted=True)


def build(work: Path, history: int, jobs: int, files: int) -> tuple[Path, Path, list[Path]]:
    from testfleet.history.bundle import Source, encode
    from testfleet.history.export import export_payload
    from testfleet.history.merge import compact_and_measure
    from testfleet.store import open_store

    project = project_at(work / "proj")
    base = work / "base.db"
    rng = random.Random(0)
    done, run = 0, 0
    with open_store(project, str(base)) as store:
        while done < history:
            t0 = 1_700_000_000.0 + run * 86400
            for job in range(jobs):
                rows = job_rows(job, files, run, t0, rng)[: history - done]
                runs = gate_runs(job, run, t0, rng) if run < 10 else []
                write(store, rows, runs)
                done += len(rows)
                if done >= history:
                    break
            run += 1
        compact_and_measure(store)
    bundles = []
    now = 1_700_000_000.0 + (run + 1) * 86400
    source = Source(event="push", ref="refs/heads/main", cadence="nightly", write_baseline=True,
                    ci_run_id=str(run + 1))
    (work / "jobs").mkdir()
    for job in range(jobs):
        job_db = work / "jobs" / f"job{job:02d}.db"
        with open_store(project, str(job_db)) as store:
            write(store, job_rows(job, files, run + 1, now, rng), gate_runs(job, run + 1, now, rng))
            payload = export_payload(store, run_id=str(run + 1), source=source)
        path = work / "jobs" / f"job{job:02d}.tfb"
        path.write_bytes(encode(payload))
        bundles.append(path)
    return work / "proj", base, bundles


REFERENCE = """
import sys
from pathlib import Path
sys.path.insert(0, {bench!r})
import bench_history as b
from testfleet.config import load_project
from testfleet.history.merge import compact_and_measure
from testfleet.store import open_store
from testfleet.store.durations import prune
project = load_project(Path({proj!r}))
jobs = sorted(Path({jobs!r}).glob("job*.db"))
with open_store(project, {db!r}) as dst:
    for job in jobs:
        with open_store(project, str(job)) as src, src.read() as conn:
            from testfleet.history.export import read_records
            ex, runs, _ = read_records(conn, None)
        from testfleet.store.durations import Execution
        dst.record_executions([Execution(r.file, r.stage, r.backend, r.duration, r.outcome,
                                         r.attempt, r.commit_sha, r.ci_run_id, r.ts) for r in ex])
    import random
    for i, job in enumerate(jobs):
        b.write(dst, [], b.gate_runs(i, 0, 0.0, random.Random(i)))
    with dst.write() as conn:
        prune(conn, 50)
    compact_and_measure(dst)
"""


def table_bytes(db: Path) -> dict[str, int]:
    """Bytes per table, indexes counted with their table (SQLite's dbstat)."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        owner = dict(con.execute("SELECT name, tbl_name FROM sqlite_schema"))
        out: dict[str, int] = {}
        for name, size in con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            out[table] = out.get(table, 0) + int(size)
        return out
    finally:
        con.close()


def cache_bytes(db: Path) -> tuple[int, str]:
    """What a compressing cache stores of the file: zstd as actions/cache runs it, else gzip."""
    zstd = shutil.which("zstd")
    if zstd:
        proc = subprocess.run([zstd, "-3", "--long=30", "-T0", "-c", str(db)], capture_output=True,
                              check=True)
        return len(proc.stdout), "zstd -3 --long=30 (actions/cache)"
    return len(zlib.compress(db.read_bytes(), 6)), "gzip -6"


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds user+sys of the child, stdout) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--history", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_history.", dir=args.workdir))
    try:
        t = time.perf_counter()
        proj, base, bundles = build(work, args.history, args.jobs, args.files)
        print(f"setup: {args.history} executions of history, {len(bundles)} bundles of "
              f"{args.files} executions + 2 gate runs each "
              f"({sum(p.stat().st_size for p in bundles) / 1024:.0f} KiB compressed in all), "
              f"history file {base.stat().st_size / 1e6:.1f} MB; built in {time.perf_counter() - t:.0f} s")
        exe = shutil.which("testfleet", path=str(Path(sys.executable).parent)) or "testfleet"
        env = {**os.environ, "TESTFLEET_DATABASE_URL": ""}
        walls: dict[str, list[float]] = {"merge": [], "merge again": [], "reference": []}
        cpus: dict[str, list[float]] = {name: [] for name in walls}
        sizes: list[int] = []
        packed: list[int] = []
        packer = ""
        tables: dict[str, int] = {}
        report: dict[str, Any] = {}
        for _ in range(args.repeat):
            db = work / "history.db"
            shutil.copy(base, db)
            cmd = [exe, "-C", str(proj), "history", "merge", *map(str, bundles), "--database",
                   str(db), "--format", "json"]
            wall, cpu, out = timed(cmd, env)
            walls["merge"].append(wall)
            cpus["merge"].append(cpu)
            report = json.loads(out)
            sizes.append(int(report["size_bytes"]))
            packed_size, packer = cache_bytes(db)
            packed.append(packed_size)
            tables = table_bytes(db)
            wall, cpu, _ = timed(cmd, env)
            walls["merge again"].append(wall)
            cpus["merge again"].append(cpu)
            ref_db = work / "reference.db"
            shutil.copy(base, ref_db)
            script = REFERENCE.format(bench=str(Path(__file__).resolve().parent), proj=str(proj),
                                      jobs=str(work / "jobs"), db=str(ref_db))
            wall, cpu, _ = timed([sys.executable, "-c", script], env)
            walls["reference"].append(wall)
            cpus["reference"].append(cpu)
        load = os.getloadavg()[0]
        print(f"{args.repeat} repetitions; 1-min load average at the end: {load:.1f}")
        print(f"merge result: added {report['added']}, pruned {report['pruned']}, rows {report['rows']}")
        print("| run | median wall | min wall | median CPU (user+sys) | wall, all runs |")
        print("|---|---:|---:|---:|---|")
        for name, values in walls.items():
            print(f"| {name} | {statistics.median(values):.2f} s | {min(values):.2f} s | "
                  f"{statistics.median(cpus[name]):.2f} s | " + ", ".join(f"{v:.2f}" for v in values)
                  + " |")
        size = statistics.median(sizes)
        print(f"history file after merge: {size / 1e6:.1f} MB (median; {min(sizes)}-{max(sizes)} "
              f"bytes); {packer} of it (what the cache stores): "
              f"{statistics.median(packed) / 1e6:.1f} MB")
        print("where the bytes are (last repetition; each table with its indexes): "
              + ", ".join(f"{name} {n / 1e6:.2f} MB" for name, n in
                          sorted(tables.items(), key=lambda kv: -kv[1])))
        merge = statistics.median(walls["merge"])
        ok = merge < TARGET_SECONDS and size < TARGET_BYTES
        print(f"targets: merge < {TARGET_SECONDS:.0f} s, file < {TARGET_BYTES / 1e6:.0f} MB: "
              + ("met" if ok else "MISSED"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
