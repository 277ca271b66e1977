"""Property tests of the plan invariants over random registries, configs and triggers."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import github_output_dict
from testfleet.errors import UsageError
from testfleet.integrations.plan_formats import FORMATS, github_outputs
from testfleet.planning import make_plan
from testfleet.planning.changes import ChangeSet
from testfleet.planning.model import Plan, plan_bytes
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry.model import Registration

from .conftest import LABELS, make_config, make_project

STAGE_BACKEND = {"stage-a-cpu": "cpu", "stage-b-cpu": "cpu", "gpu-h200": "cuda",
                 "gpu-h100": "cuda", "gpu-mi300x": "rocm"}
RAW_LABELS = [f"run-ci-{name}" for name in LABELS] + [
    "run-ci-all", "run-ci-image", "nightly", "bypass-fastfail", "megatron", "run-ci-nope",
    "run-ci-a\nb=c", "x" * 300, 'run-ci-"quoted"', "run-ci-${{ github.token }}", "",
]


@st.composite
def registries(draw: st.DrawFn) -> list[Registration]:
    n_files = draw(st.integers(0, 25))
    regs = []
    for i in range(n_files):
        stages = draw(st.lists(st.sampled_from(sorted(STAGE_BACKEND)), min_size=1, max_size=3,
                               unique_by=lambda s: STAGE_BACKEND[s]))
        for stage in stages:
            regs.append(Registration(
                file=f"tests/t{i % 7}/test_{i}.py",
                backend=STAGE_BACKEND[stage],
                suite=stage,
                est_time=draw(st.sampled_from([1, 5, 30, 120, 600, 1800, 3600])),
                labels=tuple(draw(st.lists(st.sampled_from(LABELS), max_size=3, unique=True))),
                nightly=draw(st.booleans()),
                disabled=draw(st.sampled_from([None, None, None, "broken, see #1"])),
            ))
    return regs


@st.composite
def projects(draw: st.DrawFn):
    base = make_config()
    stages = {k: v.model_dump() for k, v in base.stages.items()}
    for name in stages:
        if draw(st.integers(0, 5)) == 0:
            stages[name]["disabled"] = f"{name} runners are down"
        stages[name]["trusted_only"] = draw(st.booleans())
    return make_project(make_config(stages=stages))


triggers = st.one_of(
    st.builds(Trigger, event=st.sampled_from(["pull_request", "pull_request_target"]),
              labels=st.lists(st.sampled_from(RAW_LABELS), max_size=5).map(tuple),
              fork=st.booleans()),
    st.builds(Trigger, event=st.just("schedule"),
              schedule=st.sampled_from(["0 15 * * 0-5", "0 15 * * 6", "0 3 1 * *"])),
    st.builds(Trigger, event=st.sampled_from(["push", "workflow_dispatch", "workflow_call"]),
              match_all_labels=st.booleans(),
              cadence=st.sampled_from([None, "regular", "nightly", "weekly", "release"])),
)

change_sets = st.one_of(
    st.none(),
    st.builds(ChangeSet, paths=st.lists(st.sampled_from(
        ["docs/a.md", "README.md", "src/x.py", "tests/t1/test_1.py", "tests/t2/test_2.py"]),
        max_size=3).map(tuple), source=st.just("prop"),
        outside=st.lists(st.sampled_from(["README.md", "libs/x.py"]), max_size=1).map(tuple)),
    st.just(ChangeSet(source="prop", error="unreadable")),
)


def check(plan: Plan, regs: list[Registration]) -> None:
    # every registration exactly once across jobs and skipped
    placed = Counter((t.file, j.stage) for j in plan.jobs for t in j.tests)
    placed.update((s.file, s.suite) for s in plan.skipped)
    assert placed == Counter((r.file, r.suite) for r in regs)
    # no empty job; shards numbered 1..n per stage; never more shards than files
    by_stage: dict[str, list[int]] = {}
    for job in plan.jobs:
        assert job.tests
        by_stage.setdefault(job.stage, []).append(job.shard)
        assert job.id == f"{job.stage}-{job.shard}-of-{job.shards}"
    for stage, shards in by_stage.items():
        assert sorted(shards) == list(range(1, len(shards) + 1))
        n_files = sum(1 for j in plan.jobs if j.stage == stage for _ in j.tests)
        assert len(shards) <= n_files
    # statuses agree with jobs; holes reported whatever the cause
    for s in plan.stages:
        assert (s.status == "scheduled") == (s.name in by_stage)
        enabled = [r for r in regs if r.suite == s.name and not r.disabled]
        expect_hole = s.status == "dormant" or not enabled
        assert s.hole == expect_hole
        if s.hole:
            assert any("coverage hole" in w and f" {s.name} " in w for w in plan.warnings)
    # what runs is eligible under the policy (no explicit file request here)
    include = set(plan.policy["include_labels"])
    regs_by_key = {(r.file, r.suite): r for r in regs}
    for job in plan.jobs:
        for t in job.tests:
            r = regs_by_key[(t.file, job.stage)]
            assert not r.disabled
            assert not r.nightly or plan.policy["admit_nightly"]
            assert not r.labels or include.intersection(r.labels)
    if not plan.jobs:
        assert any(w.startswith("no jobs:") for w in plan.warnings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(project=projects(), regs=registries(), trigger=triggers, changes=change_sets,
       seed=st.integers(0, 2**32))
def test_plan_invariants(project, regs, trigger, changes, seed) -> None:
    request = PlanRequest(trigger=trigger, changes=changes)
    plan = make_plan(project, regs, request)
    check(plan, regs)
    # identical inputs in any order -> identical bytes
    shuffled = list(regs)
    random.Random(seed).shuffle(shuffled)
    assert plan_bytes(make_plan(project, shuffled, request)) == plan_bytes(plan)
    assert Plan.from_json(plan.to_json()) == plan
    # every format renders, and the GitHub outputs cannot be injected
    for fmt in sorted(FORMATS):
        text = FORMATS[fmt](plan)
        assert isinstance(text, str) and text
        if plan.holes:
            assert all(s.name in text for s in plan.holes)
    outputs = github_output_dict(FORMATS["github"](plan))
    assert set(outputs) == set(github_outputs(plan))


@settings(max_examples=60, deadline=None)
@given(project=projects(), regs=registries(), trigger=triggers,
       stages=st.lists(st.sampled_from(sorted(STAGE_BACKEND)), max_size=2, unique=True))
def test_stage_filter_invariants(project, regs, trigger, stages) -> None:
    plan = make_plan(project, regs, PlanRequest(trigger=trigger, stages=tuple(stages)))
    check(plan, regs)
    if stages:
        assert {j.stage for j in plan.jobs} <= set(stages)
        assert all(s.reason == "not-requested" for s in plan.skipped if s.suite not in stages)


@settings(max_examples=60, deadline=None)
@given(project=projects(), regs=registries(), include_disabled=st.booleans(), data=st.data())
def test_file_request_is_exact_or_an_error(project, regs, include_disabled, data) -> None:
    files = sorted({r.file for r in regs})
    if not files:
        return
    chosen = data.draw(st.lists(st.sampled_from(files), min_size=1, max_size=3, unique=True))
    try:
        plan = make_plan(project, regs, PlanRequest(files=tuple(chosen),
                                                    include_disabled=include_disabled))
    except UsageError as exc:
        assert "--file" in str(exc) or "nothing to run" in str(exc)
        return
    assert plan.jobs  # an explicit request never yields a silently empty plan
    assert {t.file for j in plan.jobs for t in j.tests} <= set(chosen)
    placed = Counter((t.file, j.stage) for j in plan.jobs for t in j.tests)
    placed.update((s.file, s.suite) for s in plan.skipped)
    assert placed == Counter((r.file, r.suite) for r in regs)
