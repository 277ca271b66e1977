"""The forked slices of a cold run are used, not silently recomputed by the parent; how many
processes there are, and that progress counts every process's items."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testfleet.registry import syntax
from testfleet.registry.model import Registry
from testfleet.registry.parallel import parallel_map, worker_count

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="the split needs fork")


@pytest.fixture(autouse=True)
def two_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes whatever this machine has (TESTFLEET_JOBS caps and, here, sets it)."""
    monkeypatch.setenv("TESTFLEET_JOBS", "2")


@needs_fork
def test_two_way_map_uses_the_childs_answers() -> None:
    parent = os.getpid()
    seen: list[int] = []

    def square(x: int) -> int:
        if os.getpid() == parent:
            seen.append(x)
        return x * x

    assert parallel_map(square, list(range(10)), min_items=2) == [x * x for x in range(10)]
    assert seen == [0, 1, 2, 3, 4]  # the second half came from the child


@needs_fork
def test_a_none_result_from_the_child_is_an_answer() -> None:
    """Without ``decode``, None is what the child computed, not "no answer": the parent
    must not compute those items again (the syntax check's valid files were compiled
    twice that way)."""
    parent = os.getpid()
    seen: list[int] = []

    def nothing(x: int) -> None:
        if os.getpid() == parent:
            seen.append(x)

    assert parallel_map(nothing, list(range(10)), min_items=2) == [None] * 10
    assert seen == [0, 1, 2, 3, 4]


@needs_fork
def test_syntax_check_compiles_each_valid_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid file's answer from the child must not read as "no answer" (it did, and the
    parent compiled every valid file of a cold ``check`` again)."""
    files = []
    for i in range(2 * syntax.PARALLEL_MIN):
        (tmp_path / f"test_{i:04d}.py").write_text(f"def test_{i}():\n    assert {i} >= 0\n")
        files.append(f"test_{i:04d}.py")
    (tmp_path / "test_9999.py").write_text("def broken(:\n")
    files.append("test_9999.py")
    parent = os.getpid()
    in_parent: list[str] = []
    real = syntax.syntax_error

    def counting(data: bytes, rel: str) -> tuple[int, int, str] | None:
        if os.getpid() == parent:
            in_parent.append(rel)
        return real(data, rel)

    monkeypatch.setattr(syntax, "syntax_error", counting)
    found = syntax.syntax_findings(tmp_path, ".testfleet", Registry(files=files), use_cache=False)
    assert [(f.file, f.code) for f in found] == [("test_9999.py", "syntax")]
    assert len(in_parent) == -(-len(files) // 2)  # the first of two slices


@needs_fork
def test_three_jobs_split_in_three_and_keep_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTFLEET_JOBS", "3")
    parent = os.getpid()
    pids: dict[int, int] = {}

    def where(x: int) -> int:
        pids[x] = os.getpid()
        return os.getpid()

    answers = parallel_map(where, list(range(9)), min_items=2)
    assert [a == parent for a in answers] == [True] * 3 + [False] * 6
    assert len({answers[3], answers[6]}) == 2  # two different children
    assert answers[3:6] == [answers[3]] * 3 and answers[6:] == [answers[6]] * 3


def test_one_job_forks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """TESTFLEET_JOBS=1 is the single-process run the benchmarks compare with."""
    monkeypatch.setenv("TESTFLEET_JOBS", "1")
    parent = os.getpid()
    assert parallel_map(lambda x: os.getpid(), list(range(50)), min_items=2) == [parent] * 50


@pytest.mark.parametrize(("items", "jobs", "expected"), [
    (10, "", 1),  # below min_items: never worth a fork
    (799, "8", 1),
    (800, "8", 2),  # one process per min_items // 2 items at most
    (10_000, "8", 8),
    (10_000, "1", 1),
    (10_000, "x", None),  # not a number: the CPUs decide
    (10_000, "0", None),
])
def test_worker_count(monkeypatch: pytest.MonkeyPatch, items: int, jobs: str,
                      expected: int | None) -> None:
    from testfleet.registry.parallel import available_cpus

    monkeypatch.setenv("TESTFLEET_JOBS", jobs)
    want = expected if expected is not None else min(available_cpus(), items // 400)
    assert worker_count(items, 800) == want


@needs_fork
def test_progress_counts_the_childrens_items(monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure drawn while the parent waits includes what the children did (read from
    the shared page), so it reaches the total, not the parent's share."""
    import io

    from testfleet import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "RATE", 1e9)
    task = progress.Task("scanning", 30, stream=stream)
    seen: list[int] = []
    real_draw = task.draw

    def draw(*, force: bool = False) -> None:
        seen.append(task.current())
        real_draw(force=force)

    monkeypatch.setattr(task, "draw", draw)
    assert parallel_map(lambda x: x, list(range(30)), min_items=2, progress=task) == list(range(30))
    assert max(seen) == 30 and task.done == 15
    task.close()
    assert "scanning" in stream.getvalue()
