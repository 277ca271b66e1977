"""End-to-end speed of ``testfleet plan --format json`` on a generated 10,000-file tree.

    python benchmarks/bench_plan.py                 # 10,000 files, 7 runs per case
    python benchmarks/bench_plan.py --files 2000 --runs 3
    python benchmarks/bench_plan.py --json out.json  # out-synthetic.json, out-real.json
    python benchmarks/bench_plan.py --profile real   # one profile (default: both)
    python benchmarks/bench_plan.py --only check     # only the cases whose name has "check"

Each case runs the installed ``testfleet`` console script as a fresh process, the
way CI runs it, with stdout to /dev/null. "Cold" deletes the project's cache
directory (``.testfleet``: registry cache, history) before every run; "warm"
keeps the registry cache from the previous run; "fresh checkout, cache restored"
rewrites every file of the tree (same bytes, new inode and times, as a CI checkout
gives) and keeps the cache directory, as the generated workflow's plan job does
when it restores the collection cache. Reported per case: median wall
time and median CPU time (user + sys of the child). The reference measured in
the same run is ``python -c pass`` (interpreter start-up); on a shared machine
CPU time is the steadier figure, since wall time includes waiting for a core.
The produced plan is loaded back with ``load_plan`` (schema and digest checked)
so a broken plan cannot pass as a fast one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from gen_tree import PROFILES, generate  # noqa: E402
from testfleet.planning.model import load_plan  # noqa: E402


def testfleet_cmd() -> list[str]:
    exe = shutil.which("testfleet")
    return [exe] if exe else [sys.executable, "-m", "testfleet.cli.main"]


def recheckout(root: Path) -> None:
    """Every file of the tree written again with the same bytes: new stat keys, same content."""
    for path in root.rglob("*"):
        if path.is_file() and ".testfleet" not in path.relative_to(root).parts:
            tmp = path.with_name(path.name + ".checkout")
            tmp.write_bytes(path.read_bytes())
            os.replace(tmp, path)


def measure(cmd: list[str], cwd: Path, runs: int, mode: str,
            env: dict[str, str] | None = None) -> dict[str, float]:
    walls, cpus = [], []
    full_env = {**os.environ, **(env or {})}
    for _ in range(runs):
        if mode == "cold":
            shutil.rmtree(cwd / ".testfleet", ignore_errors=True)
        elif mode == "checkout":
            recheckout(cwd)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              check=False, env=full_env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stderr.decode(errors='replace')}")
        walls.append(wall)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return {"wall_median": statistics.median(walls), "wall_min": min(walls),
            "cpu_median": statistics.median(cpus), "runs": runs}


PHASES = r"""
import json, sys, time
c = [time.process_time()]
from pathlib import Path
from testfleet.config import load_project
from testfleet.registry import collect
from testfleet.planning import make_plan
from testfleet.app.estimates import estimates_for
from testfleet.integrations.plan_formats import render_json
from testfleet.planning.request import PlanRequest
from testfleet.planning.policy import Trigger
c.append(time.process_time())
project = load_project(Path("."))
c.append(time.process_time())
registry = collect(project)
c.append(time.process_time())
estimates, warnings = estimates_for(project, registry)
c.append(time.process_time())
plan = make_plan(project, registry, PlanRequest(Trigger()), estimates, warnings=warnings)
c.append(time.process_time())
text = render_json(plan)
c.append(time.process_time())
names = ["imports", "load config", "collect", "estimates", "make_plan", "render json"]
print(json.dumps({n: c[i + 1] - c[i] for i, n in enumerate(names)}))
"""


def phases(cwd: Path, runs: int) -> dict[str, float]:
    """CPU seconds per phase of a cold plan, in-process (median over runs)."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        shutil.rmtree(cwd / ".testfleet", ignore_errors=True)
        out = subprocess.run([sys.executable, "-c", PHASES], cwd=cwd, capture_output=True,
                             check=True, text=True).stdout
        for name, sec in json.loads(out).items():
            samples.setdefault(name, []).append(sec)
    return {name: statistics.median(v) for name, v in samples.items()}


def main(argv: list[str] | None = None) -> None:
    # Measure with bytecode kept, as installed packages have it: with this set (some shells
    # and CI images set it), every run would compile the modules of an editable checkout.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", type=Path, default=None, help="tree location (default: a temp dir)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--profile", choices=[*PROFILES, "both"], default="both",
                    help="tree shape (gen_tree.py); both = one table per profile")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args(argv)
    for profile in PROFILES if args.profile == "both" else (args.profile,):
        run_profile(args, profile)


def run_profile(args: argparse.Namespace, profile: str) -> None:

    tmp = None
    if args.root is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench-plan-")
        root = Path(tmp.name)
    else:
        root = args.root
    try:
        generate(root, args.files, args.seed, profile)
        tf = testfleet_cmd()
        one_file = min(p.relative_to(root).as_posix() for p in (root / "tests").rglob("test_*.py"))
        plan_json = [*tf, "plan", "--format", "json"]
        cases: list[tuple[Any, ...]] = [
            ("python -c pass (reference)", [sys.executable, "-c", "pass"], "warm"),
            ("testfleet plan --format json, cold cache", plan_json, "cold"),
            ("testfleet plan --format json, warm cache", plan_json, "warm"),
            ("testfleet plan --format json, fresh checkout, cache restored", plan_json, "checkout"),
            ("testfleet plan --labels run-ci-all --format json, cold cache",
             [*tf, "plan", "--labels", "run-ci-all", "--format", "json"], "cold"),
            ("testfleet check, cold cache", [*tf, "check"], "cold"),
            ("testfleet check, cold cache, one process (TESTFLEET_JOBS=1)", [*tf, "check"], "cold",
             {"TESTFLEET_JOBS": "1"}),
            ("testfleet check, warm cache", [*tf, "check"], "warm"),
            ("testfleet check FILE (the pre-commit hook's call), cold cache",
             [*tf, "check", one_file], "cold"),
        ]
        results = {}
        for name, cmd, mode, *env in cases:
            if args.only in name or name.endswith("(reference)"):
                results[name] = measure(cmd, root, args.runs, mode, *env)

        breakdown = phases(root, args.runs)
        out = root / "plan.json"
        subprocess.run([*tf, "plan", "--format", "json", "--output", str(out)], cwd=root,
                       check=True, stderr=subprocess.DEVNULL)
        plan = load_plan(out)
        n_tests = sum(len(j.tests) for j in plan.jobs)
        summary = {
            "files": args.files, "profile": profile, "seed": args.seed, "runs": args.runs,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "load_avg_1m": os.getloadavg()[0],
            "plan": {"jobs": len(plan.jobs), "scheduled_tests": n_tests,
                     "skipped": len(plan.skipped), "bytes": out.stat().st_size},
            "cases": results,
            "cold_phases_cpu": breakdown,
        }
    finally:
        if tmp is not None:
            tmp.cleanup()

    print(f"tree: {args.files} files, profile {profile} (seed {args.seed}); plan: {summary['plan']}; "
          f"python {summary['python']}, {summary['cpus']} cpus, load {summary['load_avg_1m']:.1f}")
    print("| case | wall median (s) | wall min (s) | CPU median (s) |")
    print("|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['wall_median']:.3f} | {r['wall_min']:.3f} | {r['cpu_median']:.3f} |")
    print("cold plan, CPU seconds by phase (in-process median): "
          + ", ".join(f"{k} {v:.3f}" for k, v in breakdown.items()))
    if args.json:
        path = args.json.with_name(f"{args.json.stem}-{profile}{args.json.suffix}")
        path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
