"""Replay: plans from literal est_time vs plans from recorded history.

    python benchmarks/bench_replay.py              # 5 seeds x 8 rounds (about 20 s)
    python benchmarks/bench_replay.py --seeds 2

A synthetic project with three stages. Each file's true duration is
``est_time x stage bias x file error x run noise``: the file error (log-normal,
sigma 0.35) is how wrong its literal is, the run noise (log-normal, sigma 0.10)
varies run to run, and the stage bias is 1.0 except for ``stage-c-mi300x``, which
is systematically 2x slower than its literals (the same files as H200, another GPU
family). Every round, two plans are made — one from the literals, one from
``estimates_for`` over the history recorded so far (through the real store, SQLite)
— and both are scored on that round's true durations: the slowest shard, against
the true lower bound ``max(longest, total / shards)``. Then the round's executions
(5 % failures, with truncated times that must be ignored) are recorded.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from testfleet.app.estimates import estimates_for
from testfleet.config import load_project
from testfleet.planning.sharding import choose_shards, partition
from testfleet.registry.model import Registration
from testfleet.store import open_store
from testfleet.store.durations import Execution

CONFIG = """\
roots = ["tests"]

[durations]
statistic = "{statistic}"
window = 5

[stages.stage-a-cpu]
backend = "cpu"
shards = 4

[stages.stage-c-h200]
backend = "cuda"
shards = 4

[stages.stage-c-mi300x]
backend = "rocm"
target_minutes = 240
max_shards = 12
"""
BIAS = {"stage-a-cpu": 1.0, "stage-c-h200": 1.0, "stage-c-mi300x": 2.0}
BACKEND = {"stage-a-cpu": "cpu", "stage-c-h200": "cuda", "stage-c-mi300x": "rocm"}


def registrations(seed: int) -> list[Registration]:
    rng = random.Random(seed)
    regs = [Registration(f"tests/unit/test_u{i:03d}.py", "cpu", "stage-a-cpu",
                         float(rng.choice([5, 10, 15, 20, 30])), line=1) for i in range(120)]
    for i in range(30):
        est = float(rng.choice([300, 600, 900, 1200, 1500, 1800, 2400, 3600]))
        file = f"tests/e2e/test_e{i:02d}.py"
        regs.append(Registration(file, "cuda", "stage-c-h200", est, line=3))
        regs.append(Registration(file, "rocm", "stage-c-mi300x", est, line=4))
    return regs


def plan_stage(seconds: dict[str, float], stage: str, config) -> list[list[str]]:  # type: ignore[no-untyped-def]
    cfg = config.stages[stage]
    n, _ = choose_shards(list(seconds.values()), shards=cfg.shards,
                         target_seconds=cfg.target_minutes * 60 if cfg.target_minutes else None,
                         max_shards=cfg.max_shards)
    return [[f for f, _ in g] for g in partition(sorted(seconds.items()), n)]


def score(groups: list[list[str]], true: dict[str, float]) -> tuple[float, float]:
    """(slowest shard, true lower bound for that many shards)."""
    loads = [math.fsum(true[f] for f in g) for g in groups]
    values = list(true.values())
    return max(loads), max(max(values), math.fsum(values) / len(groups))


def run(seed: int, rounds: int, statistic: str = "median") -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tests").mkdir()
        (root / "testfleet.toml").write_text(CONFIG.replace("{statistic}", statistic),
                                              encoding="utf-8")
        project = load_project(root)
        regs = registrations(seed)
        rng = random.Random(seed * 7919)
        mean = {(r.file, r.suite): r.est_time * BIAS[r.suite] * math.exp(rng.gauss(0, 0.35))
                for r in regs}
        for rnd in range(rounds):
            estimates, _ = estimates_for(project, regs)
            true = {key: m * math.exp(rng.gauss(0, 0.10)) for key, m in mean.items()}
            for stage in BIAS:
                keys = [(r.file, r.suite) for r in regs if r.suite == stage]
                literal = {f: next(r.est_time for r in regs if (r.file, r.suite) == (f, s))
                           for f, s in keys}
                hist = {f: estimates[(f, s)][0] for f, s in keys}
                truth = {f: true[(f, s)] for f, s in keys}
                lit_groups = plan_stage(literal, stage, project.config)
                his_groups = plan_stage(hist, stage, project.config)
                lit_span, lit_lb = score(lit_groups, truth)
                his_span, his_lb = score(his_groups, truth)
                share = sum(1 for f, s in keys if estimates[(f, s)][1] == "history") / len(keys)
                out.append({"seed": seed, "round": rnd, "stage": stage,
                            "lit_shards": len(lit_groups), "his_shards": len(his_groups),
                            "lit_span": lit_span, "lit_lb": lit_lb,
                            "his_span": his_span, "his_lb": his_lb, "history_share": share})
            rows = []
            for (file, stage), seconds in true.items():
                failed = rng.random() < 0.05
                rows.append(Execution(file, stage, BACKEND[stage],
                                      seconds * (0.3 if failed else 1.0),
                                      outcome="FAILED" if failed else "PASSED",
                                      ci_run_id=f"run-{rnd}", timestamp=1.0e9 + rnd * 3600))
            with open_store(project) as store:
                store.record_executions(rows)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3, help="rounds of history before scoring")
    ap.add_argument("--statistic", choices=["median", "p90"], default="median")
    args = ap.parse_args()
    rows = [r for seed in range(args.seeds) for r in run(seed, args.rounds, args.statistic)]

    def med(stage: str, key: str, rounds: range) -> float:
        return statistics.median(float(r[key]) for r in rows  # type: ignore[arg-type]
                                 if r["stage"] == stage and r["round"] in rounds)

    scored = range(args.warmup, args.rounds)
    print(f"# replay: {args.seeds} seeds x {args.rounds} rounds, scored rounds "
          f"{args.warmup}..{args.rounds - 1} (medians), history statistic {args.statistic}\n")
    print("| stage | true/literal | shards lit -> hist | slowest shard, literals (min) | "
          "slowest shard, history (min) | true LB at history's shards (min) | "
          "literals / LB | history / LB | history share |")
    print("|---|---:|:---:|---:|---:|---:|---:|---:|---:|")
    for stage in BIAS:
        lit = med(stage, "lit_span", scored)
        his = med(stage, "his_span", scored)
        lb = med(stage, "his_lb", scored)
        lit_ratio = statistics.median(float(r["lit_span"]) / float(r["lit_lb"]) for r in rows  # type: ignore[arg-type]
                                      if r["stage"] == stage and r["round"] in scored)
        his_ratio = statistics.median(float(r["his_span"]) / float(r["his_lb"]) for r in rows  # type: ignore[arg-type]
                                      if r["stage"] == stage and r["round"] in scored)
        print(f"| {stage} | {BIAS[stage]:g}x | {med(stage, 'lit_shards', scored):g} -> "
              f"{med(stage, 'his_shards', scored):g} | {lit / 60:.1f} | {his / 60:.1f} | "
              f"{lb / 60:.1f} | {lit_ratio:.3f} | {his_ratio:.3f} | "
              f"{med(stage, 'history_share', scored):.0%} |")
    first = range(0, 1)
    print("\nround 0 (no history yet): plans are identical — "
          + ", ".join(f"{s}: {med(s, 'lit_span', first) / 60:.1f} vs {med(s, 'his_span', first) / 60:.1f} min"
                      for s in BIAS))
    target = 240.0
    met_lit = sum(1 for r in rows if r["stage"] == "stage-c-mi300x" and r["round"] in scored
                  and float(r["lit_span"]) / 60 <= target)  # type: ignore[arg-type]
    met_his = sum(1 for r in rows if r["stage"] == "stage-c-mi300x" and r["round"] in scored
                  and float(r["his_span"]) / 60 <= target)  # type: ignore[arg-type]
    total = sum(1 for r in rows if r["stage"] == "stage-c-mi300x" and r["round"] in scored)
    print(f"stage-c-mi300x target {target:g} min met: literals {met_lit}/{total} rounds, "
          f"history {met_his}/{total} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
