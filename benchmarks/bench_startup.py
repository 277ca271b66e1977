"""Start-up bound commands on a small project: ``--help`` and ``plan`` on the example.

    python benchmarks/bench_startup.py [--runs 9] [--executions 10000]

The example project (``examples/fleet``, 44 registrations) is copied to a temp dir
and given an SQLite history of ``--executions`` recorded executions spread over its
files; then, as fresh processes with stdout to /dev/null: ``python -c pass`` (the
reference), ``testfleet --help``, ``testfleet list`` and ``testfleet plan`` (warm:
the registry cache exists; the plan reads the history for its estimates). Medians of
``--runs``; CPU = user + sys of the child.

The plan's history read is measured both ways, each in a fresh process after loading
the project: through the SQLAlchemy store (``open_store(...).duration_samples``, what
PostgreSQL uses) and through the standard library's ``sqlite3``
(``store.sqlite_read.read_samples``, what the plan uses on SQLite), beside the
project load alone: the differences are what each reader costs a plan.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measure(cmd: list[str], cwd: Path, runs: int) -> tuple[float, float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"{cmd} failed: {proc.stderr.decode(errors='replace')[-2000:]}")
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def seed_history(root: Path, executions: int) -> int:
    from testfleet.config import load_project
    from testfleet.registry import collect
    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    project = load_project(root)
    regs = collect(project).registrations
    rng = random.Random(0)
    rows = [Execution(r.file, r.suite, r.backend, rng.uniform(1, 600), "PASSED", 1, f"c{i // len(regs)}",
                      f"run-{i // len(regs)}", time.time() - (executions - i))
            for i, r in zip(range(executions), (regs[i % len(regs)] for i in range(executions)), strict=True)]
    with open_store(project) as store:
        store.record_executions(rows)
    return len(regs)


def main() -> None:
    # Measure with bytecode kept, as installed packages have it: with this set (some shells
    # and CI images set it), every run would compile the modules of an editable checkout.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--executions", type=int, default=10_000)
    args = ap.parse_args()
    tf = shutil.which("testfleet") or sys.exit("testfleet is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        root = Path(tmp) / "fleet"
        shutil.copytree(REPO / "examples" / "fleet", root)
        shutil.rmtree(root / ".testfleet", ignore_errors=True)
        n_regs = seed_history(root, args.executions)
        plan = [tf, "plan", "--event", "pull_request"]
        subprocess.run(plan, cwd=root, check=True, stdout=subprocess.DEVNULL)  # warm the cache
        load = ("from pathlib import Path\nfrom testfleet.config import load_project\n"
                "p = load_project(Path('.'))\nstages = sorted(p.config.stages)\n")
        via_sqlalchemy = load + ("from testfleet.store import open_store\n"
                                 "with open_store(p, readonly=True) as s:\n"
                                 "    n = sum(len(s.duration_samples(x, None, 10)) for x in stages)\n"
                                 "assert n\n")
        via_sqlite3 = load + ("from testfleet.store.sqlite_read import read_samples\n"
                              "got = read_samples(Path('.testfleet/history.db'), stages, None, "
                              "window=10)\nassert got and sum(map(len, got.values()))\n")
        cases = [("python -c pass (reference)", [sys.executable, "-c", "pass"]),
                 ("load the project only (reference for the two reads)",
                  [sys.executable, "-c", load]),
                 ("load + history read through SQLAlchemy", [sys.executable, "-c", via_sqlalchemy]),
                 ("load + history read through sqlite3", [sys.executable, "-c", via_sqlite3]),
                 ("testfleet --help", [tf, "--help"]),
                 ("testfleet list, warm", [tf, "list"]),
                 (f"testfleet plan --event pull_request, warm, {args.executions:,} executions", plan)]
        print(f"example: {n_regs} registrations, SQLite history of {args.executions:,} executions; "
              f"{args.runs} runs each")
        print("| case | wall median (s) | wall min (s) | CPU median (s) |")
        print("|---|---:|---:|---:|")
        for name, cmd in cases:
            wall, low, cpu = measure(cmd, root, args.runs)
            print(f"| {name} | {wall:.3f} | {low:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()
