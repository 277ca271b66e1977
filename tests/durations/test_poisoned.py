"""Poisoned estimates (issue #17): a JUnit file dated 9999-12-31 used to pin estimates
forever (the window was ordered by the stored timestamp) and made ``db prune`` delete the
real rows instead of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from testfleet.config import Project
from testfleet.errors import UsageError
from testfleet.store.durations import Execution
from testfleet.store.junit_import import read_cases

FUTURE = """<?xml version="1.0"?>
<testsuite name="pytest" timestamp="9999-12-31T00:00:00">
  <testcase classname="tests.test_x" name="t" time="9999"/>
</testsuite>
"""


def test_a_junit_file_dated_in_the_future_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(FUTURE)
    with pytest.raises(UsageError, match="in the future"):
        read_cases(path)
    # a few minutes of clock skew are not poison
    path.write_text(FUTURE.replace("9999-12-31T00:00:00", "2026-01-01T00:03:00"))
    assert read_cases(path, now=1767225600.0)  # 2026-01-01T00:00:00Z


def _rows(durations: list[float], ts: float) -> list[Execution]:
    return [Execution("tests/test_x.py", "stage-a-cpu", "cpu", d, timestamp=ts) for d in durations]


@pytest.fixture
def store(project: Project, tmp_path: Path):  # type: ignore[no-untyped-def]
    from testfleet.store.core import open_store

    with open_store(project, f"sqlite:///{tmp_path / 'h.db'}") as opened:
        yield opened


def test_the_window_is_the_most_recently_recorded_not_the_latest_dated(store) -> None:  # type: ignore[no-untyped-def]
    store.record_executions(_rows([9999.0], 253402214400.0))  # dated 9999-12-31, recorded first
    store.record_executions(_rows([10.0, 11.0, 12.0], 1_700_000_000.0))  # real runs, after it
    assert store.durations("stage-a-cpu", None, window=3) == {"tests/test_x.py": [12.0, 11.0, 10.0]}


def test_prune_keeps_the_real_rows(store) -> None:  # type: ignore[no-untyped-def]
    store.record_executions(_rows([9999.0], 253402214400.0))
    store.record_executions(_rows([10.0, 11.0], 1_700_000_000.0))
    assert store.prune_executions(keep=2) == 1
    assert store.durations("stage-a-cpu", None, window=10) == {"tests/test_x.py": [11.0, 10.0]}
