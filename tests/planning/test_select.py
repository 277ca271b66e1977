"""Selection and plan assembly: every registration's fate, stage statuses, pruning, requests."""

from __future__ import annotations

from collections import Counter

import pytest

from testfleet.errors import UsageError
from testfleet.planning import make_plan
from testfleet.planning.changes import ChangeSet
from testfleet.planning.model import Plan
from testfleet.planning.planner import stage_waves
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry.model import Registration

from .conftest import make_config, make_project, reg, sample_registrations

PR = "pull_request"


def plan_for(trigger: Trigger | None = None, regs=None, project=None, **request) -> Plan:
    return make_plan(project or make_project(), sample_registrations() if regs is None else regs,
                     PlanRequest(trigger=trigger or Trigger(), **request))


def fates(plan: Plan) -> dict[tuple[str, str], str]:
    out = {(s.file, s.suite): s.reason for s in plan.skipped}
    for job in plan.jobs:
        for t in job.tests:
            out[(t.file, job.stage)] = "job"
    return out


def status(plan: Plan) -> dict[str, str]:
    return {s.name: s.status for s in plan.stages}


def test_regular_pr_without_labels() -> None:
    plan = plan_for(Trigger(event=PR))
    f = fates(plan)
    assert f[("tests/fast/test_a.py", "stage-a-cpu")] == "job"
    assert f[("tests/unit/test_plain.py", "stage-b-cpu")] == "job"  # no labels: always selected
    assert f[("tests/unit/test_roll.py", "stage-b-cpu")] == "not-selected-by-labels"
    assert f[("tests/unit/test_long.py", "stage-b-cpu")] == "nightly-only"
    assert f[("tests/e2e/test_meg.py", "gpu-h200")] == "not-selected-by-labels"
    assert f[("tests/e2e/amd/test_broken.py", "gpu-mi300x")] == "disabled"
    assert status(plan)["gpu-h200"] == "empty"
    assert "not-selected-by-labels" in next(s for s in plan.stages if s.name == "gpu-h200").reason


def test_fork_pr_without_labels_marks_trusted_stage_unauthorized() -> None:
    plan = plan_for(Trigger(event=PR, fork=True))
    st = next(s for s in plan.stages if s.name == "gpu-mi300x")
    assert st.status == "unauthorized"
    assert "fork" in st.reason and "run-ci-" in st.reason
    f = fates(plan)
    assert f[("tests/e2e/amd/test_smoke.py", "gpu-mi300x")] == "unauthorized"
    assert f[("tests/e2e/amd/test_broken.py", "gpu-mi300x")] == "disabled"
    assert not [j for j in plan.jobs if j.stage == "gpu-mi300x"]


def test_fork_pr_with_label_is_authorized() -> None:
    plan = plan_for(Trigger(event=PR, fork=True, labels=("run-ci-amd",)))
    assert status(plan)["gpu-mi300x"] == "scheduled"
    assert fates(plan)[("tests/e2e/amd/test_smoke.py", "gpu-mi300x")] == "job"


def test_dormant_stage_schedules_nothing_and_is_a_hole() -> None:
    config = make_config()
    stages = {k: v.model_dump() for k, v in config.stages.items()}
    stages["gpu-mi300x"]["disabled"] = "MI300X runners fail at start-up"
    project = make_project(make_config(stages=stages))
    plan = plan_for(Trigger(event=PR, fork=True), project=project)
    st = next(s for s in plan.stages if s.name == "gpu-mi300x")
    assert (st.status, st.reason, st.hole) == ("dormant", "MI300X runners fail at start-up", True)
    f = fates(plan)
    assert f[("tests/e2e/amd/test_smoke.py", "gpu-mi300x")] == "stage-dormant"
    assert f[("tests/e2e/amd/test_broken.py", "gpu-mi300x")] == "disabled"  # own reason first
    assert any("coverage hole" in w and "gpu-mi300x" in w and "dormant" in w for w in plan.warnings)
    assert any("backend rocm has no enabled coverage" in w for w in plan.warnings)
    # even the widest trigger schedules nothing on a dormant stage
    plan = plan_for(Trigger(event="workflow_dispatch", match_all_labels=True), project=project)
    assert not [j for j in plan.jobs if j.stage == "gpu-mi300x"]


def test_holes_whatever_the_cause() -> None:
    regs = [r for r in sample_registrations() if r.suite != "gpu-h100"]
    regs += [reg("tests/e2e/test_x.py", "gpu-h100", disabled="flaky")]
    regs = [r for r in regs if r.suite != "stage-b-cpu"]
    plan = plan_for(Trigger(), regs=regs)
    holes = {s.name for s in plan.holes}
    assert holes == {"gpu-h100", "stage-b-cpu"}
    text = " ".join(plan.warnings)
    assert "gpu-h100 (cuda) has no enabled registrations: all 1 registration(s) are disabled" in text
    assert "stage-b-cpu (cpu) has no enabled registrations: no test file registers it" in text


def test_subtraction_is_not_a_veto() -> None:
    plan = plan_for(Trigger(event="schedule", schedule="0 15 * * 0-5"))  # nightly: minus long
    f = fates(plan)
    assert f[("tests/e2e/test_meg_long.py", "gpu-h200")] == "job"  # megatron still included
    assert f[("tests/unit/test_long.py", "stage-b-cpu")] == "not-selected-by-labels"
    assert f[("tests/e2e/test_soak.py", "gpu-h100")] == "not-selected-by-labels"  # ft-long only
    weekly = fates(plan_for(Trigger(event="schedule", schedule="0 15 * * 6")))
    assert weekly[("tests/e2e/test_soak.py", "gpu-h100")] == "job"
    assert weekly[("tests/unit/test_long.py", "stage-b-cpu")] == "job"


def test_requested_label_selects_only_its_tests() -> None:
    f = fates(plan_for(Trigger(event=PR, labels=("run-ci-megatron",))))
    assert f[("tests/e2e/test_meg.py", "gpu-h200")] == "job"
    assert f[("tests/e2e/test_meg_long.py", "gpu-h200")] == "job"
    assert f[("tests/e2e/test_fsdp.py", "gpu-h200")] == "not-selected-by-labels"


def test_waves_follow_needs() -> None:
    assert stage_waves(make_config()) == {
        "stage-a-cpu": 0, "stage-b-cpu": 1, "gpu-h200": 1, "gpu-h100": 2, "gpu-mi300x": 1}
    plan = plan_for(Trigger(event="schedule", schedule="0 15 * * 6"))
    assert plan.waves == 3
    assert {j.wave for j in plan.jobs if j.stage == "gpu-h100"} == {2}
    assert all(j.needs == ("gpu-h200",) for j in plan.jobs if j.stage == "gpu-h100")


def test_jobs_shape_and_ids() -> None:
    plan = plan_for(Trigger(event="schedule", schedule="0 15 * * 6"))
    ids = [j.id for j in plan.jobs]
    assert "stage-a-cpu-1-of-2" in ids and "stage-a-cpu-2-of-2" in ids
    for job in plan.jobs:
        assert job.tests
        assert job.estimate == pytest.approx(sum(t.estimate for t in job.tests))
        assert 1 <= job.shard <= job.shards
    h200 = [j for j in plan.jobs if j.stage == "gpu-h200"]
    assert h200[0].env == {"NCCL_DEBUG": "WARN"}
    assert len(h200) <= 3  # max_shards
    b = next(s for s in plan.stages if s.name == "stage-b-cpu")
    assert b.shards == 1  # neither shards nor target: one shard
    assert b.counts["scheduled"] == 3


def test_never_more_jobs_than_files_but_shards_stay_as_configured() -> None:
    """#26: ``shards = N`` is N shards (a fixed CI matrix runs I/N); a shard without a file
    has no job (no job is empty) and runs empty."""
    regs = [reg("tests/fast/test_a.py", "stage-a-cpu", 5)]
    plan = plan_for(Trigger(), regs=regs)
    jobs = [j for j in plan.jobs if j.stage == "stage-a-cpu"]
    shards = make_config().stages["stage-a-cpu"].shards
    assert shards is not None and shards > 1
    assert [(j.id, j.shard, j.shards) for j in jobs] == [(f"stage-a-cpu-1-of-{shards}", 1, shards)]


def test_stage_figures() -> None:
    plan = plan_for(Trigger(event="schedule", schedule="0 15 * * 6"))
    for s in plan.stages:
        if s.status != "scheduled":
            continue
        jobs = [j for j in plan.jobs if j.stage == s.name]
        assert s.makespan == pytest.approx(max(j.estimate for j in jobs))
        tests = [t.estimate for j in jobs for t in j.tests]
        assert s.lower_bound == pytest.approx(max(max(tests), sum(tests) / len(jobs)))
        assert s.ratio >= 1.0 - 1e-9


def test_estimates_from_history() -> None:
    est = {("tests/fast/test_a.py", "stage-a-cpu"): (50.0, "history")}
    plan = make_plan(make_project(), sample_registrations(), PlanRequest(Trigger()), est)
    tests = {t.file: t for j in plan.jobs for t in j.tests}
    assert tests["tests/fast/test_a.py"].estimate == 50.0
    assert tests["tests/fast/test_a.py"].source == "history"
    assert tests["tests/fast/test_b.py"].source == "est_time"
    a = next(s for s in plan.stages if s.name == "stage-a-cpu")
    assert a.history_share == pytest.approx(1 / 3, abs=1e-3)


def test_bad_estimate_is_a_clear_error() -> None:
    est = {("tests/fast/test_a.py", "stage-a-cpu"): (float("nan"), "history")}
    with pytest.raises(UsageError, match=r"estimate for tests/fast/test_a\.py"):
        make_plan(make_project(), sample_registrations(), PlanRequest(Trigger()), est)


def test_registration_on_unknown_stage_is_refused() -> None:
    regs = [reg("tests/x/test_q.py", "gpu-h200", backend="rocm")]
    with pytest.raises(UsageError, match="testfleet check"):
        plan_for(Trigger(), regs=regs)


# -- pruning -----------------------------------------------------------------------


def changes(*paths: str, error: str | None = None) -> ChangeSet:
    return ChangeSet(paths=paths, source="test", error=error)


LABELLED = Trigger(event=PR, labels=("run-ci-megatron", "run-ci-ft-short", "run-ci-fsdp"))


def test_changed_test_file_keeps_only_its_stages() -> None:
    trig = Trigger(event=PR, labels=("run-ci-fsdp", "run-ci-ft-short"))
    plan = plan_for(trig, changes=changes("tests/e2e/test_fsdp.py", "README.md"))
    st = status(plan)
    assert st["gpu-h200"] == "scheduled"
    assert st["gpu-h100"] == "scheduled"  # requested label ft-short keeps it
    trig = Trigger(event=PR, labels=("run-ci-amd",))
    plan = plan_for(trig, changes=changes("tests/e2e/test_fsdp.py"))
    assert status(plan)["gpu-mi300x"] == "scheduled"  # requested label amd keeps it


def test_unrequested_gpu_stage_is_pruned() -> None:
    trig = Trigger(event=PR, labels=("bypass-fastfail",))
    # no labels requested: h200 has nothing selected anyway; use a stage with unlabelled tests
    regs = [*sample_registrations(), reg("tests/e2e/test_unlabelled.py", "gpu-h100", 100)]
    plan = plan_for(trig, regs=regs, changes=changes("docs/index.md"))
    assert status(plan)["gpu-h100"] == "unaffected"
    assert fates(plan)[("tests/e2e/test_unlabelled.py", "gpu-h100")] == "stage-unaffected"
    assert status(plan)["stage-a-cpu"] == "scheduled"  # CPU stages are not pruned by default
    plan = plan_for(trig, regs=regs, changes=changes("tests/e2e/test_unlabelled.py"))
    assert status(plan)["gpu-h100"] == "scheduled"


def test_other_paths_affect_everything() -> None:
    regs = [*sample_registrations(), reg("tests/e2e/test_unlabelled.py", "gpu-h100", 100)]
    plan = plan_for(Trigger(event=PR), regs=regs, changes=changes("src/lib/core.py"))
    assert status(plan)["gpu-h100"] == "scheduled"


def test_unreadable_diff_prunes_nothing_and_says_so() -> None:
    regs = [*sample_registrations(), reg("tests/e2e/test_unlabelled.py", "gpu-h100", 100)]
    plan = plan_for(Trigger(event=PR), regs=regs, changes=changes(error="cannot read it"))
    assert status(plan)["gpu-h100"] == "scheduled"
    assert any("no stage pruned" in w and "cannot read it" in w for w in plan.warnings)


def test_broad_scopes_are_not_pruned() -> None:
    regs = [*sample_registrations(), reg("tests/e2e/test_unlabelled.py", "gpu-h100", 100)]
    for labels in (("run-ci-all",), ("run-ci-image",), ("nightly",)):
        plan = plan_for(Trigger(event=PR, labels=labels), regs=regs, changes=changes("docs/a.md"))
        assert status(plan)["gpu-h100"] == "scheduled", labels


def test_stage_prune_opt_in_and_out() -> None:
    config = make_config()
    stages = {k: v.model_dump() for k, v in config.stages.items()}
    stages["stage-a-cpu"]["prune"] = True
    stages["gpu-h100"]["prune"] = False
    project = make_project(make_config(stages=stages))
    regs = [*sample_registrations(), reg("tests/e2e/test_unlabelled.py", "gpu-h100", 100)]
    plan = plan_for(Trigger(event=PR), regs=regs, project=project, changes=changes("docs/x.md"))
    assert status(plan)["stage-a-cpu"] == "unaffected"
    assert status(plan)["gpu-h100"] == "scheduled"


def test_pruning_only_for_pull_requests() -> None:
    regs = [*sample_registrations(), reg("tests/e2e/test_unlabelled.py", "gpu-h100", 100)]
    plan = plan_for(Trigger(event="push"), regs=regs, changes=changes("docs/x.md"))
    assert status(plan)["gpu-h100"] == "scheduled"
    assert any("pruning applies to pull_request" in w for w in plan.warnings)


# -- explicit requests ----------------------------------------------------------------


def test_file_request_ignores_labels_and_cadence() -> None:
    plan = plan_for(Trigger(), files=("tests/e2e/test_soak.py",))
    assert [t.file for j in plan.jobs for t in j.tests] == ["tests/e2e/test_soak.py"]
    reasons = Counter(s.reason for s in plan.skipped)
    assert set(reasons) <= {"not-requested", "disabled"}


def test_file_request_disabled_is_an_error_unless_included() -> None:
    with pytest.raises(UsageError, match="--include-disabled"):
        plan_for(Trigger(), files=("tests/e2e/amd/test_broken.py",))
    plan = plan_for(Trigger(), files=("tests/e2e/amd/test_broken.py",), include_disabled=True)
    assert [j.stage for j in plan.jobs] == ["gpu-mi300x"]


def test_file_request_unregistered_is_an_error() -> None:
    with pytest.raises(UsageError, match="not a registered test file"):
        plan_for(Trigger(), files=("tests/e2e/test_nope.py",))


def test_file_request_on_dormant_stage_is_an_error_not_an_empty_plan() -> None:
    config = make_config()
    stages = {k: v.model_dump() for k, v in config.stages.items()}
    stages["gpu-mi300x"]["disabled"] = "runners down"
    project = make_project(make_config(stages=stages))
    with pytest.raises(UsageError, match=r"nothing to run.*stage-dormant.*runners down"):
        plan_for(Trigger(), project=project, files=("tests/e2e/amd/test_smoke.py",))


def test_file_with_two_backends_and_stage_filter() -> None:
    plan = plan_for(Trigger(), files=("tests/e2e/test_meg.py",), stages=("gpu-mi300x",))
    assert [j.stage for j in plan.jobs] == ["gpu-mi300x"]
    f = fates(plan)
    assert f[("tests/e2e/test_meg.py", "gpu-h200")] == "not-requested"
    with pytest.raises(UsageError, match="not registered on the requested stage"):
        plan_for(Trigger(), files=("tests/e2e/test_meg.py",), stages=("gpu-h100",))


def test_stage_filter() -> None:
    plan = plan_for(Trigger(event=PR, labels=("run-ci-all",)), stages=("gpu-h200",))
    assert {j.stage for j in plan.jobs} == {"gpu-h200"}
    st = next(s for s in plan.stages if s.name == "stage-a-cpu")
    assert (st.status, st.reason) == ("empty", "not requested (--stage filter)")
    with pytest.raises(UsageError, match="did you mean 'gpu-h200'"):
        plan_for(Trigger(), stages=("gpu-h20",))


def test_include_disabled_needs_a_narrow_request() -> None:
    with pytest.raises(UsageError, match="--include-disabled applies only"):
        plan_for(Trigger(), include_disabled=True)


def test_empty_plan_says_why() -> None:
    plan = plan_for(Trigger(), stages=("gpu-h200",))
    assert not plan.jobs
    assert any(w.startswith("no jobs:") and "gpu-h200 empty" in w for w in plan.warnings)


def test_non_finite_literal_is_a_clear_error() -> None:
    regs = [reg("tests/fast/test_a.py", "stage-a-cpu", float("inf"))]
    with pytest.raises(UsageError, match="not a finite number"):
        plan_for(Trigger(), regs=regs)


def test_too_many_jobs_in_a_wave_is_a_warning() -> None:
    config = make_config()
    stages = {k: v.model_dump() for k, v in config.stages.items()}
    stages["stage-a-cpu"]["shards"] = 256
    stages["gpu-mi300x"]["needs"] = []
    stages["gpu-mi300x"]["max_shards"] = 4
    project = make_project(make_config(stages=stages))
    regs = [reg(f"tests/fast/test_{i}.py", "stage-a-cpu", 5) for i in range(256)]
    regs += [reg(f"tests/e2e/test_{i}.py", "gpu-mi300x", 5, labels=("amd",)) for i in range(4)]
    plan = plan_for(Trigger(event="pull_request", labels=("run-ci-amd",)), regs=regs,
                    project=project)
    assert any("wave 0 has 260 jobs" in w for w in plan.warnings)


def test_fixed_shards_with_zero_durations_are_all_used() -> None:
    """#26: with near-zero recorded durations a ``shards = 4`` stage was planned as 3 shards
    (the load fits on fewer) and a fixed matrix's ``--shard 4/4`` failed; now every shard of
    a stage with at least N files gets files."""
    config = make_config(stages={"s": {"backend": "cpu", "shards": 4}})
    regs = [reg(f"tests/fast/test_{i}.py", "stage-a-cpu", 5) for i in range(6)]
    regs = [Registration(r.file, "cpu", "s", r.est_time) for r in regs]
    measured = [0.002, 0.001, 0.0, 0.0, 0.0, 0.0]  # recorded durations, rounded to ms
    estimates = {(r.file, "s"): (measured[i], "history") for i, r in enumerate(regs)}
    plan = make_plan(make_project(config), regs, PlanRequest(), estimates)
    assert sorted(j.shard for j in plan.jobs) == [1, 2, 3, 4]
    assert {j.shards for j in plan.jobs} == {4}
    assert sum(len(j.tests) for j in plan.jobs) == 6
