"""Same-run A/B of two source trees of testfleet on one project tree (before/after a change).

    git worktree add /tmp/before <commit>
    python benchmarks/gen_tree.py --files 10000 --profile real /tmp/rt
    python benchmarks/bench_ab.py --before /tmp/before/src --after src --tree /tmp/rt --runs 3

Each case runs ``python -m testfleet ...`` as a fresh process with ``PYTHONPATH`` set to one
side's ``src``, the two sides alternating run by run so that the machine's drift hits both
alike. "cold" removes the project's ``.testfleet`` first; "warm" removes it and runs the
command once first (``check``: a full ``check``, so registry, syntax and style caches are all
warm). FILE is the tree's first test file in sorted order: ``check FILE`` is what the
pre-commit hook runs. Every run must exit 0. Prints a Markdown table: median wall and CPU (user + sys) per case and side.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="src directory of the old code")
    ap.add_argument("--after", type=Path, required=True, help="src directory of the new code")
    ap.add_argument("--tree", type=Path, required=True, help="project tree (e.g. from gen_tree.py)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--case", action="append", default=[],
                    help="run only the cases whose name contains this (repeatable)")
    args = ap.parse_args()
    root = args.tree.resolve()
    one = min(p.relative_to(root).as_posix() for p in (root / "tests").rglob("test_*.py"))
    cases = [
        ("list --format json, cold", ["list", "--format", "json"], "cold"),
        ("check FILE (pre-commit), cold", ["check", one], "cold"),
        ("check, warm", ["check"], "warm"),
        ("list --format json, warm", ["list", "--format", "json"], "again"),
        ("plan --event push, warm", ["plan", "--event", "push"], "again"),
    ]
    if args.case:
        cases = [c for c in cases if any(want in c[0] for want in args.case)]
        if not cases:
            raise SystemExit(f"no case matches {args.case}")
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    # Both sides start from compiled bytecode, as an installed package does: a checkout that
    # was never imported (or PYTHONDONTWRITEBYTECODE=1 in the shell) would otherwise compile
    # every module on every run, which is start-up cost no user pays.
    for src in sides.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True,
                       stdout=subprocess.DEVNULL)
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for name, argv, mode in cases:
        for _ in range(args.runs):
            for side, src in sides.items():
                env = {**base_env, "PYTHONPATH": str(src)}
                shutil.rmtree(root / ".testfleet", ignore_errors=True)
                if mode != "cold":
                    subprocess.run([sys.executable, "-m", "testfleet", *(["check"] if mode == "warm" else argv)],
                                   cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   check=False)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "testfleet", *argv], cwd=root, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if proc.returncode != 0:
                    raise SystemExit(f"{side}: testfleet {' '.join(argv)} exited {proc.returncode}:\n"
                                     f"{proc.stderr.decode(errors='replace')[-2000:]}")
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                results.setdefault((name, side), []).append((wall, cpu))
    print(f"tree {root}, FILE = {one}; {args.runs} runs per case and side, alternating; "
          f"1-min load {os.getloadavg()[0]:.1f}")
    print("| case | side | wall median (s) | CPU median (s) | wall, all runs |")
    print("|---|---|---:|---:|---|")
    for (name, side), runs in results.items():
        walls = [w for w, _ in runs]
        print(f"| {name} | {side} | {statistics.median(walls):.2f} | "
              f"{statistics.median(c for _, c in runs):.2f} | {', '.join(f'{w:.2f}' for w in walls)} |")


if __name__ == "__main__":
    main()
