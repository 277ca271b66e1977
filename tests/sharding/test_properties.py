"""Property tests: a permutation, independent of input order, never worse than LPT."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from testfleet.planning.sharding import choose_shards, partition, partition_stats

durations = st.one_of(
    st.integers(min_value=0, max_value=2000).map(float),
    st.floats(min_value=0, max_value=5000, allow_nan=False, allow_infinity=False),
)
instances = st.lists(durations, min_size=0, max_size=60).map(
    lambda ds: [(f"tests/t{i:03d}.py", d) for i, d in enumerate(ds)]
)
shard_counts = st.integers(min_value=1, max_value=12)


def lpt_makespan(items: list[tuple[str, float]], shards: int) -> float:
    ordered = sorted(items, key=lambda it: (-it[1], it[0]))
    loads = [0.0] * max(1, min(shards, len(ordered)))
    for _, s in ordered:
        i = loads.index(min(loads))
        loads[i] += s
    return max(loads)


@settings(max_examples=300, deadline=None)
@given(instances, shard_counts)
def test_partition_is_a_permutation(items: list[tuple[str, float]], shards: int) -> None:
    groups = partition(items, shards)
    assert sorted(x for g in groups for x in g) == sorted(items)
    assert len(groups) == min(shards, len(items))  # #26: shards = N is N shards
    assert all(groups)


zeros_and_tiny = st.lists(st.sampled_from([0.0, 0.0, 0.0, 0.001, 0.002]), min_size=0,
                          max_size=40).map(lambda ds: [(f"t{i:02d}", d) for i, d in enumerate(ds)])


@settings(max_examples=200, deadline=None)
@given(zeros_and_tiny, shard_counts)
def test_zero_durations_still_fill_every_shard(items: list[tuple[str, float]], shards: int) -> None:
    groups = partition(items, shards)
    assert len(groups) == min(shards, len(items)) and all(groups)
    assert partition_stats(groups).makespan <= lpt_makespan(items, shards) + 1e-12


@settings(max_examples=300, deadline=None)
@given(instances, shard_counts, st.randoms(use_true_random=False))
def test_partition_ignores_input_order(items: list[tuple[str, float]], shards: int,
                                       rnd: random.Random) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert partition(shuffled, shards) == partition(items, shards)


@settings(max_examples=300, deadline=None)
@given(instances, shard_counts)
def test_never_worse_than_lpt(items: list[tuple[str, float]], shards: int) -> None:
    stats = partition_stats(partition(items, shards), shards)
    assert stats.makespan <= lpt_makespan(items, shards) + 1e-9 * max(1.0, stats.makespan)
    assert stats.makespan >= stats.lower_bound * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1, max_value=3000), min_size=1, max_size=40),
       st.floats(min_value=60, max_value=7200), st.integers(min_value=1, max_value=10))
def test_chosen_count_meets_the_target_or_warns(seconds: list[float], target: float,
                                                cap: int) -> None:
    n, warning = choose_shards(seconds, shards=None, target_seconds=target, max_shards=cap)
    assert 1 <= n <= min(cap, len(seconds))
    items = [(str(i), s) for i, s in enumerate(seconds)]
    span = partition_stats(partition(items, n), n).makespan
    if warning is None:
        assert span <= target * (1 + 1e-9)
        if n > 1:  # fewest: one shard fewer does not fit
            smaller = partition_stats(partition(items, n - 1), n - 1).makespan
            assert smaller > target
