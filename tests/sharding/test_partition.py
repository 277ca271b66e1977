"""Partition and shard-count behaviour: exact small cases, invariants, bad input."""

from __future__ import annotations

import math
import random

import pytest

from testfleet.planning.sharding import (
    _lpt,
    choose_shards,
    lower_bound,
    partition,
    partition_stats,
    strong_lower_bound,
)


def lpt_makespan(items: list[tuple[str, float]], shards: int) -> float:
    """Reference LPT, written independently of the module's helpers."""
    ordered = sorted(items, key=lambda it: (-it[1], it[0]))
    loads = [0.0] * min(shards, len(ordered))
    for _, s in ordered:
        i = loads.index(min(loads))
        loads[i] += s
    return max(loads)


def worst_case_family(m: int) -> list[tuple[str, float]]:
    """2m+1 jobs 2m-1, 2m-1, 2m-2, 2m-2, ..., m+1, m+1, m, m, m: LPT gives 4m-1 on m
    shards, the optimum is 3m."""
    sizes: list[int] = []
    for v in range(2 * m - 1, m, -1):
        sizes += [v, v]
    sizes += [m, m, m]
    return [(f"job{i:03d}", float(v)) for i, v in enumerate(sizes)]


def test_lpt_reference_matches_module_lpt() -> None:
    items = worst_case_family(4)
    sizes = [s for _, s in sorted(items, key=lambda it: (-it[1], it[0]))]
    loads = [0.0] * 4
    for size, shard in zip(sizes, _lpt(sizes, 4), strict=True):
        loads[shard] += size
    assert max(loads) == lpt_makespan(items, 4) == 15.0


@pytest.mark.parametrize("m", [2, 3, 4, 5, 8, 13, 20])
def test_strictly_better_than_lpt_on_its_worst_case(m: int) -> None:
    items = worst_case_family(m)
    stats = partition_stats(partition(items, m), m)
    assert lpt_makespan(items, m) == 4 * m - 1
    assert stats.makespan == 3 * m  # optimal


def test_textbook_instance_reaches_optimum() -> None:
    # {3,3,2,2,2} on 2 shards: LPT ends at 7 (3+2+2 | 3+2), the optimum is 3+3 | 2+2+2.
    items = [("a", 3.0), ("b", 3.0), ("c", 2.0), ("d", 2.0), ("e", 2.0)]
    assert lpt_makespan(items, 2) == 7.0
    groups = partition(items, 2)
    assert partition_stats(groups, 2).makespan == 6.0
    assert groups == [[("a", 3.0), ("b", 3.0)], [("c", 2.0), ("d", 2.0), ("e", 2.0)]]


def test_result_is_a_permutation_and_non_empty() -> None:
    items = [(f"t{i}", float((i * 37) % 101 + 1)) for i in range(50)]
    groups = partition(items, 7)
    assert len(groups) == 7
    assert all(groups)
    assert sorted(x for g in groups for x in g) == sorted(items)


def test_fewer_items_than_shards_gives_one_item_per_shard() -> None:
    groups = partition([("a", 3.0), ("b", 1.0)], 8)
    assert groups == [[("a", 3.0)], [("b", 1.0)]]


def test_empty_and_single_shard() -> None:
    assert partition([], 4) == []
    items = [("b", 1.0), ("a", 2.0), ("c", 2.0)]
    assert partition(items, 1) == [[("a", 2.0), ("c", 2.0), ("b", 1.0)]]


def test_output_is_canonical_heaviest_shard_first() -> None:
    groups = partition([(f"t{i}", float(i + 1)) for i in range(10)], 3)
    loads = [sum(s for _, s in g) for g in groups]
    assert loads == sorted(loads, reverse=True)
    for g in groups:
        assert g == sorted(g, key=lambda it: (-it[1], it[0]))


def test_zero_durations_are_allowed() -> None:
    groups = partition([("a", 0.0), ("b", 0.0), ("c", 5.0)], 2)
    assert sorted(x for g in groups for x in g) == [("a", 0.0), ("b", 0.0), ("c", 5.0)]


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "5", None, True])
def test_bad_durations_are_rejected_with_the_name(bad: object) -> None:
    with pytest.raises(ValueError, match=r"'tests/x\.py'"):
        partition([("tests/x.py", bad), ("ok", 1.0)], 2)  # type: ignore[list-item]


@pytest.mark.parametrize("shards", [0, -3, 1.5, True])
def test_bad_shard_count_is_rejected(shards: object) -> None:
    with pytest.raises(ValueError, match="shards"):
        partition([("a", 1.0)], shards)  # type: ignore[arg-type]


def test_bimodal_instances_are_near_the_bound_and_never_above_lpt() -> None:
    for seed in range(6):
        rng = random.Random(seed)
        items = [
            (f"f{i}", float(rng.randint(5, 30)) if rng.random() < 0.7 else float(rng.randint(50, 2000)))
            for i in range(300)
        ]
        for k in (2, 4, 8, 16):
            stats = partition_stats(partition(items, k), k)
            assert stats.makespan <= lpt_makespan(items, k)
            assert stats.ratio <= 1.01


def test_stats_and_bounds() -> None:
    groups = [[("a", 6.0)], [("b", 3.0), ("c", 2.0)]]
    stats = partition_stats(groups, 2)
    assert stats.makespan == 6.0
    assert stats.lower_bound == 6.0  # max(longest 6, total 11 / 2)
    assert stats.ratio == 1.0
    assert stats.loads == (6.0, 5.0)
    assert lower_bound([4.0, 4.0, 4.0], 2) == 6.0
    assert strong_lower_bound([4.0, 4.0, 4.0], 2) == 8.0  # two of the three share a shard
    assert lower_bound([], 3) == 0.0
    assert partition_stats([], 3).ratio == 1.0


class TestChooseShards:
    def test_fixed_count_wins_but_never_exceeds_tests(self) -> None:
        assert choose_shards([1.0] * 10, shards=4, target_seconds=None, max_shards=None) == (4, None)
        assert choose_shards([1.0] * 3, shards=4, target_seconds=None, max_shards=None) == (3, None)

    def test_no_tests_means_no_shards(self) -> None:
        assert choose_shards([], shards=None, target_seconds=600, max_shards=4) == (0, None)

    def test_fewest_shards_meeting_the_target(self) -> None:
        seconds = [600.0] * 10  # 100 minutes of work
        assert choose_shards(seconds, shards=None, target_seconds=30 * 60, max_shards=8) == (4, None)
        assert choose_shards(seconds, shards=None, target_seconds=60 * 60, max_shards=8) == (2, None)

    def test_the_count_fits_the_target_where_a_naive_count_would_not(self) -> None:
        # total/target says 2 shards, but 3 x 40 min cannot fit into 2 x 60 min.
        seconds = [2400.0, 2400.0, 2400.0]
        n, warning = choose_shards(seconds, shards=None, target_seconds=3600, max_shards=None)
        assert (n, warning) == (3, None)

    def test_tests_longer_than_half_the_target_each_need_a_shard(self) -> None:
        seconds = [2160.0] * 50 + [10.0] * 100  # 36 min each: no two fit in 60 min
        assert choose_shards(seconds, shards=None, target_seconds=3600, max_shards=None) == (50, None)

    def test_warning_when_max_shards_cannot_meet_the_target(self) -> None:
        n, warning = choose_shards([600.0] * 10, shards=None, target_seconds=600, max_shards=4)
        assert n == 4
        assert warning is not None
        assert "max_shards=4" in warning and "10.0 min" in warning and "30.0 min" in warning

    def test_one_test_longer_than_the_target(self) -> None:
        n, warning = choose_shards([7200.0, 600.0, 600.0], shards=None, target_seconds=3600,
                                   max_shards=3)
        # 2 h is unavoidable; one more shard holds the rest, a third would not help.
        assert n == 2
        assert warning is not None and "one test alone takes 120.0 min" in warning

    def test_target_without_cap_uses_at_most_one_shard_per_test(self) -> None:
        n, warning = choose_shards([5.0, 5.0], shards=None, target_seconds=1, max_shards=None)
        assert n == 2
        assert warning is not None

    def test_no_target_uses_the_cap(self) -> None:
        assert choose_shards([1.0] * 5, shards=None, target_seconds=None, max_shards=3) == (3, None)

    @pytest.mark.parametrize("kwargs", [
        {"shards": 0, "target_seconds": None, "max_shards": None},
        {"shards": None, "target_seconds": -5.0, "max_shards": None},
        {"shards": None, "target_seconds": math.nan, "max_shards": 2},
        {"shards": None, "target_seconds": 60.0, "max_shards": 0},
    ])
    def test_bad_arguments(self, kwargs: dict[str, object]) -> None:
        with pytest.raises(ValueError):
            choose_shards([1.0, 2.0], **kwargs)  # type: ignore[arg-type]

    def test_bad_durations(self) -> None:
        with pytest.raises(ValueError, match="finite"):
            choose_shards([1.0, -2.0], shards=None, target_seconds=60, max_shards=2)
