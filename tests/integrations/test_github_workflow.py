"""The generated GitHub Actions workflow: linted by actionlint and zizmor, valid against
the workflow schema, and structurally what the plan's outputs need."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testfleet.config import Project, load_project, validate_config
from testfleet.integrations.github_workflow import (
    PINNED_ACTIONS,
    WorkflowOptions,
    render_workflow,
    stage_waves,
    wave_count,
)
from testfleet.planning.formats import github_outputs

from .conftest import run_tool, tool

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"


def example() -> Project:
    return load_project(EXAMPLE)


def chain_config(**policy: Any) -> Any:
    """Four stages in three waves, with a custom label prefix that needs quoting."""
    return validate_config({
        "stages": {
            "unit": {"backend": "cpu"},
            "lint": {"backend": "cpu"},
            "gpu": {"backend": "cuda", "needs": ["unit"], "runs_on": ["self-hosted", "gpu"]},
            "soak": {"backend": "cuda", "needs": ["gpu", "lint"]},
        },
        "policy": policy,
    })


def parsed(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def lint(tmp_path: Path, text: str) -> list[subprocess.CompletedProcess[str]]:
    wf = tmp_path / ".github" / "workflows" / "testfleet.yml"
    wf.parent.mkdir(parents=True, exist_ok=True)
    wf.write_text(text)
    tool("shellcheck")  # actionlint lints every run: script with it when it is on PATH
    return [
        run_tool(tool("actionlint"), "-no-color", str(wf), cwd=tmp_path),
        run_tool(tool("zizmor"), "--offline", "--persona", "auditor", "--no-progress", str(wf)),
        run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(wf)),
    ]


VARIANTS = {
    "example": (lambda: example().config, WorkflowOptions()),
    "example-options": (lambda: example().config, WorkflowOptions(
        install="pip install -e '.[gpu]'\npip install testfleet==0.1.0",
        push_branches=("main", "release/v1"), diff_pruning=False,
        database_secret="TESTFLEET_DATABASE_URL", python_version="3.11")),
    "three-waves": (lambda: chain_config(label_prefix="ci-'x'-", schedules={}), WorkflowOptions()),
    "no-stages": (lambda: validate_config({}), WorkflowOptions()),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_workflow_passes_actionlint_zizmor_and_the_schema(variant: str, tmp_path: Path) -> None:
    config_fn, opts = VARIANTS[variant]
    for result in lint(tmp_path, render_workflow(config_fn(), opts)):
        assert result.returncode == 0, f"{result.args[0]}:\n{result.stdout}\n{result.stderr}"


def test_the_linters_do_catch_an_injected_expression(tmp_path: Path) -> None:
    """The lint test is not vacuous: the same tools reject a PR title in a run script."""
    text = render_workflow(example().config)
    bad = text.replace("          mkdir -p testfleet-junit\n",
                       '          echo "${{ github.event.pull_request.title }}"\n'
                       "          mkdir -p testfleet-junit\n", 1)
    assert bad != text
    actionlint, zizmor, _ = lint(tmp_path, bad)
    assert actionlint.returncode != 0 and "untrusted" in actionlint.stdout
    assert zizmor.returncode != 0 and "template-injection" in zizmor.stdout + zizmor.stderr
    # and actionlint really runs shellcheck on the scripts
    unquoted = text.replace("mkdir -p testfleet-junit\n", "mkdir -p $TESTFLEET_JOB_ID\n", 1)
    actionlint, _, _ = lint(tmp_path, unquoted)
    assert actionlint.returncode != 0 and "SC2086" in actionlint.stdout


def _steps(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in data["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_expression_ever_reaches_a_run_script(variant: str) -> None:
    config_fn, opts = VARIANTS[variant]
    data = parsed(render_workflow(config_fn(), opts))
    runs = [s["run"] for s in _steps(data) if "run" in s]
    assert runs
    for script in runs:
        assert "${{" not in script, script


def test_actions_are_pinned_to_commits_with_their_version() -> None:
    text = render_workflow(example().config)
    uses = re.findall(r"uses: (\S+)@(\S+) # (v[\d.]+)", text)
    assert len(uses) == text.count("uses:")
    for action, ref, version in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref)
        assert PINNED_ACTIONS[action] == (ref, version)


def test_plan_job_is_read_only_and_secret_free() -> None:
    opts = WorkflowOptions(database_secret="TESTFLEET_DATABASE_URL")
    data = parsed(render_workflow(example().config, opts))
    assert data["permissions"] == {}
    plan = data["jobs"]["plan"]
    assert plan["permissions"] == {"contents": "read"}
    assert plan["runs-on"] == "ubuntu-latest"
    assert "secrets." not in json.dumps(plan)
    for step in plan["steps"]:
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
    # the database secret reaches only the step that runs tests
    for name, job in data["jobs"].items():
        for step in job.get("steps", []):
            has_secret = "secrets." in json.dumps(step)
            assert has_secret == (name.startswith("wave-") and step.get("name") == "Run")


def test_plan_step_runs_the_planner_and_uploads_the_plan() -> None:
    data = parsed(render_workflow(example().config))
    steps = data["jobs"]["plan"]["steps"]
    plan_step = next(s for s in steps if s.get("id") == "plan")
    script = plan_step["run"]
    assert 'testfleet plan "${args[@]}" --format github --plan-file plan.json' in script
    assert "--diff-base HEAD^1" in script
    assert plan_step["env"] == {"CADENCE": "${{ inputs.cadence }}"}
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "testfleet-plan" and upload["with"]["path"] == "plan.json"
    install = next(s for s in steps if s.get("name") == "Install testfleet")
    assert install["run"].strip() == "pip install testfleet"
    no_prune = parsed(render_workflow(example().config, WorkflowOptions(diff_pruning=False)))
    assert "--diff-base" not in json.dumps(no_prune)


def test_wave_jobs_consume_one_matrix_each() -> None:
    config = chain_config()
    data = parsed(render_workflow(config))
    assert wave_count(config) == 3
    assert stage_waves(config) == {"unit": 0, "lint": 0, "gpu": 1, "soak": 2}
    assert set(data["jobs"]) == {"plan", "wave-0", "wave-1", "wave-2", "testfleet"}
    for i in range(3):
        job = data["jobs"][f"wave-{i}"]
        assert job["needs"] == ["plan", *[f"wave-{j}" for j in range(i)]]
        cond = job["if"]
        assert f"needs.plan.outputs.has_jobs_{i} == 'true'" in cond
        assert "!cancelled()" in cond and "needs.plan.result == 'success'" in cond
        assert ("!failure() || needs.plan.outputs.bypass_fastfail == 'true'" in cond) == (i > 0)
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(needs.plan.outputs.matrix_{i}) }}}}"
        assert job["runs-on"] == "${{ matrix.runs_on }}"
        assert job["container"] == "${{ matrix.container || '' }}"
        assert job["permissions"] == {"contents": "read"}
        run = next(s for s in job["steps"] if s.get("name") == "Run")
        assert run["env"]["TESTFLEET_JOB_ID"] == "${{ matrix.id }}"
        assert ('testfleet run --plan plan.json --job "$TESTFLEET_JOB_ID" '
                '--junit "testfleet-junit/$TESTFLEET_JOB_ID.xml"') in run["run"]
        download = next(s for s in job["steps"]
                        if s.get("uses", "").startswith("actions/download-artifact@"))
        assert download["with"]["name"] == "testfleet-plan"
        junit = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert junit and junit[0]["if"] == "${{ !cancelled() }}"
    assert data["jobs"]["testfleet"]["needs"] == ["plan", "wave-0", "wave-1", "wave-2"]


def test_outputs_match_what_the_planner_writes(example_project: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Every needs.plan.outputs.X used downstream is declared by the plan job, and
    every declared output is one the planner really writes for this config."""
    from testfleet.planning import make_plan
    from testfleet.planning.request import PlanRequest
    from testfleet.policy import Trigger
    from testfleet.registry import collect

    project = load_project(example_project)
    plan = make_plan(project, collect(project), PlanRequest(trigger=Trigger(event="push")))
    written = set(github_outputs(plan))
    text = render_workflow(project.config)
    data = parsed(text)
    declared = set(data["jobs"]["plan"]["outputs"])
    assert declared <= written
    for name, value in data["jobs"]["plan"]["outputs"].items():
        assert value == f"${{{{ steps.plan.outputs.{name} }}}}"
    used = set(re.findall(r"needs\.plan\.outputs\.([a-z0-9_]+)", text))
    assert used <= declared
    assert plan.waves == wave_count(project.config)


def test_triggers_follow_the_config() -> None:
    config = example().config
    data = parsed(render_workflow(config, WorkflowOptions(push_branches=("main",))))
    on = data["on"]
    assert {s["cron"] for s in on["schedule"]} == set(config.policy.schedules)
    assert on["pull_request"]["types"] == ["opened", "synchronize", "reopened", "labeled"]
    assert "pull_request_target" not in on
    assert set(on["workflow_dispatch"]["inputs"]["cadence"]["options"]) == set(config.policy.cadences)
    assert on["workflow_call"]["inputs"]["cadence"]["type"] == "string"
    assert on["push"]["branches"] == ["main"]
    assert "schedule" not in parsed(render_workflow(chain_config()))["on"]


def test_irrelevant_labels_neither_rerun_nor_cancel() -> None:
    text = render_workflow(chain_config(label_prefix="ci-'x'-"))
    data = parsed(text)
    assert "startsWith(github.event.label.name, 'ci-''x''-')" in data["jobs"]["plan"]["if"]
    assert "github.event.label.name == 'nightly'" in data["jobs"]["plan"]["if"]
    group = data["concurrency"]["group"]
    assert "github.event.pull_request.number || github.run_id" in group
    assert "format('-{0}', github.run_id)" in group
    assert "'testfleet (label ignored)'" in data["jobs"]["testfleet"]["name"]


def _bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", script], env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", **env},
                          cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_guard_fails_when_the_plan_outgrew_the_workflow(tmp_path: Path) -> None:
    data = parsed(render_workflow(example().config))
    guard = next(s for s in data["jobs"]["plan"]["steps"]
                 if s.get("name") == "Check the plan fits this workflow")["run"]
    jobs = [{"id": f"s-{i}", "wave": 1} for i in range(256)] + [{"id": "a", "wave": 0}]
    (tmp_path / "plan.json").write_text(json.dumps({"jobs": jobs}))
    assert _bash(guard, {"WAVES": "2"}, tmp_path).returncode == 0
    bad = _bash(guard, {"WAVES": "3"}, tmp_path)
    assert bad.returncode == 1 and "testfleet init --github --force" in bad.stdout
    (tmp_path / "plan.json").write_text(json.dumps({"jobs": [*jobs, {"id": "x", "wave": 1}]}))
    big = _bash(guard, {"WAVES": "2"}, tmp_path)
    assert big.returncode == 1 and "wave 1 has 257 jobs" in big.stdout


@pytest.mark.parametrize(("results", "code"), [
    ("success skipped success", 0), ("skipped skipped", 0), ("success failure", 1),
    ("success cancelled", 1),
])
def test_summary_job_fails_on_any_failed_job(results: str, code: int, tmp_path: Path) -> None:
    data = parsed(render_workflow(example().config))
    script = data["jobs"]["testfleet"]["steps"][0]["run"]
    assert _bash(script, {"RESULTS": results}, tmp_path).returncode == code


def test_run_step_refuses_a_plan_from_another_run(tmp_path: Path) -> None:
    data = parsed(render_workflow(example().config))
    script = next(s for s in data["jobs"]["wave-0"]["steps"] if s.get("name") == "Run")["run"]
    (tmp_path / "plan.json").write_text('{"digest":"sha256:aaaa"}\n')
    result = _bash(script, {"TESTFLEET_PLAN_DIGEST": "sha256:bbbb", "TESTFLEET_JOB_ID": "x"},
                   tmp_path)
    assert result.returncode == 2 and "not the plan of this run" in result.stdout


def test_rendering_is_deterministic() -> None:
    config = example().config
    assert render_workflow(config) == render_workflow(config)


def test_waves_agree_with_the_planner_dormant_stages_included(tmp_path: Path) -> None:
    from testfleet.planning import make_plan
    from testfleet.planning.request import PlanRequest
    from testfleet.policy import Trigger

    config = validate_config({"stages": {
        "unit": {"backend": "cpu"}, "lint": {"backend": "cpu", "disabled": "off for now"},
        "gpu": {"backend": "cuda", "needs": ["unit"]},
        "soak": {"backend": "cuda", "needs": ["gpu", "lint"]},
        "late": {"backend": "cpu", "needs": ["lint"], "disabled": "off too"}}})
    project = Project(tmp_path, tmp_path / "testfleet.toml", config, "")
    plan = make_plan(project, [], PlanRequest(trigger=Trigger(event="push")))
    assert {s.name: s.wave for s in plan.stages} == stage_waves(config)
    assert plan.waves == wave_count(config) == 3
