"""The plan of a queue lane (#40): its jobs are a capacity and say so; a fork's pull
request plans it in shard mode; the config keys are validated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from testfleet.config import Project
from testfleet.errors import ConfigError
from testfleet.planning import make_plan
from testfleet.planning.model import Plan, load_plan, plan_bytes
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.queue.lane import lane_items, planned_lanes, queue_of
from testfleet.registry.model import Registration

CONFIG = """\
roots = ["tests"]

[stages.q]
backend = "cpu"
shards = 3
execution = "queue"
queue_lease_seconds = 30

[stages.q.variants.small]
runs_on = ["small"]

[stages.q.variants.big]
runs_on = ["big"]
execution = "shards"

[stages.s]
backend = "cpu"
shards = 2
"""


def _plan(project: Project, trigger: Trigger | None = None) -> Plan:
    regs = [Registration(f"tests/test_{i}.py", "cpu", suite, float(10 + i))
            for suite in ("q", "s") for i in range(6)]
    return make_plan(project, regs, PlanRequest(trigger=trigger or Trigger()))


def test_a_queue_lane_is_a_capacity(config_project: Callable[[str], Project], tmp_path: Any) -> None:
    plan = _plan(config_project(CONFIG))
    big = [j for j in plan.jobs if j.lane == "q.big"]
    assert big and all(j.queue is None for j in big)  # the variant overrides the stage
    assert all(j.queue is None for j in plan.jobs if j.stage == "s")
    lanes = planned_lanes(plan)
    assert list(lanes) == ["q.small"]
    for lane, doc in lanes.items():
        jobs = [j for j in plan.jobs if j.lane == lane]
        assert doc == {"execution": "queue", "lease_seconds": 30.0, "infra_retries": 1,
                       "files": sum(len(j.tests) for j in jobs)}
        items = lane_items(plan, lane)
        assert [i.estimate for i in items] == sorted((i.estimate for i in items), reverse=True)
        assert len(items) == doc["files"]
    # written and read back: the same plan, the same digest
    path = tmp_path / "plan.json"
    path.write_bytes(plan_bytes(plan))
    again = load_plan(path)
    assert again.digest == plan.digest and planned_lanes(again) == lanes


def test_a_fork_plans_its_queue_lanes_in_shard_mode(
        config_project: Callable[[str], Project]) -> None:
    plan = _plan(config_project(CONFIG), Trigger(event="pull_request", fork=True))
    assert any(j.lane == "q.small" for j in plan.jobs)
    assert not planned_lanes(plan)
    assert any("runs in shard mode for a fork's pull request" in w for w in plan.warnings)


def test_a_pull_request_queues_only_with_a_credential_of_its_own(
        config_project: Callable[[str], Project]) -> None:
    """The history's write secret never reaches a pull request's code: its queue lanes
    run in shard mode, and the plan says why, until [ci] queue_secret names a credential
    limited to the queue tables."""
    from dataclasses import replace

    project = config_project(CONFIG)
    plan = _plan(project, Trigger(event="pull_request"))
    assert any(j.lane == "q.small" for j in plan.jobs) and not planned_lanes(plan)
    assert any("runs in shard mode for a pull request: set [tool.testfleet.ci] queue_secret"
               in w for w in plan.warnings)
    ci = project.config.ci.model_copy(update={"queue_secret": "TESTFLEET_QUEUE_URL"})
    project = replace(project, config=project.config.model_copy(update={"ci": ci}))
    plan = _plan(project, Trigger(event="pull_request"))
    assert "q.small" in planned_lanes(plan)
    assert not any("shard mode" in w for w in plan.warnings)


def test_jobs_of_one_lane_that_disagree_are_refused(config_project: Callable[[str], Project]) -> None:
    from dataclasses import replace

    from testfleet.errors import UsageError

    plan = _plan(config_project(CONFIG))
    lane = next(iter(planned_lanes(plan)))
    first = next(j for j in plan.jobs if j.lane == lane)
    edited = replace(plan, jobs=tuple(replace(j, queue=None) if j is first else j
                                      for j in plan.jobs))
    with pytest.raises(UsageError, match="disagree"):
        queue_of(edited, lane)


@pytest.mark.parametrize(("line", "message"), [
    ('execution = "elastic"', "execution"),
    ("queue_lease_seconds = 1", "queue_lease_seconds"),
    ("queue_infra_retries = 9", "queue_infra_retries"),
])
def test_config_keys_are_validated(config_project: Callable[[str], Project], line: str,
                                   message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_project(f'roots = ["tests"]\n[stages.q]\nbackend = "cpu"\n{line}\n')


def test_a_queue_jobs_timeout_covers_the_whole_lane(
        config_project: Callable[[str], Project]) -> None:
    config = CONFIG.replace("queue_lease_seconds = 30\n",
                            "queue_lease_seconds = 30\njob_timeout_factor = 2\n")
    plan = _plan(config_project(config))
    lane = [j for j in plan.jobs if j.lane == "q.small"]
    big = [j for j in plan.jobs if j.lane == "q.big"]
    total = sum(t.estimate for j in lane for t in j.tests)
    assert len({j.timeout_minutes for j in lane}) == 1
    assert lane[0].timeout_minutes >= total * 2 / 60
    assert all(j.timeout_minutes < lane[0].timeout_minutes for j in big)


def test_the_plan_table_says_a_queue_lane_is_a_capacity(
        config_project: Callable[[str], Project]) -> None:
    from testfleet.integrations.plan_formats import render_table

    plan = _plan(config_project(CONFIG))
    n = sum(1 for j in plan.jobs if j.lane == "q.small")
    text = " ".join(render_table(plan, width=200).split())
    assert f"queue: q.small: {n} runner(s) pull its 6 file(s) from one queue (a capacity" in text
    assert "queue: q.big" not in text
