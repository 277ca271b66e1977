"""Flaky detection on synthetic histories with known flaky, broken and healthy files.

    python benchmarks/bench_flaky.py [--seed 0] [--files 200] [--commits 40]

Builds a history through the real store (a temporary SQLite database, rows written as
the runner writes them: one row per attempt, ``final`` on the verdict) and classifies
it with the real reader and rules (``[tool.testfleet.flaky]`` defaults). Ground truth:

- **flaky**: fails at random with p in [0.2, 0.5]; half the runs retry once (a failure
  then a pass is a pass on a retry), and commits get 1-3 runs (PR, nightly, manual);
- **broken**: fails every run;
- **healthy**: passes, except (a) a real regression: fails from one commit on until a
  fix some commits later, (b) one infrastructure blip in the window (one failure on a
  commit that also passed: real evidence, but below the threshold), or (c) nothing.

Prints precision and recall of ``state in (flaky, recovered)`` against the flaky set
and of ``broken`` against the broken set, and the time to read and classify.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path


def synth(seed: int, files: int, commits: int) -> tuple[list[object], dict[str, str]]:
    from testfleet.store.durations import Execution

    rng = random.Random(seed)
    kinds = (["flaky"] * (files * 3 // 10) + ["broken"] * (files // 10))
    kinds += ["healthy"] * (files - len(kinds))
    truth = {f"tests/t{i:04d}.py": kind for i, kind in enumerate(kinds)}
    runs_of_commit = [rng.randint(1, 3) for _ in range(commits)]
    rows: list[object] = []
    ts = 1_700_000_000.0
    for name, kind in truth.items():
        p = rng.uniform(0.2, 0.5)
        healthy_mode = rng.choice(("regression", "blip", "clean"))
        reg_start = rng.randrange(commits // 2, commits - 3)
        reg_end = reg_start + rng.randint(1, 3)
        blip = rng.randrange(commits)
        t = ts
        for c in range(commits):
            sha = f"{c:040x}"
            for k in range(runs_of_commit[c]):
                t += 60.0
                retry = rng.random() < 0.5
                if kind == "broken":
                    attempts = ["FAILED"] + (["FAILED"] if retry else [])
                elif kind == "flaky":
                    first = "FAILED" if rng.random() < p else "PASSED"
                    attempts = [first]
                    if first == "FAILED" and retry:
                        attempts.append("FAILED" if rng.random() < p else "FLAKY")
                elif healthy_mode == "regression" and reg_start <= c < reg_end:
                    attempts = ["FAILED"] + (["FAILED"] if retry else [])
                elif healthy_mode == "blip" and c == blip and k == 0 and runs_of_commit[c] > 1:
                    attempts = ["FAILED"]
                else:
                    attempts = ["PASSED"]
                for n, outcome in enumerate(attempts, 1):
                    rows.append(Execution(name, "stage-a-cpu", "cpu", 1.0, outcome=outcome,
                                          attempt=n, commit=sha, ci_run_id=f"{c}-{k}",
                                          timestamp=t + n, final=n == len(attempts)))
    return rows, truth


def score(predicted: set[str], actual: set[str]) -> tuple[float, float]:
    tp = len(predicted & actual)
    precision = tp / len(predicted) if predicted else 1.0
    recall = tp / len(actual) if actual else 1.0
    return precision, recall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--commits", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from testfleet.config import load_project
    from testfleet.results.flaky import classify_all
    from testfleet.results.query import file_results
    from testfleet.results.settings import flaky_policy
    from testfleet.store import open_store

    rows, truth = synth(args.seed, args.files, args.commits)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tests").mkdir()
        (root / "testfleet.toml").write_text('[stages.stage-a-cpu]\nbackend = "cpu"\n')
        project = load_project(root)
        policy = flaky_policy(project.config)
        with open_store(project) as store:
            store.record_executions(rows)  # type: ignore[arg-type]
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                verdicts = classify_all(file_results(store, runs=policy.window), policy)
                times.append(time.perf_counter() - t0)
    state = {v.file: v.state for v in verdicts}
    flaky_p, flaky_r = score({f for f, s in state.items() if s in ("flaky", "recovered")},
                             {f for f, k in truth.items() if k == "flaky"})
    broken_p, broken_r = score({f for f, s in state.items() if s == "broken"},
                               {f for f, k in truth.items() if k == "broken"})
    counts = {k: sum(1 for v in truth.values() if v == k) for k in ("flaky", "broken", "healthy")}
    print(f"synthetic history: seed {args.seed}, {len(truth)} files ({counts}), {args.commits} "
          f"commits, {len(rows)} execution rows; policy window {policy.window}, threshold "
          f"{policy.threshold:g}, min_runs {policy.min_runs}")
    print("| class | precision | recall |")
    print("|---|---:|---:|")
    print(f"| flaky (state flaky or recovered) | {flaky_p:.3f} | {flaky_r:.3f} |")
    print(f"| broken | {broken_p:.3f} | {broken_r:.3f} |")
    print(f"read + classify: median {statistics.median(times) * 1000:.1f} ms over {args.repeat} runs")
    wrong = sorted((f, truth[f], state.get(f)) for f in truth
                   if (truth[f] == "flaky") != (state.get(f) in ("flaky", "recovered"))
                   or (truth[f] == "broken") != (state.get(f) == "broken"))
    for f, want, got in wrong[:10]:
        print(f"  misclassified: {f}: truth {want}, got {got}")
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
