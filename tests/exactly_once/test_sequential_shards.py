"""Issue #26, the done criterion: shards 1..N run one after another, in every order, on a
runner that keeps ``.testfleet/`` (each shard writes history the next could re-plan from),
under ``testfleet run`` and under the pytest plugin: every file runs exactly once."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import ran, run_pytest, run_testfleet

ORDERS = list(itertools.permutations((1, 2, 3)))


def _expected(n: int) -> dict[str, int]:
    return {f"tests/test_f{i}.py": 1 for i in range(n)}


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-".join(map(str, o)))
def test_testfleet_run_shards_in_any_order_run_each_file_once(
        log_project: Callable[..., Path], order: tuple[int, ...]) -> None:
    root = log_project(files=7, shards=3)
    for i in order:
        res = run_testfleet(root, "run", "--stage", "s", "--shard", f"{i}/3", "--display", "plain")
        assert res.returncode == 0, res.stdout + res.stderr
    assert dict(ran(root)) == _expected(7)
    assert (root / ".testfleet" / "history.db").is_file()  # history was written between shards


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-".join(map(str, o)))
def test_plugin_shards_in_any_order_run_each_file_once(
        log_project: Callable[..., Path], order: tuple[int, ...]) -> None:
    root = log_project(files=7, shards=3)
    for i in order:
        res = run_pytest(root, "--testfleet-stage", "s", "--testfleet-shard", f"{i}/3")
        assert res.returncode == 0, res.stdout + res.stderr
    assert dict(ran(root)) == _expected(7)
    assert (root / ".testfleet" / "history.db").is_file()


@pytest.mark.parametrize("order", [(1, 2, 3, 4), (4, 3, 2, 1)], ids=["up", "down"])
def test_fewer_files_than_shards_each_file_once_and_empty_shard_is_green(
        log_project: Callable[..., Path], order: tuple[int, ...]) -> None:
    root = log_project(files=3, shards=4)
    for i in order:
        res = run_testfleet(root, "run", "--stage", "s", "--shard", f"{i}/4", "--display", "plain")
        assert res.returncode == 0, res.stdout + res.stderr
        if i == 4:
            assert "empty" in res.stderr
    assert dict(ran(root)) == _expected(3)
    (root / "ran.log").unlink()
    for i in order:
        res = run_pytest(root, "--testfleet-stage", "s", "--testfleet-shard", f"{i}/4")
        assert res.returncode == 0, res.stdout + res.stderr
    assert dict(ran(root)) == _expected(3)


def test_run_and_plugin_shards_of_one_run_share_its_plan(
        log_project: Callable[..., Path]) -> None:
    """The two stage paths plan through one function with the same inputs: a run may mix them."""
    root = log_project(files=7, shards=3)
    res = run_testfleet(root, "run", "--stage", "s", "--shard", "2/3", "--display", "plain")
    assert res.returncode == 0, res.stderr
    for i in (3, 1):
        res = run_pytest(root, "--testfleet-stage", "s", "--testfleet-shard", f"{i}/3")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "executing this run's frozen plan" in res.stdout
    assert dict(ran(root)) == _expected(7)
