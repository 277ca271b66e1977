"""Benchmark: where and how the adopted plan runs SGLang's pull-request stages (#38).

    python benchmarks/real_trees_fidelity.py --sglang /tmp/sgl [--src /work/main/src]

``--sglang`` is an unmodified SGLang tree; the mirror's is enough, for instance
``git --git-dir=<fetch of modal-projects/sglang> archive HEAD .github scripts/ci test
python/sglang/test python/sglang/jit_kernel python/pyproject.toml | tar -x -C /tmp/sgl``.
The tree is copied and adopted there (``init --from-existing``, no hand edit), then:

* per stage ``pr-test.yml`` runs on a pull request (the 12 that call ``_pr-test-stage.yml``
  and the inline ``base-a-test-cpu``): SGLang's runner labels (its ``runner_config`` looked
  up in ``scripts/ci/runner_configs.yml``, ``$b200_runner`` as ``4-gpu-b200``, its value when
  sgl-kernel did not change) against the adopted ``runs_on``; its install script against
  the adopted ``setup``; SGLang's partition count and throttle (its own
  ``compute_partitions``, static estimates, run in a separate ``python3``) against the
  plan's shards for ``plan --event pull_request --labels run-ci``, and whether the longest
  shard fits SGLang's per-shard budget (0.75 x the stage's run timeout);
* the critical path of both, from the same per-file estimates: each stage's partitions
  (SGLang's own LPT ``auto_partition``; the plan's shards) run at the stage's
  ``max_parallel`` in order as slots free up, stages in the order the pull-request waits
  give (base-a, then base-b, then base-c: the adopted ``needs_on``).

``--src`` measures another testfleet (the one before a change); default this checkout's.
Prints a Markdown section; exits 1 when a target is missed (runners, installs, budgets:
13 of 13).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STAGE_WF = "./.github/workflows/_pr-test-stage.yml"
PR_DIFF = b"M\0python/sglang/srt/server_args.py\0M\0test/registered/core/test_basic_sanity.py\0"

# Runs in SGLang's checkout: its partition counts and, per partition, the files' est_time sum.
SGLANG_SIDE = r"""
import json, sys
sys.path.insert(0, "scripts/ci/utils")
import compute_partitions as cp
reg = cp._ci_register
tests = cp.collect_tests(cp.discover_files("."), sanity_check=False)
parts = cp.compute_partitions(tests, ".", cp.load_run_timeouts(".github/workflows/pr-test.yml"))
out = {}
for suite, info in parts.items():
    group = [t for t in tests if t.effective_suite == suite and not t.nightly and t.disabled is None
             and t.backend in cp._TARGET_BACKENDS]
    loads = [sum(t.est_time for t in reg.auto_partition(group, r, info["size"]))
             for r in range(info["size"])]
    out[suite] = {"size": info["size"], "max_parallel": info["max_parallel"], "loads": loads}
print(json.dumps(out))
"""


def wall(loads: list[float], parallel: int) -> float:
    """Seconds until the last of ``loads`` ends, started in order on ``parallel`` slots."""
    slots = [0.0] * max(1, min(parallel, len(loads) or 1))
    heapq.heapify(slots)
    end = 0.0
    for load in loads:
        start = heapq.heappop(slots)
        end = max(end, start + load)
        heapq.heappush(slots, start + load)
    return end


def critical_path(walls: dict[str, float], needs: dict[str, list[str]]) -> tuple[float, list[str]]:
    done: dict[str, tuple[float, list[str]]] = {}

    def finish(stage: str) -> tuple[float, list[str]]:
        if stage not in done:
            before = max((finish(n) for n in needs.get(stage, []) if n in walls),
                         default=(0.0, []))
            done[stage] = (before[0] + walls[stage], [*before[1], stage])
        return done[stage]

    return max(finish(s) for s in walls)


def measure(tree: Path, src: Path = ROOT / "src") -> dict:
    work = Path(tempfile.mkdtemp(prefix="fidelity-"))
    copy = work / "sglang"
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".git"))
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    init = subprocess.run([sys.executable, "-m", "testfleet", "init", "--from-existing",
                           "--report", str(work / "adoption.md")], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    seconds = time.perf_counter() - started
    diff = work / "diff"
    diff.write_bytes(PR_DIFF)
    plan = subprocess.run([sys.executable, "-m", "testfleet", "plan", "--event", "pull_request",
                           "--labels", "run-ci", "--changed-files", str(diff), "--format", "json"],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=900, check=False)
    jobs = json.loads(plan.stdout)["jobs"] if plan.returncode == 0 else []
    side_env = {**os.environ, "PYTHONPATH": str(copy / "python"), "PYTHONDONTWRITEBYTECODE": "1"}
    side = subprocess.run([sys.executable, "-c", SGLANG_SIDE], cwd=copy, env=side_env,
                          capture_output=True, text=True, timeout=300, check=True)
    theirs = json.loads(side.stdout)
    sys.path.insert(0, str(src))
    from testfleet.config import load_project

    stages = load_project(copy).config.stages
    configs = yaml.safe_load((copy / "scripts/ci/runner_configs.yml").read_text())["runner_configs"]
    workflow = yaml.safe_load((copy / ".github/workflows/pr-test.yml").read_text())["jobs"]
    rows = []
    for job_id, job in workflow.items():
        with_ = job.get("with") or {}
        if job.get("uses") == STAGE_WF:
            suite, entry = with_["self_name"], configs[with_["runner_config"]]
            labels = ["4-gpu-b200" if entry["runs_on"] == "$b200_runner" else entry["runs_on"]]
            install, budget = f"bash {entry['install']}", 0.75 * int(with_["run_timeout_minutes"])
        elif job_id == "base-a-test-cpu":
            suite, labels = job_id, [job["runs-on"]]
            install = 'uv pip install -e "python[dev]"'
            budget = 0.75 * next(s["timeout-minutes"] for s in job["steps"] if s.get("name") == "Run test")
        else:
            continue
        stage = stages.get(suite)
        shards = [j for j in jobs if j["stage"] == suite]
        mine = [j["estimate"] for j in shards]
        parallel = stage.max_parallel if stage and stage.max_parallel else len(mine)
        info = theirs.get(suite, {"size": 0, "max_parallel": 0, "loads": []})
        rows.append({
            "stage": suite, "sglang_runner": labels, "runs_on": stage.runs_on if stage else None,
            "install": install, "installed": bool(stage and any(install in s for s in stage.setup)),
            "dormant": stage.disabled if stage else "missing",
            "sglang_size": info["size"], "sglang_parallel": info["max_parallel"],
            "shards": len(mine), "max_parallel": stage.max_parallel if stage else None,
            "longest": max(mine, default=0.0), "budget_min": budget,
            "fits": bool(mine) and (max(mine) <= budget * 60 or len(mine) >= info["size"]),
            "wall": wall(mine, parallel),
            "sglang_wall": wall(info["loads"], info["max_parallel"] or len(info["loads"])),
        })
    walls = {r["stage"]: r["wall"] for r in rows}
    their_walls = {r["stage"]: r["sglang_wall"] for r in rows}
    needs = {r["stage"]: list(stages[r["stage"]].needs_on.get("pull_request", stages[r["stage"]].needs))
             for r in rows if r["stage"] in stages}
    shutil.rmtree(work, ignore_errors=True)
    return {"init_exit": init.returncode, "init_seconds": seconds,
            "init_lines": len(init.stdout.splitlines()) + len(init.stderr.splitlines()),
            "summary": init.stdout.splitlines()[:6], "rows": rows,
            "critical": critical_path(walls, needs), "sglang_critical": critical_path(their_walls, needs)}


def render(result: dict) -> str:
    rows = result["rows"]
    n = len(rows)
    runners = sum(r["runs_on"] == r["sglang_runner"] for r in rows)
    installs = sum(r["installed"] for r in rows)
    fits = sum(r["fits"] for r in rows)
    out = [f"init --from-existing: exit {result['init_exit']}, {result['init_lines']} lines of "
           f"output, {result['init_seconds']:.1f} s; its first lines:", "", "```text",
           *result["summary"], "```", "",
           f"- runner labels as SGLang's: {runners} of {n}",
           f"- installs with SGLang's own install command: {installs} of {n}",
           f"- longest shard within 0.75 x the run timeout, or at least SGLang's partition count: "
           f"{fits} of {n}", "",
           "| stage | SGLang runner | adopted runs_on | SGLang partitions (max_parallel) | "
           "shards (max_parallel) | longest shard / budget (min) | wall SGLang / adopted (min) |",
           "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| `{r['stage']}` | {', '.join(r['sglang_runner'])} | "
                   f"{', '.join(r['runs_on'] or ['-'])} | {r['sglang_size']} ({r['sglang_parallel']}) | "
                   f"{r['shards']} ({r['max_parallel'] or r['shards']}) | "
                   f"{r['longest'] / 60:.1f} / {r['budget_min']:g} | "
                   f"{r['sglang_wall'] / 60:.1f} / {r['wall'] / 60:.1f} |")
    (mine, path), (theirs, their_path) = result["critical"], result["sglang_critical"]
    out += ["", f"Critical path (waves at each stage's max_parallel, same per-file estimates): "
            f"SGLang {theirs / 60:.1f} min ({' -> '.join(their_path)}), adopted {mine / 60:.1f} min "
            f"({' -> '.join(path)})."]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sglang", type=Path, required=True)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args()
    result = measure(args.sglang, args.src.resolve())
    print(render(result))
    rows = result["rows"]
    ok = all(r["runs_on"] == r["sglang_runner"] and r["installed"] and r["fits"] for r in rows)
    return 0 if ok and result["init_exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
