"""A plan no digest pins runs only what the project plans (#36 item 5): the checks
themselves, on in-memory plans of a real configuration."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from testfleet.config import Project, validate_config
from testfleet.errors import UsageError
from testfleet.planning import make_plan
from testfleet.planning.model import Plan, PlannedTest, seal
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry.model import Registration
from testfleet.runner.planguard import (
    frozen_plan_problems,
    require_frozen_matches,
    require_registered,
    unregistered_files,
)

REGS = [Registration("tests/test_0.py", "cpu", "s", 10), Registration("tests/test_1.py", "cpu", "s", 11),
        Registration("tests/test_t.py", "cpu", "t", 5), Registration("tests/test_p.py", "cpu", "", 5)]


def _project() -> Project:
    config = validate_config({"stages": {"s": {"backend": "cpu", "shards": 2},
                                         "t": {"backend": "cpu", "env": {"A": "1"}}}})
    return Project(root=Path("/nonexistent"), config_path=Path("testfleet.toml"), config=config,
                   raw_config_text="")


def _plan(**trigger: str) -> Plan:
    return make_plan(_project(), REGS, PlanRequest(trigger=Trigger(**trigger)))  # type: ignore[arg-type]


def _edit_job(plan: Plan, job_id: str, **changes: object) -> Plan:
    jobs = tuple(dataclasses.replace(j, **changes) if j.id == job_id else j  # type: ignore[arg-type]
                 for j in plan.jobs)
    return seal(dataclasses.replace(plan, jobs=jobs, digest=""))


def _add_file(plan: Plan, job_id: str, file: str) -> Plan:
    job = plan.job(job_id)
    return _edit_job(plan, job_id, tests=(*job.tests, PlannedTest(file, 1.0)))


def test_a_plan_of_registered_files_passes() -> None:
    plan = _plan()
    assert unregistered_files(_project().config, REGS, plan.jobs) == []
    require_registered(_project().config, REGS, plan, [j.id for j in plan.jobs], "plan file p")


@pytest.mark.parametrize(("file", "why"), [
    ("evil/test_evil.py", "outside roots: never registered"),
    ("tests/test_t.py", "registered for another stage"),
    ("tests/test_new.py", "not registered at all"),
])
def test_a_file_the_checkout_does_not_register_for_the_stage_is_refused(file: str,
                                                                         why: str) -> None:
    plan = _add_file(_plan(), "s-1-of-2", file)
    assert unregistered_files(_project().config, REGS, plan.jobs) == [
        f"job s-1-of-2: {file} not registered for stage s in this checkout"], why
    with pytest.raises(UsageError, match=r"was not pinned .* nothing was run"):
        require_registered(_project().config, REGS, plan, ["s-1-of-2"], "plan file p")
    require_registered(_project().config, REGS, plan, ["s-2-of-2"], "plan file p")  # not that job


def test_a_path_only_registration_counts_for_a_stage_of_its_backend() -> None:
    plan = _add_file(_plan(), "t-1-of-1", "tests/test_p.py")
    assert unregistered_files(_project().config, REGS, plan.jobs) == []


def test_a_job_of_a_stage_the_configuration_lacks_is_refused() -> None:
    plan = _edit_job(_plan(), "t-1-of-1", stage="gone")
    assert unregistered_files(_project().config, REGS, plan.jobs) == [
        "job t-1-of-1: stage 'gone' is not in the configuration"]


def test_a_frozen_plan_may_differ_from_the_fresh_one_in_what_history_decides() -> None:
    fresh = _plan()
    s1, s2 = (j for j in fresh.jobs if j.stage == "s")
    # history moved a file between the shards, changed estimates and quarantined one
    moved = dataclasses.replace(fresh, jobs=(
        dataclasses.replace(s1, tests=(*s1.tests, *s2.tests), estimate=99.0),
        dataclasses.replace(s2, tests=tuple(dataclasses.replace(t, quarantined="flaky")
                                            for t in s2.tests), timeout_minutes=7),
        *[j for j in fresh.jobs if j.stage != "s"]))
    assert frozen_plan_problems(seal(dataclasses.replace(moved, digest="")), fresh) == []


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda p: _add_file(p, "s-2-of-2", "evil/test_evil.py"),
     "job s-2-of-2: evil/test_evil.py not planned for s"),
    (lambda p: _add_file(p, "s-2-of-2", "tests/test_t.py"),
     "job s-2-of-2: tests/test_t.py not planned for s"),
    (lambda p: _edit_job(p, "t-1-of-1", command="python"),
     "job t-1-of-1: its settings (backend, runners, container, command, environment or CI "
     "settings) are not the configuration's"),
    (lambda p: _edit_job(p, "t-1-of-1", env={"A": "2"}), "job t-1-of-1: its settings"),
    (lambda p: _edit_job(p, "t-1-of-1", variant="x"), "job t-1-of-1: lane t.x has no job"),
    (lambda p: _edit_job(p, "t-1-of-1", probe=True), "lane t has no probe job"),
    (lambda p: _edit_job(p, "t-1-of-1", tests=tuple(dataclasses.replace(t, command="python {file}")
                                                     for t in p.job("t-1-of-1").tests)),
     "job t-1-of-1: another command for tests/test_t.py"),
    (lambda p: _plan(cadence="nightly"), "it was planned for another trigger"),
])
def test_a_frozen_plan_holding_what_the_fresh_one_does_not_is_refused(
        edit: Callable[[Plan], Plan], problem: str) -> None:
    fresh = _plan()
    frozen = edit(fresh)
    assert any(problem in p for p in frozen_plan_problems(frozen, fresh))
    with pytest.raises(UsageError, match=r"is not what this project plans for it.*nothing was run"):
        require_frozen_matches(frozen, fresh, ".testfleet/plans/k.json")
