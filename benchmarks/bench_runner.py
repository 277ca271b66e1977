"""Runner overhead: ``testfleet run`` vs running the same files directly with ``python``.

Builds a scratch project of N trivial test files (``print("ok")``) on one ``python``
stage, plans it with ``make_plan`` into a plan file, then in each round runs, in
alternating order:

* direct: a Python loop doing ``subprocess.run([sys.executable, FILE])`` per file, from
  the project root - the cheapest honest way to execute the same files;
* testfleet: ``testfleet run --plan plan.json --job J --junit ... --output plain`` as a
  fresh process (start-up, planning-file load, process groups, descendant sweeps,
  history recording in SQLite, gate hook, JUnit checkpoints, summary all included),
  stdout to /dev/null.

Overhead per file = (testfleet wall - direct wall) / N for each round; the figure is
the median over rounds, with both walls shown beside it. Because wall time on a shared
machine is noisy, the runner's own CPU per file is shown too: the CPU of the testfleet
process tree minus the CPU of the direct runs (``RUSAGE_CHILDREN`` deltas).

CLI: ``python benchmarks/bench_runner.py [--files 300] [--rounds 5] [--limit-ms 30]``;
exits 1 when the median overhead exceeds the limit.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
roots = ["tests"]

[stages.bench]
backend = "cpu"
command = "python"
shards = 1
"""


def build(root: Path, n: int) -> tuple[Path, str]:
    from testfleet.config import load_project
    from testfleet.planning import make_plan
    from testfleet.planning.model import plan_bytes
    from testfleet.planning.request import PlanRequest
    from testfleet.registry.model import Registration

    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG)
    regs = []
    for i in range(n):
        rel = f"tests/test_trivial_{i:04d}.py"
        (root / rel).write_text('print("ok")\n')
        regs.append(Registration(rel, "cpu", "bench", 1.0))
    plan = make_plan(load_project(root), regs, PlanRequest())
    path = root / "plan.json"
    path.write_bytes(plan_bytes(plan))
    [job] = plan.jobs
    return path, job.id


def _child_cpu() -> float:
    """CPU seconds (user + system) of every reaped descendant so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_direct(root: Path, files: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for running every file with python, one after another."""
    c0, t0 = _child_cpu(), time.perf_counter()
    for rel in files:
        subprocess.run([sys.executable, rel], cwd=root, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0, _child_cpu() - c0


def run_testfleet(root: Path, plan: Path, job: str, round_no: int) -> tuple[float, float]:
    """(wall, CPU) of one `testfleet run`; its CPU includes the test processes it reaped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    argv = [sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run", "--plan",
            str(plan), "--job", job, "--junit", str(root / f"junit-{round_no}.xml"),
            "--output", "plain"]
    c0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run(argv, cwd=root, stdout=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t0, _child_cpu() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--limit-ms", type=float, default=30.0)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tf-bench-runner-") as tmp:
        root = Path(tmp) / "proj"
        plan, job = build(root, args.files)
        files = sorted(str(p.relative_to(root)) for p in (root / "tests").glob("test_*.py"))
        run_direct(root, files[:20])  # warm the page cache and the interpreter
        rows = []
        for r in range(args.rounds):
            if r % 2 == 0:
                direct, direct_cpu = run_direct(root, files)
                fleet, fleet_cpu = run_testfleet(root, plan, job, r)
            else:
                fleet, fleet_cpu = run_testfleet(root, plan, job, r)
                direct, direct_cpu = run_direct(root, files)
            per_file = (fleet - direct) / args.files * 1000
            cpu_per_file = (fleet_cpu - direct_cpu) / args.files * 1000
            rows.append((direct, fleet, per_file, cpu_per_file))
            print(f"round {r + 1}: direct {direct:.2f}s  testfleet {fleet:.2f}s  "
                  f"overhead {per_file:.1f} ms/file wall, {cpu_per_file:.1f} ms/file CPU",
                  flush=True)
    overhead = statistics.median(r[2] for r in rows)
    cpu = statistics.median(r[3] for r in rows)
    direct_med = statistics.median(r[0] for r in rows)
    fleet_med = statistics.median(r[1] for r in rows)
    print(f"\n{args.files} files x {args.rounds} rounds: direct median {direct_med:.2f}s "
          f"({direct_med / args.files * 1000:.1f} ms/file), testfleet median {fleet_med:.2f}s "
          f"({fleet_med / args.files * 1000:.1f} ms/file); overhead median {overhead:.1f} ms/file "
          f"wall (limit {args.limit_ms:g}), {cpu:.1f} ms/file runner CPU; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0 if overhead <= args.limit_ms else 1


if __name__ == "__main__":
    sys.exit(main())
