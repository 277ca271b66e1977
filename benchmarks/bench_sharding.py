"""Partition quality and speed against LPT and the lower bound, in one run.

    python benchmarks/bench_sharding.py            # full run (about a minute)
    python benchmarks/bench_sharding.py --seeds 3  # quicker
    python benchmarks/bench_sharding.py --json out.json

Instances: a bimodal duration mix (70 % unit tests, 5-30 s; 30 % end-to-end tests,
50-2,000 s; uniform within each mode, 0.1 s resolution), n in {20, 100, 600, 2000}
files, shards in {2, 4, 8, 16, 32}, several seeds; plus LPT's worst-case family
(2m+1 jobs 2m-1, 2m-1, 2m-2, 2m-2, ..., m+1, m+1, m, m, m on m shards; LPT = 4m-1,
optimum = 3m). Reported: makespan / lower bound (``max(longest, total / shards)``)
for LPT and for ``partition``, how often ``partition`` beats / ties / loses to LPT,
and the time per stage (median of repeated runs).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from testfleet.planning.sharding import (
    lower_bound,
    partition,
    strong_lower_bound,
)

SIZES = (20, 100, 600, 2000)
SHARDS = (2, 4, 8, 16, 32)


def bimodal(n: int, seed: int) -> list[tuple[str, float]]:
    rng = random.Random(seed * 100_003 + n)
    items = []
    for i in range(n):
        if rng.random() < 0.7:
            seconds = round(rng.uniform(5, 30), 1)
        else:
            seconds = round(rng.uniform(50, 2000), 1)
        items.append((f"tests/t{i:05d}.py", seconds))
    return items


def worst_case(m: int) -> list[tuple[str, float]]:
    sizes: list[int] = []
    for v in range(2 * m - 1, m, -1):
        sizes += [v, v]
    sizes += [m, m, m]
    return [(f"job{i:03d}", float(v)) for i, v in enumerate(sizes)]


def lpt_makespan(items: list[tuple[str, float]], shards: int) -> float:
    """Textbook LPT, independent of the module under test."""
    import heapq

    ordered = sorted(items, key=lambda it: (-it[1], it[0]))
    k = max(1, min(shards, len(ordered)))
    heap = [(0.0, i) for i in range(k)]
    for _, s in ordered:
        load, i = heapq.heappop(heap)
        heapq.heappush(heap, (load + s, i))
    return max(load for load, _ in heap)


def timed(items: list[tuple[str, float]], shards: int, repeat: int) -> tuple[float, float]:
    """(makespan, median seconds per call)."""
    times = []
    groups: list[list[tuple[str, float]]] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        groups = partition(items, shards)
        times.append(time.perf_counter() - t0)
    return max(math.fsum(s for _, s in g) for g in groups), statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats per instance")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    rows = []
    cells = []
    for n in SIZES:
        for k in SHARDS:
            ratios, lpt_ratios, strong, times = [], [], [], []
            better = tie = worse = 0
            for seed in range(args.seeds):
                items = bimodal(n, seed)
                seconds = [s for _, s in items]
                lb = lower_bound(seconds, k)
                ours, t = timed(items, k, args.repeat)
                lpt = lpt_makespan(items, k)
                ratios.append(ours / lb)
                lpt_ratios.append(lpt / lb)
                strong.append(ours / strong_lower_bound(seconds, k))
                times.append(t)
                if ours < lpt - 1e-9:
                    better += 1
                elif ours > lpt + 1e-9:
                    worse += 1
                else:
                    tie += 1
                rows.append({"n": n, "shards": k, "seed": seed, "lower_bound": lb,
                             "lpt": lpt, "ours": ours, "seconds": t})
            cells.append({
                "n": n, "shards": k,
                "lpt_ratio_median": statistics.median(lpt_ratios),
                "ratio_median": statistics.median(ratios), "ratio_max": max(ratios),
                "strong_ratio_max": max(strong),
                "better": better, "tie": tie, "worse": worse,
                "ms_median": 1000 * statistics.median(times), "ms_max": 1000 * max(times),
            })

    all_ratios = [r["ours"] / r["lower_bound"] for r in rows]
    all_lpt = [r["lpt"] / r["lower_bound"] for r in rows]
    worse_total = sum(c["worse"] for c in cells)
    better_total = sum(c["better"] for c in cells)

    family = []
    for m in (2, 3, 4, 5, 8, 10, 16, 32):
        items = worst_case(m)
        ours, _ = timed(items, m, 1)
        family.append({"m": m, "lpt": lpt_makespan(items, m), "ours": ours, "optimum": 3 * m})

    big = bimodal(2000, 12345)
    _, big_t = timed(big, 32, 21)

    print(f"# partition vs LPT — {platform.python_implementation()} {platform.python_version()}, "
          f"{platform.machine()}, seeds={args.seeds}, timing repeats={args.repeat}\n")
    print("| n | shards | LPT / LB (median) | ours / LB (median) | ours / LB (max) | "
          "ours / strong LB (max) | better / tie / worse than LPT | ms (median) | ms (max) |")
    print("|---:|---:|---:|---:|---:|---:|:---:|---:|---:|")
    for c in cells:
        print(f"| {c['n']} | {c['shards']} | {c['lpt_ratio_median']:.4f} | {c['ratio_median']:.5f} | "
              f"{c['ratio_max']:.5f} | {c['strong_ratio_max']:.5f} | "
              f"{c['better']} / {c['tie']} / {c['worse']} | {c['ms_median']:.2f} | {c['ms_max']:.2f} |")
    print(f"\nall {len(rows)} bimodal instances: median ours/LB = {statistics.median(all_ratios):.6f} "
          f"(LPT {statistics.median(all_lpt):.6f}); p95 ours/LB = "
          f"{sorted(all_ratios)[int(0.95 * len(all_ratios))]:.4f}; "
          f"better than LPT on {better_total}, worse on {worse_total}")
    print("\nLPT worst-case family (2m+1 jobs on m shards):\n")
    print("| m | LPT | ours | optimum 3m |")
    print("|---:|---:|---:|---:|")
    for f in family:
        print(f"| {f['m']} | {f['lpt']:g} | {f['ours']:g} | {f['optimum']} |")
    print(f"\n2000 files x 32 shards: median {1000 * big_t:.1f} ms per stage (21 runs)")

    if args.json:
        args.json.write_text(json.dumps({"cells": cells, "rows": rows, "family": family,
                                         "ms_2000x32": 1000 * big_t}, indent=1))
    ok = (statistics.median(all_ratios) <= 1.005 and worse_total == 0
          and all(f["ours"] < f["lpt"] for f in family))
    print("\ntargets (median <= 1.005, never above LPT, below LPT on the family): "
          + ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
