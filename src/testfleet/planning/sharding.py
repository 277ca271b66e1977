"""Partition a stage's files into shards: pure functions of (name, seconds) pairs.

A stage finishes when its slowest shard finishes, and GPU runner hours are the most
expensive thing a project buys, so the objective is the makespan (the largest shard
load). Exact minimisation is NP-hard; this module does what is cheap and provably
no worse than the classic greedy:

1. **LPT** (longest estimate first onto the least-loaded shard) as the baseline.
2. **Local search** on the heaviest shard: the best single move or pairwise swap
   between it and any lighter shard, repeated while the heaviest load strictly falls.
3. **Karmarkar-Karp differencing** (multiway largest differencing method) when the
   instance is small enough for it to be cheap, followed by the same local search.

The result with the smaller makespan wins (ties go to the LPT-based one), so a
partition is never worse than LPT. Effort is capped by *counted work*, never by wall
clock: identical inputs give an identical partition on every machine, and items are
put into a canonical order first, so the order in which files were found is irrelevant.

Kept free of I/O and of the plan model so the algorithm can be benchmarked and
property-tested on its own.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

Item = tuple[str, float]

# Work caps (number of candidate evaluations / merge operations). They keep the worst
# case bounded (2,000 files x 32 shards plans in a few tens of milliseconds) without
# making the result depend on how fast the machine is.
_SEARCH_BUDGET = 400_000
_KK_MAX_WORK = 5_000  # n * shards above which differencing is skipped
# Differencing is skipped when local search is already this close to the lower bound:
# it could gain at most this fraction of the makespan and costs the most time.
_KK_SKIP_GAP = 1e-5
_REL_EPS = 1e-12


@dataclass(frozen=True)
class PartitionStats:
    """Balance figures of one stage's partition, as reported in the plan.

    ``lower_bound`` is ``max(longest test, total / shards)``: no partition can beat
    it, so ``ratio = makespan / lower_bound`` is an honest upper bound on how far
    from optimal the partition is (1.0 means provably optimal).
    """

    shards: int
    makespan: float
    lower_bound: float
    ratio: float
    total: float
    loads: tuple[float, ...]


def lower_bound(seconds: Sequence[float], shards: int) -> float:
    """``max(longest, total / shards)`` — the makespan no partition can beat."""
    if not seconds or shards < 1:
        return 0.0
    k = min(shards, len(seconds))
    return max(max(seconds), math.fsum(seconds) / k)


def strong_lower_bound(seconds: Sequence[float], shards: int) -> float:
    """A tighter bound that also counts that two of the ``shards + 1`` longest tests
    must share a shard. Used by the benchmarks to show how much of the remaining gap
    to :func:`lower_bound` is the bound's slack rather than the partition's."""
    base = lower_bound(seconds, shards)
    if len(seconds) <= shards:
        return base
    top = sorted(seconds, reverse=True)
    return max(base, top[shards - 1] + top[shards])


def partition_stats(groups: Sequence[Sequence[Item]], shards: int | None = None) -> PartitionStats:
    """Makespan, lower bound and their ratio for a partition (``shards`` defaults to
    the number of non-empty groups)."""
    loads = tuple(math.fsum(s for _, s in g) for g in groups)
    seconds = [s for g in groups for _, s in g]
    k = shards if shards is not None else max(1, len(groups))
    makespan = max(loads, default=0.0)
    bound = lower_bound(seconds, k)
    ratio = makespan / bound if bound > 0 else 1.0
    return PartitionStats(
        shards=len(groups), makespan=makespan, lower_bound=bound, ratio=ratio,
        total=math.fsum(seconds), loads=loads,
    )


def _validate(items: Sequence[Item], shards: int) -> None:
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards must be an integer >= 1, got {shards!r}")
    bad = [
        f"{name!r}: {seconds!r}"
        for name, seconds in items
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool)
        or not math.isfinite(seconds) or seconds < 0
    ]
    if bad:
        shown = ", ".join(bad[:5]) + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else "")
        raise ValueError(f"durations must be finite and >= 0; got {shown}")


def partition(items: Sequence[Item], shards: int) -> list[list[Item]]:
    """Split ``items`` into exactly ``min(shards, len(items))`` non-empty groups with a
    small makespan.

    Never worse than LPT on any instance; usually within a fraction of a percent of
    the lower bound. Groups come heaviest first; within a group, longest first (ties
    by name), so the output is canonical too. Exactly that many groups, because a CI
    matrix of ``shards = N`` jobs is fixed: files of zero (or near-zero) measured
    duration fit on one shard by load alone, and the others would silently vanish.
    """
    _validate(items, shards)
    ordered = sorted(items, key=lambda it: (-float(it[1]), it[0]))
    n = len(ordered)
    if n == 0:
        return []
    k = min(shards, n)
    sizes = [float(s) for _, s in ordered]
    assignment = _best_assignment(sizes, k)
    groups: list[list[Item]] = [[] for _ in range(k)]
    for index, shard in enumerate(assignment):
        groups[shard].append(ordered[index])
    _fill_empty(groups)
    loads = [math.fsum(s for _, s in g) for g in groups]
    order = sorted(range(k), key=lambda g: (-loads[g], groups[g][0][0] if groups[g] else ""))
    return [groups[g] for g in order if groups[g]]


def _fill_empty(groups: list[list[Item]]) -> None:
    """Give every empty group one item: the shortest of the group holding the most items
    (ties: the lowest index). The donor keeps at least one item and loses load, and the
    receiver's load is that item's, no more than the donor had, so the makespan never
    grows. Only loads of zero put several items where one group stays empty."""
    for empty in [g for g in groups if not g]:
        donor = max((g for g in groups if len(g) > 1), key=len)
        empty.append(donor.pop())  # a group is sorted longest first: the last is shortest


def _best_assignment(sizes: list[float], k: int) -> list[int]:
    """Shard index per item (``sizes`` sorted descending)."""
    n = len(sizes)
    if k == 1:
        return [0] * n
    if k >= n:
        return list(range(n))
    bound = max(sizes[0], math.fsum(sizes) / k)
    lpt = _lpt(sizes, k)
    best = _improve(sizes, k, lpt, bound)
    best_span = _makespan(sizes, k, best)
    lpt_span = _makespan(sizes, k, lpt)
    if best_span > lpt_span:  # only float drift in the running loads could do this
        best, best_span = lpt, lpt_span
    if best_span > bound * (1 + _KK_SKIP_GAP) and n * k <= _KK_MAX_WORK:
        kk = _improve(sizes, k, _karmarkar_karp(sizes, k), bound)
        kk_span = _makespan(sizes, k, kk)
        if kk_span < best_span:
            best, best_span = kk, kk_span
    return best


def _makespan(sizes: list[float], k: int, assignment: list[int]) -> float:
    loads = [0.0] * k
    for size, shard in zip(sizes, assignment, strict=True):
        loads[shard] += size
    return max(loads)


def _lpt(sizes: list[float], k: int) -> list[int]:
    """Longest first onto the least-loaded shard; load ties go to the lower index."""
    heap = [(0.0, i) for i in range(k)]
    out = [0] * len(sizes)
    for index, size in enumerate(sizes):
        load, shard = heapq.heappop(heap)
        out[index] = shard
        heapq.heappush(heap, (load + size, shard))
    return out


def _karmarkar_karp(sizes: list[float], k: int) -> list[int]:
    """Multiway largest differencing: repeatedly merge the two partial partitions with
    the largest spread, pairing the heavy side of one with the light side of the other.
    Strong where there are few items per shard, which is exactly where LPT is weakest."""
    heap: list[tuple[float, int, list[tuple[float, list[int]]]]] = []
    for index, size in enumerate(sizes):
        subsets = [(size, [index])] + [(0.0, []) for _ in range(k - 1)]
        heap.append((-size, index, subsets))
    heapq.heapify(heap)
    counter = len(sizes)
    while len(heap) > 1:
        _, _, a = heapq.heappop(heap)
        _, _, b = heapq.heappop(heap)
        # a and b are sorted heaviest first; pair a's heaviest with b's lightest.
        merged = [(a[i][0] + b[k - 1 - i][0], a[i][1] + b[k - 1 - i][1]) for i in range(k)]
        merged.sort(key=lambda s: (-s[0], s[1][0] if s[1] else len(sizes)))
        heapq.heappush(heap, (-(merged[0][0] - merged[-1][0]), counter, merged))
        counter += 1
    out = [0] * len(sizes)
    for shard, (_, members) in enumerate(heap[0][2]):
        for index in members:
            out[index] = shard
    return out


def _improve(sizes: list[float], k: int, assignment: list[int], bound: float) -> list[int]:
    """Steepest descent on the heaviest shard with single moves and pairwise swaps.

    Each step transfers ``d = a - b`` seconds (``b = 0`` for a move) from the heaviest
    shard H to a lighter shard j with ``0 < d < gap``; the pair's new maximum is
    ``load(H) - min(d, gap - d)``, so the best step is the one closest to ``gap / 2``.
    The heaviest load strictly falls at every step, so the search terminates; the
    sorted load vector falls lexicographically.
    """
    assignment = list(assignment)
    loads = [0.0] * k
    members: list[list[tuple[float, int]]] = [[] for _ in range(k)]
    for index, shard in enumerate(assignment):
        loads[shard] += sizes[index]
        members[shard].append((sizes[index], index))
    for m in members:
        m.sort()
    values = [[size for size, _ in m] for m in members]  # parallel sorted sizes
    work = 0
    while work < _SEARCH_BUDGET:
        heavy = max(range(k), key=lambda s: (loads[s], -s))
        top = loads[heavy]
        if top <= bound * (1 + 1e-12):
            break  # provably optimal
        eps = max(top, 1.0) * _REL_EPS
        h_sizes = values[heavy]
        # Equal sizes in H are interchangeable: try each distinct size once.
        distinct = [i for i in range(len(h_sizes))
                    if i + 1 == len(h_sizes) or h_sizes[i + 1] != h_sizes[i]]
        best_gain = eps
        best: tuple[int, int, int] | None = None  # (shard j, position in H, position in j or -1)
        for j in sorted(range(k), key=lambda s: (loads[s], s)):
            gap = top - loads[j]
            half = gap / 2
            if half <= best_gain:
                break  # the remaining shards are heavier: none can do better
            # Move: the H item closest to gap/2 (and below gap).
            pos = bisect_left(h_sizes, half)
            for p in (pos - 1, pos):
                if 0 <= p < len(h_sizes):
                    d = h_sizes[p]
                    if 0 < d < gap:
                        gain = min(d, gap - d)
                        if gain > best_gain:
                            best_gain, best = gain, (j, p, -1)
            # Swap: for every distinct a in H, the b in j closest to a - gap/2.
            j_sizes = values[j]
            if j_sizes:
                for p in distinct:
                    a = h_sizes[p]
                    q = bisect_left(j_sizes, a - half)
                    for r in (q - 1, q):
                        if 0 <= r < len(j_sizes):
                            d = a - j_sizes[r]
                            if 0 < d < gap:
                                gain = min(d, gap - d)
                                if gain > best_gain:
                                    best_gain, best = gain, (j, p, r)
            work += 2 + 2 * len(distinct)
            if best_gain >= half - eps:
                break
        if best is None:
            break
        j, p, r = best
        a_entry = members[heavy][p]
        b_entry = members[j][r] if r >= 0 else None
        _remove(members, values, heavy, a_entry)
        _insert(members, values, j, a_entry)
        loads[heavy] -= a_entry[0]
        loads[j] += a_entry[0]
        assignment[a_entry[1]] = j
        if b_entry is not None:
            _remove(members, values, j, b_entry)
            _insert(members, values, heavy, b_entry)
            loads[j] -= b_entry[0]
            loads[heavy] += b_entry[0]
            assignment[b_entry[1]] = heavy
        work += 1
    return assignment


def _insert(members: list[list[tuple[float, int]]], values: list[list[float]], shard: int,
            entry: tuple[float, int]) -> None:
    pos = bisect_left(members[shard], entry)
    members[shard].insert(pos, entry)
    values[shard].insert(pos, entry[0])


def _remove(members: list[list[tuple[float, int]]], values: list[list[float]], shard: int,
            entry: tuple[float, int]) -> None:
    pos = bisect_left(members[shard], entry)
    del members[shard][pos]
    del values[shard][pos]


def choose_shards(
    seconds: Sequence[float],
    *,
    shards: int | None,
    target_seconds: float | None,
    max_shards: int | None,
) -> tuple[int, str | None]:
    """How many shards a stage gets, and a warning when the target cannot be met.

    A fixed ``shards`` wins (never more than there are tests). Otherwise the fewest
    shards whose partition's makespan fits ``target_seconds``, capped by
    ``max_shards`` and by the number of tests. When no count up to the cap fits, the
    cap is used and the warning says what the makespan is and what would be needed.
    When one test alone is longer than the target, no shard count can meet it: the
    fewest shards reaching the best achievable makespan (that test's length) are used.
    """
    values = [float(s) for s in seconds]
    _validate([(str(i), s) for i, s in enumerate(values)], 1)
    n_tests = len(values)
    if n_tests == 0:
        return 0, None
    if shards is not None:
        if shards < 1:
            raise ValueError(f"shards must be >= 1, got {shards}")
        return min(shards, n_tests), None
    if max_shards is not None and max_shards < 1:
        raise ValueError(f"max_shards must be >= 1, got {max_shards}")
    cap = min(max_shards or n_tests, n_tests)
    if target_seconds is None:
        return cap, None
    if not math.isfinite(target_seconds) or target_seconds <= 0:
        raise ValueError(f"target_seconds must be finite and > 0, got {target_seconds!r}")
    items = [(f"{i:08d}", s) for i, s in enumerate(values)]
    longest = max(values)
    total = math.fsum(values)
    goal = max(target_seconds, longest)
    # No count below these can fit: the total must fit, and tests longer than half the
    # goal cannot share a shard. Starting here keeps the scan short.
    halves = sum(1 for v in values if v > goal / 2)
    start = max(1, min(cap, max(math.ceil(total / goal - 1e-9), halves)))
    for n in range(start, cap + 1):
        span = partition_stats(partition(items, n), n).makespan
        if span <= goal * (1 + 1e-12):
            if longest > target_seconds:
                return n, (
                    f"the target of {_minutes(target_seconds)} cannot be met: one test alone "
                    f"takes {_minutes(longest)}; using {n} shard(s) for a makespan of {_minutes(span)}"
                )
            return n, None
    span = partition_stats(partition(items, cap), cap).makespan
    needed = max(math.ceil(total / goal - 1e-9), cap + 1)
    return cap, (
        f"max_shards={cap} cannot meet the target of {_minutes(target_seconds)}: "
        f"makespan {_minutes(span)} with {cap} shard(s); about {needed} shards would be needed"
        if max_shards is not None and cap == max_shards
        else f"{cap} shard(s) cannot meet the target of {_minutes(target_seconds)} "
        f"(makespan {_minutes(span)})"
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
