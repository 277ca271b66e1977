"""``results --tests`` prints each testcase's outcomes in the order its title states."""

from __future__ import annotations

import pytest

from testfleet.cli import results as results_cli
from testfleet.results.model import RunResult
from testfleet.results.summary import by_file


def test_testcase_strips_read_oldest_to_newest_as_the_title_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    # as case_results returns them: newest first within each test
    cases = [RunResult(file="tests/test_a.py", stage="s", outcome=outcome, ts=ts, commit=None,
                       ci_run_id=None, attempt=1, duration=1.0, test="test_x")
             for outcome, ts in (("FAILED", 300.0), ("PASSED", 200.0), ("PASSED", 100.0))]
    files = by_file([RunResult(file="tests/test_a.py", stage="s", outcome=c.outcome, ts=c.ts,
                               commit=None, ci_run_id=None, attempt=1, duration=1.0)
                     for c in cases])
    results_cli._table(files, cases, lambda run: None, 3, [], {}, [], None)
    out = capsys.readouterr().out
    assert "oldest -> newest" in out and "newest first" not in out
    row = next(line for line in out.splitlines() if "test_x" in line)
    assert "PPF" in row  # passed twice, then failed in the newest run
