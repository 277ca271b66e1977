"""Plan files as shard timelines; malformed plans are clear errors."""

from __future__ import annotations

import pytest

from testfleet.errors import UsageError
from testfleet.report.planview import plan_section


def _plan(**over):
    data = {"schema": "testfleet.plan/1", "jobs": [
        {"id": "a-1", "stage": "a", "shard": 1, "shards": 2,
         "tests": [{"file": "x.py", "estimate": 30}, {"file": "y.py", "estimate": 10}]},
        {"id": "a-2", "stage": "a", "shard": 2, "shards": 2,
         "tests": [{"file": "z.py", "estimate": 20}]}], "stages": []}
    data.update(over)
    return data


def test_missing_summary_values_are_derived_from_jobs() -> None:
    (t,) = plan_section(_plan(), "p.json").timelines
    assert [b.estimate for b in t.shards] == [40, 20]
    assert t.makespan == 40 and t.lower_bound == 30 and t.ratio == pytest.approx(40 / 30)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "a plan is a JSON object"),
        ({"schema": "x/1"}, "not a testfleet plan"),
        (_plan(jobs={}), "'jobs' must be a list"),
        (_plan(jobs=[7]), "jobs[0]: must be an object"),
        (_plan(jobs=[{"stage": "", "tests": []}]), "'stage' must be a non-empty string"),
        (_plan(jobs=[{"stage": "a", "tests": [{"file": "x", "estimate": -1}]}]), "finite number"),
        (_plan(jobs=[{"stage": "a", "tests": [{"file": "x", "estimate": float("nan")}]}]), "finite"),
        (_plan(jobs=[{"stage": "a", "shard": "1", "tests": []}]), "shard: must be an integer"),
        (_plan(stages=[{"name": 3}]), "'name' must be a non-empty string"),
    ],
)
def test_malformed_plans(data, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        plan_section(data, "p.json")
