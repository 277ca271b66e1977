"""Schema step 7 on an existing history: ``testfleet db upgrade`` of a step-6 SQLite file.

Every job that restores a history cached by an older testfleet migrates it on first
use, so the step's cost is paid once per job until the history job saves the
migrated file. Builds a step-6 history of ``--executions`` rows (default 115,000, the
size ``bench_history.py`` merges into: 50 jobs x 300 files, 8 runs), then for
``--repeat`` rounds, on a fresh copy each time, measures as fresh processes:

* upgrade: ``testfleet db upgrade --database FILE`` (step 7: copy into the keyed
  tables, drop the old table, create the view, VACUUM);
* reference: ``testfleet db status --database FILE`` on the upgraded copy (opening
  the same history and counting its rows, with nothing to migrate).

Sizes: the file before, and after the upgrade.

CLI: ``python benchmarks/bench_migrate.py [--repeat 3] [--executions N]``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = 'roots = ["tests"]\n\n[stages.stage-0]\nbackend = "cuda"\n'


def build(work: Path, executions: int) -> Path:
    from testfleet.config import load_project
    from testfleet.store import connect
    from testfleet.store.durations import Execution, execution_payload
    from testfleet.store.schema import MIGRATIONS, apply_step, lock_for_migration
    from testfleet.store.schema import executions as table

    root = work / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG, encoding="utf-8")
    db = work / "step6.db"
    rng = random.Random(0)
    rows = [Execution(f"tests/job{j:02d}/test_{i:03d}.py", f"stage-{j % 8}", "cuda",
                      round(rng.uniform(1, 600), 3), commit=f"{r:040x}", ci_run_id=str(r),
                      timestamp=1.7e9 + r * 86400 + i)
            for r in range(executions // 15_000 + 1) for j in range(50) for i in range(300)]
    with connect(load_project(root), str(db), create_file=True) as store:
        for step in MIGRATIONS[:6]:
            with store.write() as conn:
                lock_for_migration(conn)
                apply_step(conn, step)
        with store.write() as conn:
            conn.execute(table.insert(), execution_payload(rows[:executions]))
    return db


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ,
                                                              "TESTFLEET_DATABASE_URL": ""})
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executions", type=int, default=115_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_migrate."))
    try:
        base = build(work, args.executions)
        exe = shutil.which("testfleet", path=str(Path(sys.executable).parent)) or "testfleet"
        upgrade: list[float] = []
        status: list[float] = []
        after = 0
        for _ in range(args.repeat):
            db = work / "history.db"
            shutil.copy(base, db)
            upgrade.append(timed([exe, "-C", str(work / "proj"), "db", "upgrade", "--database",
                                  str(db)]))
            after = db.stat().st_size
            status.append(timed([exe, "-C", str(work / "proj"), "db", "status", "--database",
                                 str(db)]))
        print(f"{args.executions} executions; {args.repeat} rounds; 1-min load average at the "
              f"end: {os.getloadavg()[0]:.1f}")
        print("| run | median wall | min wall | wall, all runs |")
        print("|---|---:|---:|---|")
        for name, values in (("db upgrade (step 7)", upgrade), ("reference: db status", status)):
            print(f"| {name} | {statistics.median(values):.2f} s | {min(values):.2f} s | "
                  + ", ".join(f"{v:.2f}" for v in values) + " |")
        print(f"file: {base.stat().st_size / 1e6:.1f} MB at step 6, {after / 1e6:.1f} MB after")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
