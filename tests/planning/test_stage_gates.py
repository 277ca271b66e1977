"""Stages and triggers (#12): per-stage cadences, the exact nightly split, label gates
and drafts. Each rule positive and negative, with the fate every registration gets."""

from __future__ import annotations

from typing import Any

import pytest

from testfleet.config import validate_config
from testfleet.errors import ConfigError, UsageError
from testfleet.integrations.github_event import trigger_from_payload
from testfleet.planning import make_plan
from testfleet.planning.model import Plan, load_plan, plan_bytes
from testfleet.planning.policy import Policy, Trigger, resolve_policy
from testfleet.planning.request import PlanRequest

from .conftest import LABELS, make_project, reg

PR = "pull_request"


def config_with(stages: dict[str, Any], policy: dict[str, Any] | None = None) -> Any:
    base_policy: dict[str, Any] = {"schedules": {"0 15 * * *": "nightly", "0 15 * * 6": "weekly"}}
    base_policy.update(policy or {})
    return validate_config({"labels": {n: n for n in LABELS}, "stages": stages,
                            "policy": base_policy})


STAGES: dict[str, Any] = {
    "unit": {"backend": "cpu"},
    "gpu": {"backend": "cuda"},
    "stress": {"backend": "cuda", "cadences": ["nightly", "weekly"]},
    "extra": {"backend": "cuda", "requires_labels": ["run-ci-extra"]},
}
REGS = [
    reg("tests/test_unit.py", "unit", 5, backend="cpu"),
    reg("tests/test_unit_nightly.py", "unit", 5, backend="cpu", nightly=True),
    reg("tests/test_gpu.py", "gpu", 50, backend="cuda"),
    reg("tests/test_gpu_nightly.py", "gpu", 50, backend="cuda", nightly=True),
    reg("tests/test_stress.py", "stress", 500, backend="cuda"),
    reg("tests/test_extra.py", "extra", 50, backend="cuda"),
]


def plan(trigger: Trigger, stages: dict[str, Any] | None = None,
         policy: dict[str, Any] | None = None, **request: Any) -> Plan:
    project = make_project(config_with(stages or STAGES, policy))
    return make_plan(project, REGS, PlanRequest(trigger=trigger, **request))


def fates(p: Plan) -> dict[str, str]:
    out = {s.file: s.reason for s in p.skipped}
    out.update({t.file: "job" for j in p.jobs for t in j.tests})
    return out


def stage(p: Plan, name: str) -> Any:
    return next(s for s in p.stages if s.name == name)


# -- per-stage cadences ----------------------------------------------------------------


def test_nightly_only_stage_is_excluded_on_push_with_its_own_fate() -> None:
    p = plan(Trigger(event="push"))
    assert fates(p)["tests/test_stress.py"] == "cadence-excluded"
    s = stage(p, "stress")
    assert s.status == "excluded" and "nightly, weekly" in s.reason and "regular" in s.reason
    assert s.counts["cadence-excluded"] == 1
    assert not s.hole  # a stage off this cadence is not a coverage hole


@pytest.mark.parametrize("cron", ["0 15 * * *", "0 15 * * 6"])
def test_nightly_only_stage_runs_on_its_cadences(cron: str) -> None:
    p = plan(Trigger(event="schedule", schedule=cron))
    assert fates(p)["tests/test_stress.py"] == "job"
    assert stage(p, "stress").status == "scheduled"


def test_manual_only_stage_needs_a_configured_manual_cadence() -> None:
    stages = {**STAGES, "stress": {"backend": "cuda", "cadences": ["manual"]}}
    policy = {"cadences": {"regular": {}, "nightly": {}, "weekly": {},
                           "manual": {"include": "all"}}}
    assert fates(plan(Trigger(event="workflow_dispatch"), stages, policy))[
        "tests/test_stress.py"] == "cadence-excluded"
    p = plan(Trigger(event="workflow_dispatch", cadence="manual"), stages, policy)
    assert fates(p)["tests/test_stress.py"] == "job"


def test_stage_cadence_must_be_a_configured_one() -> None:
    with pytest.raises(ConfigError) as info:
        config_with({"s": {"backend": "cpu", "cadences": ["nightyl"]}})
    f = info.value.findings[0]
    assert f.key == "stages.s.cadences" and "did you mean 'nightly'" in f.message
    with pytest.raises(ConfigError):
        config_with({"s": {"backend": "cpu", "cadences": []}})


def test_explicit_file_request_bypasses_the_cadence_gate() -> None:
    p = plan(Trigger(event="push"), files=("tests/test_stress.py",))
    assert fates(p)["tests/test_stress.py"] == "job"


# -- exact nightly split --------------------------------------------------------------


def test_default_nightly_runs_per_commit_and_nightly_registrations() -> None:
    f = fates(plan(Trigger(event="schedule", schedule="0 15 * * *")))
    assert f["tests/test_unit.py"] == "job" and f["tests/test_unit_nightly.py"] == "job"


def test_exact_split_nightly_runs_only_nightly_registrations() -> None:
    policy = {"cadences": {"regular": {}, "weekly": {},
                           "nightly": {"include": "all", "admit_nightly": True,
                                       "nightly_split": "exact"}}}
    p = plan(Trigger(event="schedule", schedule="0 15 * * *"), policy=policy)
    f = fates(p)
    assert f["tests/test_unit_nightly.py"] == "job" and f["tests/test_gpu_nightly.py"] == "job"
    assert f["tests/test_unit.py"] == "per-commit-only"
    assert f["tests/test_gpu.py"] == "per-commit-only"
    detail = next(s.detail for s in p.skipped if s.file == "tests/test_unit.py")
    assert "nightly_split" in detail
    # and the regular cadence still runs only nightly=False ones
    r = fates(plan(Trigger(event="push"), policy=policy))
    assert r["tests/test_unit.py"] == "job" and r["tests/test_unit_nightly.py"] == "nightly-only"


def test_exact_split_is_rejected_for_unknown_values() -> None:
    with pytest.raises(ConfigError) as info:
        config_with(STAGES, {"cadences": {"regular": {"nightly_split": "strict"}}})
    assert info.value.findings[0].key == "policy.cadences.regular.nightly_split"


# -- label gates and drafts ------------------------------------------------------------


def test_stage_requires_label_gate() -> None:
    p = plan(Trigger(event=PR, labels=("run-ci-all",)))
    assert fates(p)["tests/test_extra.py"] == "label-required"
    assert stage(p, "extra").status == "excluded" and "run-ci-extra" in stage(p, "extra").reason
    p = plan(Trigger(event=PR, labels=("run-ci-all", "run-ci-extra")))
    assert fates(p)["tests/test_extra.py"] == "job"
    assert not [w for w in p.warnings if "run-ci-extra" in w]  # a gate label is no bad label


def test_label_gates_do_not_apply_to_pushes_and_schedules() -> None:
    assert fates(plan(Trigger(event="push", match_all_labels=True)))["tests/test_extra.py"] == "job"


def test_project_wide_required_label_gates_gpu_stages_only_by_default() -> None:
    policy = {"required_label": "run-ci"}
    p = plan(Trigger(event=PR, labels=("run-ci-all",)), policy=policy)
    f = fates(p)
    assert f["tests/test_gpu.py"] == "label-required"
    assert f["tests/test_unit.py"] == "job"  # the CPU stage is outside the scope
    assert "'run-ci'" in stage(p, "gpu").reason
    assert not [w for w in p.warnings if "'run-ci'" in w]  # not "lacks the prefix"
    f = fates(plan(Trigger(event=PR, labels=("run-ci-all", "run-ci")), policy=policy))
    assert f["tests/test_gpu.py"] == "job"
    f = fates(plan(Trigger(event=PR), policy={**policy, "required_label_scope": "all"}))
    assert f["tests/test_unit.py"] == "label-required"


@pytest.mark.parametrize(("drafts", "unit", "gpu"), [
    ("run", "job", "job"), ("skip-gpu", "job", "draft"), ("skip", "draft", "draft")])
def test_draft_pull_requests(drafts: str, unit: str, gpu: str) -> None:
    p = plan(Trigger(event=PR, labels=("run-ci-all",), draft=True), policy={"drafts": drafts})
    f = fates(p)
    assert (f["tests/test_unit.py"], f["tests/test_gpu.py"]) == (unit, gpu)
    ready = fates(plan(Trigger(event=PR, labels=("run-ci-all",)), policy={"drafts": drafts}))
    assert ready["tests/test_gpu.py"] == "job"


def test_draft_flag_is_refused_outside_pull_requests() -> None:
    with pytest.raises(UsageError, match="--draft"):
        resolve_policy(config_with(STAGES), Trigger(event="push", draft=True))


def test_draft_is_read_from_the_github_payload() -> None:
    payload = {"pull_request": {"draft": True, "labels": [],
                                "head": {"repo": {"full_name": "o/r"}},
                                "base": {"repo": {"full_name": "o/r"}}}}
    assert trigger_from_payload(PR, payload, "event.json").draft is True
    payload["pull_request"]["draft"] = False
    assert trigger_from_payload(PR, payload, "event.json").draft is False
    payload["pull_request"]["draft"] = "yes"
    with pytest.raises(UsageError, match=r"pull_request\.draft"):
        trigger_from_payload(PR, payload, "event.json")


def test_gate_labels_must_be_usable_labels() -> None:
    with pytest.raises(ConfigError) as info:
        config_with({"s": {"backend": "cpu", "requires_labels": ["bad\nlabel"]}},
                    {"required_label": ""})
    keys = {f.key for f in info.value.findings}
    assert keys == {"stages.s.requires_labels", "policy.required_label"}


def test_gated_plan_round_trips_through_json(tmp_path) -> None:
    p = plan(Trigger(event=PR, labels=("run-ci-all",), draft=True),
             policy={"drafts": "skip-gpu", "required_label": "run-ci"})
    path = tmp_path / "plan.json"
    path.write_bytes(plan_bytes(p))
    again = load_plan(path)
    assert again == p
    pol = Policy.from_json(again.policy)
    assert pol.draft and pol.pr_labels == ("run-ci-all",)


def test_draft_flag_makes_a_pull_request_trigger(tmp_path) -> None:
    from testfleet.cli._trigger import TriggerOptions, build_request

    project = make_project(config_with(STAGES), root=tmp_path)
    req = build_request(project, tmp_path, TriggerOptions(draft=True), env={})
    assert req.trigger.event == PR and req.trigger.draft
    with pytest.raises(UsageError, match="--github and --draft"):
        build_request(project, tmp_path, TriggerOptions(draft=True, github=True), env={})


def test_a_fork_cannot_drop_the_gates_of_the_base_config() -> None:
    from testfleet.planning.trust import Trust

    base = config_with(STAGES, {"required_label": "run-ci"})
    fork_stages = {**STAGES, "extra": {"backend": "cuda"}}  # the fork deleted the gates
    fork = config_with(fork_stages)
    trust = Trust(commit="abc1234", path="testfleet.toml", base=base)
    p = make_plan(make_project(fork), REGS, PlanRequest(
        trigger=Trigger(event=PR, labels=("run-ci-all", "run-ci-megatron"), fork=True),
        trust=trust))
    f = fates(p)
    assert f["tests/test_extra.py"] == "label-required"
    assert f["tests/test_gpu.py"] == "label-required"
    assert "'run-ci'" in stage(p, "gpu").reason
