"""The generated workflow's conditions, evaluated the way GitHub evaluates them:
which label events re-plan, how runs share concurrency groups, when a wave runs."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from testfleet.config import load_project
from testfleet.integrations.github_workflow import render_workflow

from .conftest import EVENTS_DIR
from .gha_calls import rendered
from .gha_expr import evaluate, interpolate, truthy
from .test_github_workflow import EXAMPLE


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return rendered(load_project(EXAMPLE).config)


def github(event_name: str, payload: dict[str, Any], run_id: int = 7001) -> dict[str, Any]:
    return {"github": {"event_name": event_name, "event": payload, "workflow": "testfleet",
                       "run_id": run_id, "ref": payload.get("ref", "refs/pull/1/merge")}}


def labeled(name: str) -> dict[str, Any]:
    payload = json.loads((EVENTS_DIR / "pr_labeled.json").read_text())
    payload = copy.deepcopy(payload)
    payload["label"] = dict(payload["label"], name=name)
    return payload


def test_the_evaluator_follows_github_semantics() -> None:
    ctx = {"a": {"b": "X"}, "n": None}
    assert evaluate("a.b == 'x'", ctx) is True  # case-insensitive strings
    assert evaluate("n || 'fallback'", ctx) == "fallback"
    assert evaluate("a.b && 'y'", ctx) == "y"
    assert evaluate("!failure() && 1 == '1'", ctx, {"failure": False}) is True
    assert evaluate("format('-{0}-{1}', 3, 'x')", ctx) == "-3-x"
    assert evaluate("join(needs.*.result, ' ')",
                    {"needs": {"p": {"result": "success"}, "w": {"result": "skipped"}}}) == "success skipped"


@pytest.mark.parametrize(("label", "replans"), [
    ("run-ci-fsdp", True), ("RUN-CI-AMD", True), ("nightly", True), ("bypass-fastfail", True),
    ("run-ci-all", True), ("documentation", False), ("good first issue", False),
    ("ci-run-fsdp", False),
])
def test_only_labels_that_can_change_the_plan_replan(workflow: dict[str, Any], label: str,
                                                     replans: bool) -> None:
    ctx = github("pull_request", labeled(label))
    assert truthy(evaluate(workflow["jobs"]["plan"]["if"], ctx)) is replans
    group = interpolate(workflow["concurrency"]["group"], ctx)
    name = interpolate(workflow["jobs"]["testfleet"]["name"], ctx)
    if replans:
        # supersedes the PR's running build, and reports the check branch protection reads
        assert group == "testfleet-testfleet-415"
        assert name == "testfleet"
    else:
        # its own group (cancels nothing), and a check name that cannot turn a red PR green
        assert group == "testfleet-testfleet-415-7001"
        assert name == "testfleet (label ignored)"
    assert evaluate(workflow["concurrency"]["cancel-in-progress"], ctx) is True


@pytest.mark.parametrize(("case", "event"), [
    ("pr_same_repo.json", "pull_request"), ("pr_fork_unlabeled.json", "pull_request"),
    ("schedule_nightly.json", "schedule"), ("workflow_dispatch.json", "workflow_dispatch"),
    ("workflow_call_push.json", "push"),
])
def test_other_events_always_plan_and_only_prs_share_a_group(workflow: dict[str, Any], case: str,
                                                              event: str) -> None:
    payload = json.loads((EVENTS_DIR / case).read_text())
    ctx = github(event, payload)
    assert truthy(evaluate(workflow["jobs"]["plan"]["if"], ctx))
    group = interpolate(workflow["concurrency"]["group"], ctx)
    if event == "pull_request":
        assert group == f"testfleet-testfleet-{payload['number']}"
    else:
        assert group == "testfleet-testfleet-7001"  # never waits for, or cancels, another run
    assert evaluate(workflow["concurrency"]["cancel-in-progress"], ctx) is (event == "pull_request")


def _stages(has_jobs: bool, **extra: Any) -> dict[str, Any]:
    """The plan job's outputs as GitHub holds them: strings (``stages`` is JSON)."""
    stages = {name: {"has_jobs": has_jobs, "matrix": {"include": []}}
              for name in ("stage-a-cpu", "stage-b-cpu")}
    return {"stages": json.dumps(stages), "has_jobs": "true" if has_jobs else "false", **extra}


@pytest.mark.parametrize(("has_jobs", "earlier_failed", "bypass", "cancelled", "runs"), [
    (True, False, "false", False, True),
    (True, True, "false", False, False),   # fast-fail: a stage it needs failed
    (True, True, "true", False, True),     # nightly/weekly bypass fast-fail
    (False, False, "false", False, False), # a stage without jobs asks for no runner
    (True, False, "false", True, False),   # the run was cancelled
])
def test_stage_gating(workflow: dict[str, Any], has_jobs: bool, earlier_failed: bool, bypass: str,
                      cancelled: bool, runs: bool) -> None:
    ctx = {"needs": {"plan": {"result": "success",
                              "outputs": _stages(has_jobs, bypass_fastfail=bypass)}}}
    status = {"failure": earlier_failed, "cancelled": cancelled}
    # stage-b-cpu needs stage-a-cpu
    assert truthy(evaluate(workflow["jobs"]["stage-b-cpu"]["if"], ctx, status)) is runs
    # a stage without needs depends on the plan only
    ctx0 = {"needs": {"plan": {"result": "success", "outputs": _stages(has_jobs)}}}
    assert truthy(evaluate(workflow["jobs"]["stage-a-cpu"]["if"], ctx0, status)) is (
        has_jobs and not cancelled)
    # a failed plan: the stages call's if has no status function, so GitHub's implicit
    # success() over its need on the plan skips it, and every stage job with it
    call = yaml.safe_load(render_workflow(load_project(EXAMPLE).config))["jobs"]["stages"]
    assert call["needs"] == ["plan"] and "()" not in call["if"]


def test_a_stage_matrix_is_read_by_its_name(workflow: dict[str, Any]) -> None:
    include = [{"id": "stage-b-cpu-1-of-1"}]
    outputs = {"stages": json.dumps({"stage-a-cpu": {"has_jobs": False, "matrix": {"include": []}},
                                     "stage-b-cpu": {"has_jobs": True, "matrix": {"include": include}}})}
    expr = workflow["jobs"]["stage-b-cpu"]["strategy"]["matrix"]
    assert expr.startswith("${{ ") and expr.endswith(" }}")
    assert evaluate(expr[4:-3], {"needs": {"plan": {"outputs": outputs}}}) == {"include": include}


@pytest.mark.parametrize(("bypass", "fail_fast"), [("true", False), ("false", True), ("", True)])
def test_matrix_fail_fast_follows_the_policy(workflow: dict[str, Any], bypass: str,
                                              fail_fast: bool) -> None:
    ctx = {"needs": {"plan": {"outputs": {"bypass_fastfail": bypass}}}}
    assert evaluate(workflow["jobs"]["stage-a-cpu"]["strategy"]["fail-fast"], ctx) is fail_fast
