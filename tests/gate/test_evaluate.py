"""Evaluation rules: ERROR / INACTIVE / PASS / FAIL per coordinate, hard limits, trust."""

from __future__ import annotations

import math

import pytest
from gate_helpers import spec
from hypothesis import given
from hypothesis import strategies as st

from testfleet.gate.evaluate import (
    Coordinate,
    coordinates,
    evaluate,
    judge,
    run_trusted,
    select,
    select_spec,
)
from testfleet.gate.policy import enforce_switch, env_key, fails_test
from testfleet.gate.records import MetricSeries, RecordSet


def records(**series: list[tuple[int, float]]) -> RecordSet:
    return RecordSet(series={k: MetricSeries(k, sorted(v, key=lambda p: p[0]))
                             for k, v in series.items()})


def one(s, points, history, window=20):
    sel = select_spec(s, MetricSeries(s.metric_key, points))
    return [judge(x, history, window) for x in sel]


def test_last_takes_the_highest_step_as_coordinate_minus_one() -> None:
    s = spec()
    [v] = one(s, [(0, 5.0), (9, 1.0), (3, 2.0)], [1.0])
    assert (v.step, v.actual_step, v.value, v.status) == (-1, 9, 1.0, "PASS")


@pytest.mark.parametrize(("points", "steps", "needle"), [
    ([], "last", "empty series"),
    ([(0, 1.0), (0, 1.1)], "last", "recorded 2 times"),
    ([(0, math.nan)], "last", "NaN"),
    ([(0, math.inf)], [0], "Infinity"),
    ([(0, 1.0), (1, 1.0)], [0, 5], "step 5 missing"),
    ([(0, 1.0), (1, 2.0), (1, 2.0)], "all", "recorded 2 times"),
])
def test_errors(points, steps, needle) -> None:
    verdicts = one(spec(steps=steps), points, [1.0, 1.0])
    errors = [v for v in verdicts if v.status == "ERROR"]
    assert errors and needle in errors[0].message


def test_missing_metric_and_broken_lines_are_errors() -> None:
    sels = select([spec(), spec(metric_key="other", steps=[1, 2]), spec(metric_key="b", steps="all")],
                  records())
    verdicts = [judge(x, [], 20) for x in sels]
    assert [v.status for v in verdicts] == ["ERROR"] * 4
    assert "was not recorded" in verdicts[0].message
    broken = RecordSet(series={"train/loss": MetricSeries("train/loss", [(0, 1.0)],
                                                          ["x.jsonl:3: bad value"])})
    [sel] = select([spec()], broken)
    assert judge(sel, [1.0], 20).status == "ERROR"


def test_cold_start_is_inactive_then_active() -> None:
    s = spec(min_history=3)
    assert one(s, [(0, 1.0)], [])[0].status == "INACTIVE"
    v = one(s, [(0, 1.0)], [1.0, 1.0])[0]
    assert v.status == "INACTIVE" and "2 trusted values, 3 needed" in v.message
    assert one(s, [(0, 1.0)], [1.0, 1.0, 1.0])[0].status == "PASS"


def test_pass_and_fail_report_reference_corridor_deviation_and_n() -> None:
    s = spec(constraint={"rel_up": 0.1, "rel_down": 0.05})
    v = one(s, [(0, 10.8)], [10.0, 9.0, 11.0])[0]
    assert v.status == "PASS"
    assert v.reference == 10.0 and (v.lower, v.upper) == (9.5, 11.0) and v.n == 3
    assert v.abs_dev == pytest.approx(0.8) and v.rel_dev == pytest.approx(0.08)
    low = one(s, [(0, 9.4)], [10.0])[0]
    assert low.status == "FAIL" and "below the corridor" in low.message


def test_reference_is_mean_of_last_window_values_newest_first() -> None:
    s = spec(constraint={"abs_floor_up": 0.01, "abs_floor_down": 0.01})
    history = [1.0, 1.0, 100.0]  # newest first: the window of 2 ignores the old outlier
    assert one(s, [(0, 1.0)], history, window=2)[0].reference == 1.0
    assert one(s, [(0, 1.0)], history, window=3)[0].status == "FAIL"


def test_hard_limits_fail_with_or_without_history() -> None:
    s = spec(hard_max=2.0, hard_min=0.0)
    cold = one(s, [(0, 3.0)], [])[0]
    assert cold.status == "FAIL" and "above hard_max" in cold.message
    assert one(s, [(0, -1.0)], [-1.0])[0].status == "FAIL"
    assert one(s, [(0, 1.0)], None)[0].status == "INACTIVE"  # history unavailable
    assert one(s, [(0, 3.0)], None)[0].status == "FAIL"


def test_fanned_out_failure_names_the_first_step_out_of_band() -> None:
    s = spec(steps="all", constraint={"abs_floor_up": 0.1, "abs_floor_down": 0.1})
    points = [(i, 1.0 + (0.5 if i in (7, 3) else 0.0)) for i in range(10)]
    sels = select([s], records(**{"train/loss": points}))
    base = {c: [1.0] for c in coordinates(sels)}
    [result] = evaluate(sels, base, 20)
    assert result.status == "FAIL" and result.first_fail_step == 3
    assert result.counts()["FAIL"] == 2 and result.counts()["PASS"] == 8
    assert not run_trusted([result])


def test_history_never_crosses_coordinates() -> None:
    a = spec(steps=[0, 1])
    b = spec(steps=[0, 1], constraint={"rel_up": 0.2, "rel_down": 0.2})
    sels = select([a, b], records(**{"train/loss": [(0, 1.0), (1, 5.0)]}))
    coords = coordinates(sels)
    assert len(coords) == 4  # different constraint -> different identity
    base = {Coordinate("train/loss", a.steps_key, a.constraint_key, 1): [5.0]}
    results = evaluate(sels, base, 20)
    statuses = [[v.status for v in r.verdicts] for r in results]
    assert statuses == [["INACTIVE", "PASS"], ["INACTIVE", "INACTIVE"]]
    assert run_trusted(results)


def test_run_trust_and_enforcement() -> None:
    enforced = spec(enforce=True)
    sels = select([enforced], records(**{"train/loss": [(0, 2.0)]}))
    results = evaluate(sels, {c: [1.0] for c in coordinates(sels)}, 20)
    assert not run_trusted(results)
    assert fails_test(results, switch_on=True)
    assert not fails_test(results, switch_on=False)
    relaxed = spec()
    sels = select([relaxed], records(**{"train/loss": [(0, 2.0)]}))
    assert not fails_test(evaluate(sels, {c: [1.0] for c in coordinates(sels)}, 20), True)


def test_enforce_switch_and_env_key() -> None:
    assert enforce_switch(False, {}) == (False, None)
    assert enforce_switch(False, {"TESTFLEET_GATE_ENFORCE": "1"}) == (True, None)
    assert enforce_switch(True, {"TESTFLEET_GATE_ENFORCE": "0"}) == (False, None)
    on, warning = enforce_switch(True, {"TESTFLEET_GATE_ENFORCE": "maybe"})
    assert on and warning and "maybe" in warning
    assert env_key([], {"GPU": "h100"}) == ""
    assert env_key(["IMAGE", "GPU"], {"GPU": "h100"}) == '{"GPU":"h100","IMAGE":null}'
    assert env_key(["GPU"], {"GPU": "h100"}) != env_key(["GPU"], {"GPU": "mi300x"})


def test_to_json_is_json_safe() -> None:
    import json

    s = spec()
    [v] = one(s, [(0, math.nan)], [1.0])
    assert json.loads(json.dumps(v.to_json(), allow_nan=False))["value"] == "NaN"


@given(ref=st.floats(-1e6, 1e6), ru=st.floats(0, 10), rd=st.floats(0, 10),
       fu=st.floats(0, 100), fd=st.floats(0, 100))
def test_corridor_always_contains_the_reference(ref, ru, rd, fu, fd) -> None:
    s = spec(constraint={"rel_up": ru, "rel_down": rd, "abs_floor_up": fu, "abs_floor_down": fd})
    lo, hi = s.corridor(ref)
    assert lo <= ref <= hi
    assert one(s, [(0, ref)], [ref])[0].status == "PASS"
