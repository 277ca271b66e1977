"""What one frozen plan per CI run costs a ``--stage`` path (issue #26), on a generated tree,
and what it prevents, on a real one.

    python benchmarks/bench_frozen.py                  # 10,000 files, 7 runs per case
    python benchmarks/bench_frozen.py --files 2000 --runs 5
    python benchmarks/bench_frozen.py --tree COPY --stage stage-a-cpu   # a configured tree

``--tree`` plays a stage's shards 1..N one after another on a copy of a configured tree
(``testfleet init --from-existing`` on ``/work/trees/miles``, say), recording for each
shard's files a duration between 0.2x and 5x its estimate in the tree's history, as a
runner that keeps ``.testfleet/`` would: once re-planning each shard from that history
(before #26), once through ``plan_in_process`` (the frozen plan). It reports how many
files ran never and twice each way. (The history of the copy is replaced.)

In process, after one warm-up (registry collected once, history database with one
recorded run of every file of the stage, so estimates come from history), medians of:

- ``before``: what ``run --stage S --shard I/N`` planned before #26: estimates from
  history, quarantine, ``make_plan`` (the reference, measured in the same run);
- ``first shard``: ``plan_in_process`` with no frozen plan yet: the history-free plan
  (the key), estimates, quarantine, the plan, and freezing it to disk;
- ``later shard``: ``plan_in_process`` with the frozen plan present: the history-free plan
  and ``load_plan`` of the frozen file (no history read at all).

CPU time (``time.process_time``) is reported beside wall time: on a shared machine it is
the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from gen_tree import generate  # noqa: E402

STAGE = "stage-a-cpu"


def _median(fn: Callable[[], object], runs: int, before: Callable[[], None] | None = None
            ) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(runs):
        if before is not None:
            before()
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--tree", type=Path, default=None, help="a configured tree (a copy: its "
                                                            "history is replaced)")
    ap.add_argument("--stage", default=STAGE)
    args = ap.parse_args(argv)
    if args.tree is not None:
        replay(args.tree, args.stage, args.seed)
        return

    from testfleet.app.estimates import estimates_for
    from testfleet.app.inprocess import plan_in_process
    from testfleet.cli._trigger import TriggerOptions, build_request
    from testfleet.config import load_project
    from testfleet.planning import make_plan
    from testfleet.registry import collect
    from testfleet.results.quarantine import quarantine_for
    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    with tempfile.TemporaryDirectory(prefix="bench-frozen-") as tmp:
        root = Path(tmp)
        generate(root, args.files, args.seed)
        project = load_project(root, root / "pyproject.toml")
        registry = collect(project, gates=False)
        request = build_request(project, root, TriggerOptions(stages=(STAGE,)), env={})
        files = sorted({r.file for r in registry.registrations if r.suite == STAGE})
        with open_store(project, None) as store:
            store.record_executions([Execution(file=f, stage=STAGE, backend="cpu",
                                               duration=1.0 + i % 17, commit="c", ci_run_id="1")
                                     for i, f in enumerate(files)])
        env = {"GITHUB_RUN_ID": "1", "GITHUB_SHA": "c" * 40}

        def before() -> None:
            estimates, _ = estimates_for(project, registry, stages=[STAGE])
            quarantine, _ = quarantine_for(project, None, [STAGE])
            make_plan(project, registry, request, estimates, quarantine=quarantine)

        def shard() -> None:
            made = plan_in_process(project, registry, request, database=None, stage=STAGE,
                                   environ=env)
            assert made.plan.jobs

        plans = root / ".testfleet" / "plans"

        def unfrozen() -> None:
            shutil.rmtree(plans, ignore_errors=True)

        shard()  # warm-up (imports, caches)
        cases = {
            "before #26: estimates + quarantine + make_plan (reference)": _median(before, args.runs),
            "first shard: key plan + estimates + plan + freeze": _median(shard, args.runs, unfrozen),
        }
        shard()
        cases["later shard: key plan + load the frozen plan"] = _median(shard, args.runs)
        n_jobs = len(plan_in_process(project, registry, request, database=None, stage=STAGE,
                                     environ=env).plan.jobs)
    print(f"tree: {args.files} files, stage {STAGE}: {len(files)} files in {n_jobs} shards; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}, {args.runs} runs")
    print("| case | wall median (s) | CPU median (s) |")
    print("|---|---|---|")
    for name, (wall, cpu) in cases.items():
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |")


def replay(root: Path, stage: str, seed: int) -> None:
    """Shards 1..N one after another, history recorded between them: each file's count."""
    import random
    from collections import Counter

    from testfleet.app.estimates import estimates_for
    from testfleet.app.inprocess import plan_in_process
    from testfleet.cli._trigger import TriggerOptions, build_request
    from testfleet.config import load_project
    from testfleet.configfile import find_config
    from testfleet.planning import make_plan
    from testfleet.registry import collect
    from testfleet.runner.jobs import select_stage_jobs
    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    found = find_config(root)
    assert found is not None, f"no testfleet configuration in {root}"
    project = load_project(found.parent, found)
    registry = collect(project, gates=False)
    request = build_request(project, root, TriggerOptions(stages=(stage,)), env={})
    env = {"GITHUB_RUN_ID": "1", "GITHUB_SHA": "c" * 40}
    results = {}
    for mode in ("re-plan each shard (before #26)", "frozen plan (#26)"):
        cache = root / project.config.cache_dir
        shutil.rmtree(cache, ignore_errors=True)
        rng = random.Random(seed)
        ran: Counter[str] = Counter()
        shards = None
        i = 1
        while shards is None or i <= shards:
            if mode.startswith("frozen"):
                plan = plan_in_process(project, registry, request, database=None, stage=stage,
                                       environ=env).plan
            else:
                estimates, _ = estimates_for(project, registry, stages=[stage])
                plan = make_plan(project, registry, request, estimates)
            first = next(j for j in plan.jobs if j.stage == stage)
            shards = shards or first.shards
            if first.shards != shards:  # the old way: the count itself moved
                ran["<shard count changed>"] += 1
                break
            sel = select_stage_jobs(plan, stage, (i, shards))
            ran.update(item.file for item in sel.items)
            with open_store(project, None) as store:
                store.record_executions([Execution(
                    file=item.file, stage=stage, backend=sel.backend,
                    duration=round(item.estimate * rng.uniform(0.2, 5.0), 3), commit="c",
                    ci_run_id="1") for item in sel.items])
            i += 1
        planned = {r.file for r in registry.registrations if r.suite == stage and not r.disabled}
        results[mode] = (shards, len(planned), sum(1 for f in planned if ran[f] == 0),
                         sum(1 for f in planned if ran[f] > 1))
    print(f"tree {root}, stage {stage}")
    print("| mode | shards | files | never run | run twice or more |")
    print("|---|---|---|---|---|")
    for mode, (shards, n, never, twice) in results.items():
        print(f"| {mode} | {shards} | {n} | {never} | {twice} |")


if __name__ == "__main__":
    main()
