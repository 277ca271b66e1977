"""Partition a stage's files into shards: pure functions of (name, seconds) pairs.

Kept free of I/O and of the plan model, like pytest-split's algorithms module, so
the algorithm can be benchmarked and property-tested on its own.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

Item = tuple[str, float]


def partition(items: Sequence[Item], shards: int) -> list[list[Item]]:
    """Longest-estimate-first onto the least loaded shard, with deterministic ties.

    Ties on duration break by name, ties on load by shard index, so the result
    never depends on the order the files were found in.
    """
    if shards < 1:
        raise ValueError("shards must be >= 1")
    ordered = sorted(items, key=lambda it: (-it[1], it[0]))
    n = max(1, min(shards, len(ordered)))
    groups: list[list[Item]] = [[] for _ in range(n)]
    heap = [(0.0, i) for i in range(n)]
    for item in ordered:
        load, index = heapq.heappop(heap)
        groups[index].append(item)
        heapq.heappush(heap, (load + item[1], index))
    return [g for g in groups if g]


def choose_shards(
    seconds: Sequence[float],
    *,
    shards: int | None,
    target_seconds: float | None,
    max_shards: int | None,
) -> tuple[int, str | None]:
    """How many shards a stage gets, and a warning when the target cannot be met.

    A fixed ``shards`` wins; otherwise the fewest shards whose makespan fits
    ``target_seconds``, capped by ``max_shards``; never more shards than tests.
    """
    n_tests = len(seconds)
    if n_tests == 0:
        return 0, None
    if shards is not None:
        return min(shards, n_tests), None
    cap = min(max_shards or n_tests, n_tests)
    if target_seconds is None:
        return cap, None
    items = [(str(i), s) for i, s in enumerate(seconds)]
    for n in range(1, cap + 1):
        if max(sum(s for _, s in g) for g in partition(items, n)) <= target_seconds:
            return n, None
    return cap, (
        f"{cap} shard(s) cannot meet the target of {target_seconds / 60:g} min "
        f"(makespan {max(sum(s for _, s in g) for g in partition(items, cap)) / 60:.1f} min)"
    )
