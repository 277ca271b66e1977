"""The forked half of a cold run is used, not silently recomputed by the parent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testfleet.registry import syntax
from testfleet.registry.model import Registry
from testfleet.registry.parallel import two_way_map

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2,
                                reason="the split needs fork and two CPUs")


@needs_fork
def test_two_way_map_uses_the_childs_answers() -> None:
    parent = os.getpid()
    seen: list[int] = []

    def square(x: int) -> int:
        if os.getpid() == parent:
            seen.append(x)
        return x * x

    assert two_way_map(square, list(range(10)), min_items=2) == [x * x for x in range(10)]
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

    assert two_way_map(nothing, list(range(10)), min_items=2) == [None] * 10
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
    assert len(in_parent) == len(files) // 2
