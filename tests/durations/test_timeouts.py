"""Timeouts as a lower bound: a file that keeps timing out must not keep its literal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from testfleet.app.estimates import estimate_rows, estimates_for
from testfleet.config import DurationsConfig, Project, load_project
from testfleet.planning.estimates import (
    MAX_TIMEOUTS_NAMED,
    compute,
    timeout_warning,
)
from testfleet.registry.model import Registration
from testfleet.store import open_store
from testfleet.store.durations import Execution

Cli = Callable[..., tuple[int, str, str]]
SLOW = Registration("tests/unit/test_slow.py", "cpu", "stage-a-cpu", 60.0, line=1)
FAST = Registration("tests/unit/test_fast.py", "cpu", "stage-a-cpu", 10.0, line=1)
GPU = Registration("tests/unit/test_slow.py", "cuda", "stage-c-h200", 60.0, line=2)


def _record(project: Project, rows: list[tuple[str, str, float, str, float]]) -> None:
    backends = {"stage-a-cpu": "cpu", "stage-c-h200": "cuda", "stage-c-mi300x": "rocm"}
    with open_store(project) as store:
        store.record_executions([Execution(file, stage, backends[stage], duration, outcome=outcome,
                                           timestamp=ts)
                                 for file, stage, duration, outcome, ts in rows])


def test_compute_raises_the_estimate_to_the_longest_recent_timeout() -> None:
    settings = DurationsConfig(window=3, min_samples=2)
    rows = {(r.file, r.stage): r for r in compute(
        [SLOW, FAST, GPU],
        {"stage-a-cpu": {FAST.file: [12.0, 14.0]}},
        settings,
        timeouts={"stage-a-cpu": {SLOW.file: 300.0, FAST.file: 5.0}},
    )}
    slow = rows[(SLOW.file, "stage-a-cpu")]
    # no passing samples at all: the timeout, not the 60 s literal, and it counts as history
    assert (slow.estimate, slow.source, slow.history, slow.timeout) == (300.0, "history", None, 300.0)
    # a timeout below the statistic does not lower anything
    fast = rows[(FAST.file, "stage-a-cpu")]
    assert (fast.estimate, fast.source, fast.drift) == (13.0, "history", pytest.approx(1.3))
    # the timeout is per stage: the H200 registration keeps its literal
    gpu = rows[(SLOW.file, "stage-c-h200")]
    assert (gpu.estimate, gpu.source, gpu.timeout) == (60.0, "est_time", None)


def test_compute_timeout_below_the_literal_keeps_the_literal() -> None:
    rows = compute([SLOW], {}, DurationsConfig(), timeouts={"stage-a-cpu": {SLOW.file: 30.0}})
    assert (rows[0].estimate, rows[0].source) == (60.0, "est_time")


def test_compute_timeout_above_the_statistic_wins() -> None:
    rows = compute([SLOW], {"stage-a-cpu": {SLOW.file: [100.0, 120.0]}}, DurationsConfig(),
                   timeouts={"stage-a-cpu": {SLOW.file: 300.0}})
    assert (rows[0].estimate, rows[0].source, rows[0].history) == (300.0, "history", 110.0)


def test_compute_ignores_timeouts_of_stages_not_asked_for() -> None:
    rows = compute([SLOW], {}, DurationsConfig(), stages=["stage-c-h200"],
                   timeouts={"stage-a-cpu": {SLOW.file: 300.0}})
    assert (rows[0].estimate, rows[0].source) == (60.0, "est_time")


def test_timeout_warning_is_one_bounded_line() -> None:
    regs = [Registration(f"tests/t{i:02d}.py", "cpu", "stage-a-cpu", 1.0, line=1) for i in range(15)]
    timeouts = {"stage-a-cpu": {r.file: 100.0 + i for i, r in enumerate(regs)}}
    rows = compute(regs, {}, DurationsConfig(), timeouts=timeouts)
    warnings = timeout_warning(rows, 10)
    assert len(warnings) == 1
    text = warnings[0]
    assert text.startswith("15 file(s) timed out in their last 10 run(s); each estimate is at "
                           "least the timed-out duration: tests/t14.py [stage-a-cpu] (114s), ")
    assert text.endswith(f" and {15 - MAX_TIMEOUTS_NAMED} more")
    assert text.count("[stage-a-cpu]") == MAX_TIMEOUTS_NAMED and "tests/t04.py" not in text
    assert timeout_warning(compute(regs, {}, DurationsConfig()), 10) == []


def test_estimates_for_reads_timeouts_from_the_last_window_runs(project: Project) -> None:
    # window = 3 in this project: SLOW always times out; FAST timed out once, long ago
    _record(project, [(SLOW.file, "stage-a-cpu", 300.0 + i, "TIMEOUT", 100.0 + i) for i in range(3)]
            + [(FAST.file, "stage-a-cpu", 900.0, "TIMEOUT", 1.0)]
            + [(FAST.file, "stage-a-cpu", 11.0, "PASSED", 10.0 + i) for i in range(3)])
    estimates, warnings = estimates_for(project, [SLOW, FAST, GPU])
    assert estimates[(SLOW.file, "stage-a-cpu")] == (302.0, "history")
    assert estimates[(FAST.file, "stage-a-cpu")] == (11.0, "history")
    assert estimates[(SLOW.file, "stage-c-h200")] == (60.0, "est_time")
    assert warnings == ["1 file(s) timed out in their last 3 run(s); each estimate is at least "
                        "the timed-out duration: tests/unit/test_slow.py [stage-a-cpu] (302s)"]
    rows, show_warnings = estimate_rows(project, [SLOW, FAST])
    assert show_warnings == warnings
    assert {r.file: r.timeout for r in rows} == {SLOW.file: 302.0, FAST.file: None}


def test_no_timeouts_no_warning(project: Project) -> None:
    _record(project, [(SLOW.file, "stage-a-cpu", 70.0, "PASSED", 1.0),
                      (SLOW.file, "stage-a-cpu", 999.0, "FAILED", 2.0)])
    estimates, warnings = estimates_for(project, [SLOW])
    assert warnings == [] and estimates[(SLOW.file, "stage-a-cpu")] == (60.0, "est_time")


def test_plan_moves_a_timing_out_file_and_names_it(cli: Cli, example_project: Path) -> None:
    root = str(example_project)
    target = "tests/e2e/megatron/test_qwen3_8B_dense.py"  # est_time=1100 in stage-c-4-gpu-h200
    project = load_project(example_project)
    with open_store(project) as store:
        store.record_executions([Execution(target, "stage-c-4-gpu-h200", "cuda", 3600.0,
                                           outcome="TIMEOUT", timestamp=float(i)) for i in range(2)])
    code, out, err = cli("-C", root, "plan", "--labels", "run-ci-all", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    tests = {t["file"]: t for j in plan["jobs"] if j["stage"] == "stage-c-4-gpu-h200"
             for t in j["tests"]}
    assert tests[target]["estimate"] == 3600 and tests[target]["source"] == "history"
    named = [w for w in plan["warnings"] if "timed out" in w]
    assert len(named) == 1 and f"{target} [stage-c-4-gpu-h200] (3,600s)" in named[0]
    assert f"testfleet: warning: {named[0]}" in err


def test_durations_show_counts_a_timeout_only_estimate(cli: Cli, example_project: Path) -> None:
    root = str(example_project)
    target = "tests/e2e/megatron/test_qwen3_8B_dense.py"  # est_time=1100, never passed
    project = load_project(example_project)
    with open_store(project) as store:
        store.record_executions([Execution(target, "stage-c-4-gpu-h200", "cuda", 3600.0,
                                           outcome="TIMEOUT", timestamp=1.0)])
    code, out, err = cli("-C", root, "durations", "show", "--stage", "stage-c-4-gpu-h200")
    assert code == 0, err
    assert "1/12 registration(s) estimated from history" in out
    assert "1 raised to a recent timed-out duration" in out
    code, out, err = cli("-C", root, "durations", "show", "--stage", "stage-c-4-gpu-h200",
                         "--format", "json")
    row = next(r for r in json.loads(out)["rows"] if r["file"] == target)
    assert row["timeout"] == 3600.0 and row["estimate"] == 3600.0 and row["history"] is None
