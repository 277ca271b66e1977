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
