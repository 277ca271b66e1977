"""A CI plan job's collection cache, as the generated workflow uses it: reused or not?

    python benchmarks/bench_ci_restore.py                      # this checkout, real profile
    python benchmarks/bench_ci_restore.py --source /tmp/before --runs 5 --files 10000
    python benchmarks/bench_ci_restore.py --tree /tmp/rt_auto   # an existing tree (command = "auto")

Every CI run installs testfleet anew (pip writes each file of the wheel again, with new
times), checks the tree out anew (new inodes and times; a self-hosted runner's workspace
path is its own) and restores the registry cache a default-branch run saved. This
builds a wheel of ``--source`` once, installs it into a fresh venv, plans once in a
first workspace to make the cache, then for every run: a new workspace path, the tree
copied into it, ``pip install --force-reinstall --no-deps`` of the same wheel, and
``testfleet plan --format json`` timed, once without the cache ("cold") and once with
what that source's generated workflow keeps restored ("restored": the paths of its
"Restore the collection cache" step), alternating. Medians; the ratio is
restored/cold in the same run. A cache that the reinstall or the new path invalidates
shows as a ratio near 1.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_tree import generate  # noqa: E402

# What the source's own generated workflow restores before planning (its plan job's
# "Restore the collection cache" step), printed by the venv's testfleet.
KEPT = r"""
import sys, yaml
from pathlib import Path
from testfleet.config import load_project
from testfleet.integrations.github_workflow import render_workflow
steps = yaml.safe_load(render_workflow(load_project(Path(sys.argv[1])).config))["jobs"]["plan"]["steps"]
(step,) = [s for s in steps if s.get("name") == "Restore the collection cache"]
print("\n".join(step["with"]["path"].split()))
"""


def run(cmd: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode(errors='replace')}")


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run(cmd, cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def checkout(tree: Path, dest: Path) -> None:
    """A fresh checkout: the same bytes, new inodes and times, no cache directory."""
    shutil.copytree(tree, dest, ignore=shutil.ignore_patterns(".testfleet"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=HERE.parent, help="testfleet checkout to build")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--profile", default="real")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="an existing tree instead of a generated one")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-ci-restore-") as tmp_name:
        tmp = Path(tmp_name)
        env_dir = tmp / "venv"
        venv.EnvBuilder(with_pip=True).create(env_dir)
        python = str(env_dir / "bin" / "python")
        run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "wheel"), str(args.source)])
        (wheel,) = (tmp / "wheel").glob("testfleet-*.whl")
        run([python, "-m", "pip", "install", "-q", str(wheel)])
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a CI runner: bytecode is written
        os.environ.clear()
        os.environ.update(env)
        plan = [str(env_dir / "bin" / "testfleet"), "plan", "--format", "json"]

        tree = args.tree
        if tree is None:
            tree = tmp / "tree"
            generate(tree, args.files, args.seed, args.profile)
        first = tmp / "ws-0" / "repo"
        checkout(tree, first)
        run(plan, first)  # the default-branch run that saved the cache
        kept = subprocess.run([python, "-c", KEPT, str(first)], check=True, capture_output=True,
                              text=True).stdout.split()
        saved = tmp / "saved"
        for rel in kept:
            (saved / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(first / rel, saved / rel)

        samples: dict[str, list[tuple[float, float]]] = {"cold": [], "restored": []}
        for i in range(args.runs):
            for case in (("cold", "restored") if i % 2 == 0 else ("restored", "cold")):
                ws = tmp / f"ws-{i + 1}-{case}" / "repo"
                checkout(tree, ws)
                if case == "restored":
                    shutil.copytree(saved, ws, dirs_exist_ok=True)
                run([python, "-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", str(wheel)])
                samples[case].append(timed(plan, ws))
                shutil.rmtree(ws.parent)

    med = {case: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
           for case, s in samples.items()}
    shown = args.tree or f"{args.files} files, profile {args.profile}"
    print(f"source {args.source}; tree {shown}; restored: {', '.join(kept)}; {args.runs} runs each, "
          f"load {os.getloadavg()[0]:.1f}")
    print("| plan --format json, after a reinstall, in a new workspace | wall median (s) | CPU median (s) |")
    print("|---|---:|---:|")
    for case in ("cold", "restored"):
        print(f"| {case} | {med[case][0]:.3f} | {med[case][1]:.3f} |")
    print(f"restored / cold: wall {med['restored'][0] / med['cold'][0]:.2f}, "
          f"CPU {med['restored'][1] / med['cold'][1]:.2f}")


if __name__ == "__main__":
    main()
