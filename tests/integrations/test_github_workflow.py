"""The generated GitHub Actions workflow: linted by actionlint and zizmor, valid against
the workflow schema, and structurally what the plan's outputs need."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from testfleet.config import Project, load_project, validate_config
from testfleet.integrations.github_stages import render_stages_workflow
from testfleet.integrations.github_trusted import render_trusted_workflow
from testfleet.integrations.github_workflow import (
    DEFAULT_BRANCH_RUN,
    PINNED_ACTIONS,
    WorkflowOptions,
    render_workflow,
    stage_job_ids,
    stage_waves,
    wave_count,
)
from testfleet.integrations.plan_formats import github_outputs

from .ci_inline import inline
from .conftest import run_tool, tool
from .gha_calls import rendered

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


GPU_CI: dict[str, Any] = {
    "backend": "cuda", "needs": ["unit"], "runs_on": ["self-hosted", "gpu"],
    "container": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                  "options": "--gpus all --ipc=host --shm-size=32g --ulimit memlock=-1",
                  "volumes": ["/models:/models:ro", "/data/hf:/root/.cache/huggingface"]},
    "secrets": ["HF_TOKEN", "WANDB_API_KEY"], "fail_fast": False, "max_parallel": 2,
    "job_timeout_factor": 2.0, "env": {"HF_HOME": "/root/.cache/huggingface"},
    "setup": ["pip install -e .", "nvidia-smi"],
}


def ci_config(**gpu: Any) -> Any:
    """A CPU stage with setup and env, and a GPU stage (with a dot in its name) that uses
    every per-stage CI setting; ``gpu`` overrides keys of the GPU stage."""
    return validate_config({"stages": {
        "unit": {"backend": "cpu", "setup": ['echo "setting up $HF_HOME"'],
                 "env": {"HF_HOME": "/tmp/hf cache"}, "fail_fast": True},
        "gpu.h200": {**GPU_CI, **gpu},
    }})


def parsed(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True) if True in data else data["on"]
    return data


def lint(tmp_path: Path, text: str, trusted: str | None = None,
         config: Any = None, opts: WorkflowOptions | None = None) -> list[subprocess.CompletedProcess[str]]:
    """actionlint (with the runner labels ``init`` writes to .github/actionlint.yaml),
    zizmor and the workflow schema, over the workflow, the trusted one when given and the
    stages workflow both call (rendered from ``config`` and ``opts``)."""
    from testfleet.integrations.github_options import render_actionlint_config
    from testfleet.integrations.github_stages import render_stages_workflow

    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True, exist_ok=True)
    files = [workflows / "testfleet.yml"]
    files[0].write_text(text)
    if trusted is not None:
        files.append(workflows / "testfleet-trusted.yml")
        files[1].write_text(trusted)
    stages = render_stages_workflow(config, opts) if config is not None else None
    if stages is not None:
        files.append(workflows / "testfleet-stages.yml")
        files[-1].write_text(stages)
    if config is not None:
        from testfleet.integrations.action import ACTION_PATH, render_action
        from testfleet.integrations.github_job_action import JOB_ACTION_PATH, render_job_action

        for path, body in ((ACTION_PATH, render_action()),
                           (JOB_ACTION_PATH, render_job_action(config, WorkflowOptions()))):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(body)
            files.append(tmp_path / path)
    labels = tmp_path / ".github" / "actionlint.yaml"
    labels.write_text(render_actionlint_config(config) if config is not None
                      else "self-hosted-runner:\n  labels: []\n")
    tool("shellcheck")  # actionlint lints every run: script with it when it is on PATH
    paths = [str(f) for f in files if f.name != "action.yml"]
    return [
        run_tool(tool("actionlint"), "-no-color", "-config-file", str(labels), *paths, cwd=tmp_path),
        run_tool(tool("zizmor"), "--offline", "--persona", "auditor", "--no-progress",
                 *[str(f) for f in files]),
        run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *paths),
    ]


VARIANTS = {
    "example": (lambda: example().config, WorkflowOptions()),
    "example-options": (lambda: example().config, WorkflowOptions(
        install="pip install -e '.[gpu]'\npip install testfleet==0.1.0",
        push_branches=("main", "release/v1"), diff_pruning=False,
        database_secret="TESTFLEET_DATABASE_URL", python_version="3.11")),
    "three-waves": (lambda: chain_config(label_prefix="ci-'x'-", schedules={}), WorkflowOptions()),
    "no-stages": (lambda: validate_config({}), WorkflowOptions()),
    "ci-settings": (ci_config, WorkflowOptions(database_secret="TESTFLEET_DATABASE_URL")),
    "database-read": (ci_config, WorkflowOptions(database_secret="DB_URL",
                                                 database_read_secret="DB_READ_URL")),
    "history-off": (chain_config, WorkflowOptions(history=False)),
    # stage variants (#12): one job per variant, each with its own container and secrets
    "stage-variants": (lambda: validate_config({"stages": {
        "unit": {"backend": "cpu"},
        "gpu": {**GPU_CI, "variants": {"h200": {"runs_on": ["self-hosted", "h200"]},
                                       "b200": {"runs_on": ["self-hosted", "b200"],
                                                "container": "rocm/dev:1", "secrets": ["B_TOKEN"]}}},
        "soak": {"backend": "cuda", "needs": ["gpu"]}}}), WorkflowOptions()),
    # #28: miles' setup, item by item (a wait loop that ends in `exit 0`, a GITHUB_ENV
    # write, a multi-line script), python, uv and extra checkouts, one with a token
    "miles-like": (lambda: validate_config({"stages": {"gpu": {
        **GPU_CI, "needs": [], "python": "3.11", "uv": True,
        "checkouts": [{"repository": "NVIDIA/Megatron-LM", "ref": "core_v0.12.0",
                       "path": "Megatron-LM"},
                      {"repository": "sgl-project/sglang", "path": "sglang",
                       "token_secret": "GH_PAT"}],
        "env": {"A": "- foo", "B": "0x1F", "C": ".inf", "D": "0b101", "E": "null", "F": "on"},
        "setup": ["for _ in 1 2 3; do\n  if nvidia-smi; then exit 0; fi\n  sleep 10\ndone\nexit 1",
                  'echo "PYTHONPATH=$GITHUB_WORKSPACE/sglang" >> "$GITHUB_ENV"',
                  "pip install -r requirements.txt"]}}}), WorkflowOptions()),
    # an `auto` lane: the plan job keeps two cache files (a multi-line `path:`)
    "auto-styles": (lambda: validate_config({"cache_dir": ".cache/tf", "stages": {
        "unit": {"backend": "cpu", "command": "auto"}}}), WorkflowOptions(config="ci/testfleet.toml")),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_workflow_passes_actionlint_zizmor_and_the_schema(variant: str, tmp_path: Path) -> None:
    """Both workflows (the trusted one when any stage is self-hosted or trusted_only)."""
    config_fn, opts = VARIANTS[variant]
    config = config_fn()
    trusted = render_trusted_workflow(config, opts)
    assert (trusted is None) == (variant in ("no-stages", "auto-styles"))
    for result in lint(tmp_path, render_workflow(config, opts), trusted, config, opts):
        assert result.returncode == 0, f"{result.args[0]}:\n{result.stdout}\n{result.stderr}"


def test_the_linters_do_catch_an_injected_expression(tmp_path: Path) -> None:
    """The lint test is not vacuous: the same tools reject a PR title in a run script."""
    text = render_workflow(example().config)
    bad = text.replace('          echo "job results: $RESULTS"\n',
                       '          echo "${{ github.event.pull_request.title }}"\n'
                       '          echo "job results: $RESULTS"\n', 1)
    assert bad != text
    actionlint, zizmor, _ = lint(tmp_path, bad)
    assert actionlint.returncode != 0 and "untrusted" in actionlint.stdout
    assert zizmor.returncode != 0 and "template-injection" in zizmor.stdout + zizmor.stderr
    # and actionlint really runs shellcheck on the scripts
    unquoted = text.replace('          echo "job results: $RESULTS"\n',
                            '          mkdir -p $TESTFLEET_JOB_ID\n          echo "job results: $RESULTS"\n', 1)
    assert unquoted != text
    actionlint, _, _ = lint(tmp_path, unquoted)
    assert actionlint.returncode != 0 and "SC2086" in actionlint.stdout


def _steps(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in data["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_expression_ever_reaches_a_run_script(variant: str) -> None:
    config_fn, opts = VARIANTS[variant]
    data = rendered(config_fn(), opts)
    runs = [s["run"] for s in _steps(data) if "run" in s]
    assert runs
    for script in runs:
        assert "${{" not in script, script


@pytest.mark.parametrize("which", ["workflow", "stages"])
def test_actions_are_pinned_to_commits_with_their_version(which: str) -> None:
    from testfleet.integrations.github_stages import render_stages_workflow

    render = render_workflow if which == "workflow" else render_stages_workflow
    text = render(example().config)
    assert text is not None
    uses = re.findall(r"uses: (\S+)@(\S+) # (v[\d.]+)", text)
    # the vendored actions and the stages workflow are in the repository; the ignore says
    # why on its line
    local = len(re.findall(r"uses: \./\.github/(?:actions/testfleet(?:-job)?|workflows/"
                           r"testfleet-stages\.yml) # zizmor: ignore\[self-repository\] \w", text))
    assert local and len(uses) + local == text.count("uses:")  # the vendored action is in the repo
    for action, ref, version in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref)
        assert PINNED_ACTIONS[action] == (ref, version)


def test_plan_job_is_read_only_and_secret_free() -> None:
    opts = WorkflowOptions(database_secret="TESTFLEET_DATABASE_URL")
    data = inline(rendered(example().config, opts), example().config, opts)
    # every job reads contents only (set once for the workflow); the final check not even that
    assert data["permissions"] == {"contents": "read"}
    assert all(job.get("permissions", {"contents": "read"}) == {"contents": "read"}
               for name, job in data["jobs"].items() if name != "testfleet")
    assert data["jobs"]["testfleet"]["permissions"] == {}
    plan = data["jobs"]["plan"]
    assert "permissions" not in plan
    assert plan["runs-on"] == "ubuntu-latest"
    assert "secrets." not in json.dumps(plan)
    for step in plan["steps"]:
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
    # the database secret reaches only the stage job's shared action, which runs the tests
    # (and only on default-branch runs), and the history job's snapshot of the database
    for name, job in data["jobs"].items():
        for step in job.get("steps", []):
            has_secret = "secrets." in json.dumps(step)
            assert has_secret == ((name not in ("plan", "testfleet", "history")
                                  and "TESTFLEET_DATABASE_URL" in step.get("env", {}))
                                  or (name, step.get("name")) == ("history", "Snapshot the database"))
            if has_secret and name != "history":
                assert step["env"]["TESTFLEET_DATABASE_URL"].startswith(
                    "${{ github.ref == format('refs/heads/{0}', github.event.repository.default_branch)")


def test_plan_step_runs_the_planner_and_uploads_the_plan() -> None:
    data = rendered(example().config)
    steps = data["jobs"]["plan"]["steps"]
    plan_step = next(s for s in steps if s.get("id") == "plan")
    assert plan_step["uses"] == "./.github/actions/testfleet"
    assert plan_step["with"] == {
        "command": "plan", "cadence": "${{ inputs.cadence }}", "diff-base": "HEAD^1",
        # the plan is refused when this file was not generated for it (testfleet's own check)
        "args": "--fits-workflow\n.github/workflows/testfleet.yml\n",
        # a pull request plans only the GitHub-hosted stages here (the others: trusted workflow)
        "stages": "${{ github.event_name == 'pull_request' && 'stage-a-cpu,stage-b-cpu' || '' }}"}
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "testfleet-plan" and upload["with"]["path"] == "plan.json"
    # the install is the action's default: exactly this testfleet version
    assert "install" not in plan_step["with"]
    custom = rendered(example().config, WorkflowOptions(
        install="pip install -r requirements-ci.txt"))
    custom_plan = next(s for s in custom["jobs"]["plan"]["steps"] if s.get("id") == "plan")
    assert custom_plan["with"]["install"] == "pip install -r requirements-ci.txt"
    no_prune = rendered(example().config, WorkflowOptions(diff_pruning=False))
    assert "diff-base" not in json.dumps(no_prune)


def test_stage_jobs_consume_their_stage_matrix() -> None:
    config = chain_config()
    raw = rendered(config)
    for name in ("unit", "lint", "gpu", "soak"):  # the shared steps are the job action's
        (action,) = [s for s in raw["jobs"][name]["steps"] if "testfleet-job" in s.get("uses", "")]
        assert action["with"] == {"job": "${{ matrix.id }}",
                                  "plan-digest": "${{ needs.plan.outputs.digest }}",
                                  "rescue": "${{ matrix.rescue }}"}  # empty: not a rescue job
    data = inline(raw, config)
    assert wave_count(config) == 3
    assert stage_waves(config) == {"unit": 0, "lint": 0, "gpu": 1, "soak": 2}
    assert stage_job_ids(config) == {"unit": "unit", "lint": "lint", "gpu": "gpu", "soak": "soak"}
    rescues = ["lint-rescue", "unit-rescue", "gpu-rescue", "soak-rescue"]
    assert set(data["jobs"]) == {"plan", "unit", "lint", "gpu", "soak", "history", "reconcile",
                                 "testfleet", "rescued", *rescues}
    for name in ("unit", "lint", "gpu", "soak"):
        job = data["jobs"][name]
        needs = config.stages[name].needs
        assert job["needs"] == ["plan", *needs]
        cond = job["if"]
        # the stages call runs only after a plan with jobs (the plan's success is its default)
        assert cond.startswith("${{ (needs.plan.outputs.has_jobs == 'true') && ")
        assert f"fromJSON(needs.plan.outputs.stages)['{name}'].has_jobs" in cond
        assert "!cancelled()" in cond
        assert ("!failure() || !(needs.plan.outputs.bypass_fastfail != 'true')" in cond) \
            == bool(needs)
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(needs.plan.outputs.stages)['{name}'].matrix }}}}"
        # no fail_fast in the stage table: fail fast within the stage unless the run bypasses it
        assert job["strategy"]["fail-fast"] == "${{ (needs.plan.outputs.bypass_fastfail != 'true') }}"
        assert "max-parallel" not in job["strategy"] and "container" not in job
        assert job["runs-on"] == list(config.stages[name].runs_on) or job["runs-on"] == \
            config.stages[name].runs_on[0]  # written from the config, never from the plan
        assert job["timeout-minutes"] == "${{ matrix.timeout_minutes }}"
        assert "permissions" not in job  # the workflow's: contents read
        run = next(s for s in job["steps"] if s.get("name") == "Run")
        assert run["uses"] == "./.github/actions/testfleet"
        # JUnit and the status file go to the action's defaults, uploaded below
        assert run["with"] == {"command": "run", "job": "${{ matrix.id }}",
                               "plan-digest": "${{ needs.plan.outputs.digest }}",
                               "rescue-digest": "${{ matrix.rescue }}"}
        status = next(s for s in job["steps"] if s.get("uses", "").startswith(
            "actions/upload-artifact@") and s["with"]["name"].startswith("testfleet-status-"))
        assert status["if"] == "${{ always() }}" and status["with"]["path"] == "testfleet-status/"
        download = next(s for s in job["steps"]
                        if s.get("uses", "").startswith("actions/download-artifact@"))
        assert download["with"]["name"] == "testfleet-plan"
        junit = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
                 and s["with"]["name"].startswith("junit-")]
        assert junit and junit[0]["if"] == "${{ !cancelled() }}"
    assert data["jobs"]["testfleet"]["needs"] == ["plan", "lint", "unit", "gpu", "soak",
                                                  "reconcile", *rescues, "rescued"]
    for rescue in rescues:  # the rescue wave's: after reconcile, never fast-failing
        job = data["jobs"][rescue]
        assert job["needs"][:2] == ["plan", "reconcile"]
        assert "fromJSON(needs.reconcile.outputs.rescue)" in job["strategy"]["matrix"]
        assert job["strategy"]["fail-fast"] in (False, "${{ false }}")
    reconcile = data["jobs"]["reconcile"]
    assert reconcile["needs"] == ["plan", "lint", "unit", "gpu", "soak"]
    assert reconcile["if"] == "${{ always() && needs.plan.result == 'success' }}"
    step = next(s for s in reconcile["steps"] if s.get("name") == "Reconcile")
    # the action's status-dir (testfleet-status); a missing one is a job that never reported
    assert step["with"] == {"command": "reconcile", "plan-digest": "${{ needs.plan.outputs.digest }}"}
    download = next(s for s in reconcile["steps"] if "pattern" in s.get("with", {}))
    assert download["with"] == {"pattern": "testfleet-status-*", "path": "testfleet-status"}
    assert "secrets." not in json.dumps(reconcile)


def test_stage_job_ids_are_valid_unique_and_never_the_workflow_own() -> None:
    two = {"backend": "cpu", "shards": 2}  # fail fast across two jobs: a job of its own
    config = validate_config({"stages": {
        "a.b": two, "a_b": two, "1st": two, "plan": two, "Testfleet": two}})
    ids = stage_job_ids(config)
    assert ids == {"1st": "stage-1st", "Testfleet": "stage-Testfleet", "a.b": "a_b",
                   "a_b": "a_b-2", "plan": "stage-plan"}
    data = rendered(config)
    assert set(data["jobs"]) == {"plan", "history", "reconcile", "testfleet", "rescued",
                                 *ids.values(), *(f"{i}-rescue" for i in ids.values())}
    assert "fromJSON(needs.plan.outputs.stages)['a.b'].has_jobs" in data["jobs"]["a_b"]["if"]


def test_outputs_match_what_the_planner_writes(example_project: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Every needs.plan.outputs.X used downstream is declared by the plan job, and
    every declared output is one the planner really writes for this config."""
    from testfleet.planning import make_plan
    from testfleet.planning.policy import Trigger
    from testfleet.planning.request import PlanRequest
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
    data = rendered(config, WorkflowOptions(push_branches=("main",)))
    on = data["on"]
    assert {s["cron"] for s in on["schedule"]} == set(config.policy.schedules)
    assert on["pull_request"]["types"] == ["opened", "synchronize", "reopened", "labeled"]
    assert "pull_request_target" not in on
    assert set(on["workflow_dispatch"]["inputs"]["cadence"]["options"]) == set(config.policy.cadences)
    assert on["workflow_call"]["inputs"]["cadence"]["type"] == "string"
    assert on["push"]["branches"] == ["main"]
    assert "schedule" not in rendered(chain_config())["on"]


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


def _guard(config: Any) -> Callable[[Path], Any]:
    """The plan job's check that the plan fits the workflow written for ``config``
    (testfleet plan --fits-workflow), as (returncode, stdout) of the plan in a directory."""
    from types import SimpleNamespace

    from testfleet.integrations.github_stages import render_stages_workflow
    from testfleet.integrations.workflow_fit import misfits, workflow_lanes

    lanes = workflow_lanes(render_workflow(config), render_stages_workflow(config) or "")

    def check(where: Path) -> Any:
        reasons = misfits(json.loads((where / "plan.json").read_text()), lanes)
        return SimpleNamespace(returncode=1 if reasons else 0, stdout="\n".join(reasons),
                               stderr="")
    return check


def _plan_file(tmp_path: Path, config: Any, jobs_per_stage: dict[str, int]) -> None:
    from testfleet.planning.jobci import job_ci

    jobs = []
    for stage, n in jobs_per_stage.items():
        ci = job_ci(config.stages[stage])
        jobs += [{"id": f"{stage}-{i}", "stage": stage, "wave": 0, "ci": ci.to_json(),
                  "env": ci.env, "runs_on": list(config.stages[stage].runs_on)}
                 for i in range(n)]
    (tmp_path / "plan.json").write_text(json.dumps({"jobs": jobs}))


def test_guard_fails_when_the_plan_outgrew_the_workflow(tmp_path: Path) -> None:
    config = example().config
    guard = _guard(config)
    _plan_file(tmp_path, config, {"stage-a-cpu": 256, "stage-b-cpu": 1})
    assert guard(tmp_path).returncode == 0
    _plan_file(tmp_path, config, {"stage-a-cpu": 257})
    big = guard(tmp_path)
    assert big.returncode == 1 and "stage stage-a-cpu has 257 jobs" in big.stdout
    # a stage the workflow has no job for (added to the config after generating it)
    newer = validate_config({"stages": {**{n: s.model_dump(exclude_defaults=True)
                                          for n, s in config.stages.items()},
                                       "stage-z": {"backend": "cpu"}}})
    _plan_file(tmp_path, newer, {"stage-z": 1})
    bad = guard(tmp_path)
    assert bad.returncode == 1 and "stage stage-z has jobs but no job" in bad.stdout
    assert "testfleet init --github --force" in bad.stdout


def test_guard_fails_when_a_stage_ci_setting_changed_since_generation(tmp_path: Path) -> None:
    before = ci_config()
    guard = _guard(before)
    _plan_file(tmp_path, before, {"gpu.h200": 2, "unit": 1})
    ok = guard(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for change in ({"secrets": ["HF_TOKEN"]}, {"setup": ["pip install -e ."]},
                   {"fail_fast": True}, {"env": {"HF_HOME": "/other"}},
                   {"container": {"image": "nvcr.io/nvidia/pytorch:24.05-py3"}},
                   {"python": "3.11"}, {"uv": True},
                   {"checkouts": [{"repository": "NVIDIA/Megatron-LM", "path": "Megatron-LM"}]}):
        after = ci_config(**change)
        _plan_file(tmp_path, after, {"gpu.h200": 2, "unit": 1})
        bad = guard(tmp_path)
        assert bad.returncode == 1, change
        assert bad.stdout.count("the CI settings of stage gpu.h200") == 1, bad.stdout
    # the timeout travels per job in the matrix: changing it needs no regeneration
    _plan_file(tmp_path, ci_config(job_timeout_factor=5.0), {"gpu.h200": 2, "unit": 1})
    assert guard(tmp_path).returncode == 0


def test_guard_fails_when_a_plan_names_other_runners(tmp_path: Path) -> None:
    """The runners are written in the workflow; a plan whose runs_on differs (a config
    changed since, or a plan made by other code) stops the run instead of being obeyed."""
    before = ci_config()
    guard = _guard(before)
    _plan_file(tmp_path, ci_config(runs_on=["self-hosted", "h200-8x"]), {"gpu.h200": 1})
    bad = guard(tmp_path)
    assert bad.returncode == 1 and "the runs_on of stage gpu.h200 changed" in bad.stdout
    data = rendered(before)
    assert data["jobs"]["gpu_h200"]["runs-on"] == ["self-hosted", "gpu"]
    assert data["jobs"]["unit"]["runs-on"] == "ubuntu-latest"
    assert "matrix.runs_on" not in render_workflow(before)


@pytest.mark.parametrize(("results", "code"), [
    ("success skipped success", 0), ("skipped skipped", 0), ("success failure", 1),
    ("success cancelled", 1),
])
def test_summary_job_fails_on_any_failed_job(results: str, code: int, tmp_path: Path) -> None:
    data = rendered(example().config)
    script = data["jobs"]["testfleet"]["steps"][0]["run"]
    assert _bash(script, {"RESULTS": results}, tmp_path).returncode == code


def test_summary_job_fails_when_registrations_were_rejected(tmp_path: Path) -> None:
    """The plan ran every valid test (plan exit 1 does not stop the run); the one required
    check still fails, so a PR that breaks a registration cannot pass."""
    data = rendered(example().config)
    job = data["jobs"]["testfleet"]
    assert "needs.plan.outputs.tree_errors" in job["steps"][0]["env"]["TREE_ERRORS"]
    assert "tree_errors" in data["jobs"]["plan"]["outputs"]
    script = job["steps"][0]["run"]
    failed = _bash(script, {"RESULTS": "success success", "TREE_ERRORS": "true"}, tmp_path)
    assert failed.returncode == 1 and "registrations were rejected" in failed.stdout
    assert _bash(script, {"RESULTS": "success", "TREE_ERRORS": "false"}, tmp_path).returncode == 0


def test_rendering_is_deterministic() -> None:
    config = example().config
    assert render_workflow(config) == render_workflow(config)


def test_waves_agree_with_the_planner_dormant_stages_included(tmp_path: Path) -> None:
    from testfleet.planning import make_plan
    from testfleet.planning.policy import Trigger
    from testfleet.planning.request import PlanRequest

    config = validate_config({"stages": {
        "unit": {"backend": "cpu"}, "lint": {"backend": "cpu", "disabled": "off for now"},
        "gpu": {"backend": "cuda", "needs": ["unit"]},
        "soak": {"backend": "cuda", "needs": ["gpu", "lint"]},
        "late": {"backend": "cpu", "needs": ["lint"], "disabled": "off too"}}})
    project = Project(tmp_path, tmp_path / "testfleet.toml", config, "")
    plan = make_plan(project, [], PlanRequest(trigger=Trigger(event="push")))
    assert {s.name: s.wave for s in plan.stages} == stage_waves(config)
    assert plan.waves == wave_count(config) == 3


def test_per_stage_ci_settings_land_in_their_own_job() -> None:
    """Read from the parsed YAML: container options and volumes, setup before Run, the
    stage's secrets only in its own Setup and Run steps, fail-fast and max-parallel per
    stage, the stage env on the job."""
    from testfleet.integrations.setup_scripts import setup_scripts
    from testfleet.integrations.workflow_fit import SETTINGS_ENV
    from testfleet.planning.jobci import job_ci

    config = ci_config()
    opts = WorkflowOptions(database_secret="DB_URL")
    data = inline(rendered(config, opts), config, opts)
    gpu, unit = data["jobs"]["gpu_h200"], data["jobs"]["unit"]
    assert gpu["container"] == {
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "options": "--gpus all --ipc=host --shm-size=32g --ulimit memlock=-1",
        "volumes": ["/models:/models:ro", "/data/hf:/root/.cache/huggingface"]}
    assert "container" not in unit
    assert gpu["strategy"]["fail-fast"] is False and gpu["strategy"]["max-parallel"] == 2
    # fail_fast = true: the plan's jobs fail fast, the rescue wave's never do
    assert unit["strategy"]["fail-fast"] == "${{ !false }}" and "max-parallel" not in unit["strategy"]
    assert data["jobs"]["unit-rescue"]["strategy"]["fail-fast"] == "${{ !true }}"
    # the stage env, and the digest of the settings written here (the plan job's check)
    assert gpu["env"] == {"HF_HOME": "/root/.cache/huggingface",
                          SETTINGS_ENV: job_ci(config.stages["gpu.h200"]).fingerprint()}
    assert unit["env"] == {"HF_HOME": "/tmp/hf cache",
                           SETTINGS_ENV: job_ci(config.stages["unit"]).fingerprint()}
    # setup runs after the checkout and before the plan job runs, in the job's container
    first, second = ("bash .github/testfleet/gpu.h200/setup-1.sh",
                     "bash .github/testfleet/gpu.h200/setup-2.sh")
    names = [s.get("name") or s.get("run") or s["uses"].split("@")[0] for s in gpu["steps"]]
    both = f"{first}\n{second}\n"  # neither writes $GITHUB_ENV: one step, one line each
    assert names.index("actions/checkout") < names.index(both) < names.index("Run")
    # a container job has no setup-python (the image brings Python); a plain one does
    assert "actions/setup-python" not in names
    assert any(s.get("uses", "").startswith("actions/setup-python@") for s in unit["steps"])
    # each setup item runs its own script file in its own bash: an `exit 0` in one
    # cannot skip the next, and a reviewer (and shellcheck) reads it as a file
    setups = [s for s in gpu["steps"] if s.get("run", "").startswith("bash .github/testfleet/")]
    assert [s["run"] for s in setups] == [both]
    files = setup_scripts(config).files
    assert [files[r.removeprefix("bash ")].splitlines()[-1] for r in (first, second)] == [
        "pip install -e .", "nvidia-smi"]
    assert all(files[r.removeprefix("bash ")].splitlines()[-2] == "set -eo pipefail"
               for r in (first, second))
    secrets = {"HF_TOKEN": "${{ secrets.HF_TOKEN }}", "WANDB_API_KEY": "${{ secrets.WANDB_API_KEY }}"}
    assert all(s["env"] == secrets for s in setups)
    run = next(s for s in gpu["steps"] if s.get("name") == "Run")
    assert {k: v for k, v in run["env"].items() if k in secrets} == secrets
    raw = rendered(config, opts)
    for name, job in raw["jobs"].items():
        for step in job.get("steps", []):
            text = json.dumps(step)
            if "HF_TOKEN" in text:  # its setup items and its job action, nothing else
                assert name in ("gpu_h200", "gpu_h200-rescue") and (step.get("run") == both
                                               or "testfleet-job" in step.get("uses", ""))
    assert "secrets.HF_TOKEN" not in json.dumps(unit)


def test_a_setup_item_that_writes_the_job_env_ends_its_step() -> None:
    """What an item writes to $GITHUB_ENV or $GITHUB_PATH reaches only later steps, so
    the item after it starts a new step; items that write neither share one."""
    from testfleet.integrations.github_steps import setup_files

    items = ["echo one", 'echo "X=1" >> "$GITHUB_ENV"', "echo $X", "echo /opt >> $GITHUB_PATH",
             "which tool", "echo last"]
    out = setup_files("gpu", items, {"T": "${{ secrets.T }}"})
    assert [s["run"] for s in out] == [
        "bash .github/testfleet/gpu/setup-1.sh\nbash .github/testfleet/gpu/setup-2.sh\n",
        "bash .github/testfleet/gpu/setup-3.sh\nbash .github/testfleet/gpu/setup-4.sh\n",
        "bash .github/testfleet/gpu/setup-5.sh\nbash .github/testfleet/gpu/setup-6.sh\n"]
    assert all(s["env"] == {"T": "${{ secrets.T }}"} for s in out)
    assert [s["run"] for s in setup_files("gpu", ["echo >> $GITHUB_ENV"], {})] == [
        "bash .github/testfleet/gpu/setup-1.sh"]


def test_the_plan_carries_the_settings_into_the_stage_matrix(tmp_path: Path) -> None:
    """The matrix a stage job reads (by its name, from the 'stages' output) holds the
    shard's timeout, sized from its estimate by job_timeout_factor."""
    from testfleet.planning.jobci import JOB_OVERHEAD_MINUTES, job_ci, job_timeout
    from testfleet.planning.model import Job, Plan, PlannedTest, seal

    config = ci_config()
    ci = job_ci(config.stages["gpu.h200"])
    jobs = tuple(Job(id=f"gpu.h200-{i}-of-2", stage="gpu.h200", backend="cuda",
                     runs_on=("self-hosted", "gpu"), container=ci.container.image if ci.container else None,
                     command="pytest", shard=i, shards=2, wave=1, needs=("unit",), estimate=est,
                     tests=(PlannedTest("tests/test_x.py", est),), env=ci.env, ci=ci,
                     timeout_minutes=job_timeout(ci, est))
                 for i, est in ((1, 1800.0), (2, 60.0)))
    plan = seal(Plan(policy={}, jobs=jobs, stages=(), skipped=(), warnings=()))
    entries = [j.matrix_entry() for j in plan.jobs]
    assert [e["timeout_minutes"] for e in entries] == [60 + JOB_OVERHEAD_MINUTES,
                                                       2 + JOB_OVERHEAD_MINUTES]
    assert entries[0]["ci"]["container"]["options"].startswith("--gpus all")
    assert entries[0]["ci"]["secrets"] == ["HF_TOKEN", "WANDB_API_KEY"]


# -- the history loop -----------------------------------------------------------------

def _github(event: str, ref: str, default_branch: str = "main") -> dict[str, Any]:
    return {"github": {"event_name": event, "ref": ref,
                       "event": {"repository": {"default_branch": default_branch}}}}


WRITES = [
    ("push", "refs/heads/main", True),
    ("schedule", "refs/heads/main", True),
    ("workflow_dispatch", "refs/heads/main", True),
    ("pull_request", "refs/pull/7/merge", False),
    ("pull_request_target", "refs/heads/main", False),  # runs on the base ref: still a PR
    ("push", "refs/heads/feature", False),
    ("workflow_dispatch", "refs/heads/feature", False),
    ("push", "refs/tags/v1.0", False),
]


@pytest.mark.parametrize(("event", "ref", "writes"), WRITES)
def test_only_default_branch_runs_write_history(event: str, ref: str, writes: bool) -> None:
    """The trust rule, evaluated as GitHub evaluates the generated conditions: the history
    job (merge + cache save) and each job's bundle export run on the default branch only."""
    from .gha_expr import evaluate, truthy

    data = inline(rendered(chain_config()), chain_config())
    ctx = {**_github(event, ref), "needs": {"plan": {"result": "success"}}}
    status = {"cancelled": False, "failure": False}
    assert truthy(evaluate(data["jobs"]["history"]["if"], ctx, status)) is writes
    for name in ("unit", "gpu"):
        record = next(s for s in data["jobs"][name]["steps"] if s.get("name") == "Record the history")
        cond = record["if"].removeprefix("${{").removesuffix("}}")
        assert truthy(evaluate(cond, ctx, status)) is writes
    db_opts = WorkflowOptions(database_secret="DB_URL")
    db = inline(rendered(chain_config(), db_opts), chain_config(), db_opts)
    run = next(s for s in db["jobs"]["unit"]["steps"] if s.get("name") == "Run")
    expr = run["env"]["TESTFLEET_DATABASE_URL"].removeprefix("${{").removesuffix("}}")
    secret = evaluate(expr, {**ctx, "secrets": {"DB_URL": "postgresql://w@db/h"}}, status)
    assert secret == ("postgresql://w@db/h" if writes else "")


def test_cache_loop_restores_records_merges_and_saves() -> None:
    data = inline(rendered(chain_config()), chain_config())
    plan_steps = data["jobs"]["plan"]["steps"]
    names = [s.get("name") for s in plan_steps]
    assert names.index("Restore the history") < names.index("Plan")
    restore = plan_steps[names.index("Restore the history")]
    assert restore["uses"].startswith("actions/cache/restore@")
    assert restore["with"] == {"path": ".testfleet/history.db",
                               "key": "testfleet-history-${{ github.run_id }}",
                               "restore-keys": "testfleet-history-"}
    for name in ("unit", "lint", "gpu", "soak"):
        steps = data["jobs"][name]["steps"]
        names = [s.get("name") or s["uses"].split("@")[0] for s in steps]
        record = steps[names.index("Record the history")]
        # the job restores the history too (read only: the gate's baselines), before it runs
        assert names.index("actions/download-artifact") < names.index(
            "Restore the history") < names.index("Run") < names.index("Record the history")
        assert "actions/cache/save" not in names
        assert steps[names.index("Restore the history")]["with"] == restore["with"]
        # ... so it records only this run's records, not the restored history
        assert record["with"] == {"command": "history-export", "install": "none",
                                  "args": "--run-id\n${{ github.run_id }}\n--plan\nplan.json\n"
                                          "--output\ntestfleet-history/records.bundle\n"}
        upload = steps[names.index("Record the history") + 1]
        assert upload["uses"].startswith("actions/upload-artifact@")
        assert upload["with"]["name"] == "testfleet-history-${{ matrix.id }}"
        assert upload["if"] == record["if"]
    history = data["jobs"]["history"]
    # the rescue jobs record history too
    assert history["needs"] == ["plan", "lint", "unit", "gpu", "soak", "lint-rescue",
                                "unit-rescue", "gpu-rescue", "soak-rescue"]
    assert "permissions" not in history  # the workflow's: contents read
    assert history["concurrency"]["cancel-in-progress"] is False
    steps = history["steps"]
    names = [s.get("name") or s["uses"].split("@")[0] for s in steps]
    assert names == ["actions/checkout", "actions/setup-python", "Restore the history",
                     "actions/download-artifact", "actions/download-artifact",
                     "Merge this run's records", "Save the history"]
    assert steps[3]["with"] == {"pattern": "testfleet-history-*", "path": "testfleet-history-in"}
    # the run's plan: a lane it gave jobs that recorded nothing moves its breaker (#41)
    assert steps[4]["with"] == {"name": "testfleet-plan"}
    assert steps[5]["with"] == {
        "command": "history-merge",
        "args": "testfleet-history-in\n--require-ref\n"
                "refs/heads/${{ github.event.repository.default_branch }}\n--plan\nplan.json\n"}
    save = steps[6]
    assert save["uses"].startswith("actions/cache/save@")
    assert save["with"] == {"path": ".testfleet/history.db",
                            "key": "testfleet-history-${{ github.run_id }}-${{ github.run_attempt }}"}
    assert "secrets." not in json.dumps(history)
    # the required check does not wait for the history job (it never runs on a PR)
    assert "history" not in data["jobs"]["testfleet"]["needs"]


def test_database_mode_writes_directly_and_reads_through_the_read_secret() -> None:
    read_opts = WorkflowOptions(database_secret="DB_URL", database_read_secret="DB_READ_URL")
    with_read = inline(rendered(chain_config(), read_opts), chain_config(),
                       read_opts)
    assert "history" not in with_read["jobs"]  # no merge job, no snapshot
    plan = next(s for s in with_read["jobs"]["plan"]["steps"] if s.get("id") == "plan")
    assert plan["env"] == {"TESTFLEET_DATABASE_URL": "${{ secrets.DB_READ_URL }}"}
    assert "Restore the history" not in json.dumps(with_read["jobs"]["plan"])
    for name in ("unit", "gpu"):
        assert "Record the history" not in json.dumps(with_read["jobs"][name])
    without_read = rendered(chain_config(), WorkflowOptions(database_secret="DB_URL"))
    assert "Restore the history" in json.dumps(without_read["jobs"]["plan"])  # falls back to the cache
    steps = without_read["jobs"]["history"]["steps"]
    snapshot = next(s for s in steps if s.get("name") == "Snapshot the database")
    assert snapshot["env"] == {"TESTFLEET_DATABASE_URL": "${{ secrets.DB_URL }}"}
    assert steps[-1]["uses"].startswith("actions/cache/save@")


def test_history_off_generates_no_loop() -> None:
    for opts, config in ((WorkflowOptions(history=False), chain_config()),
                         (WorkflowOptions(), validate_config({"database": "sqlite:///h.db",
                                                              "stages": {"u": {"backend": "cpu"}}}))):
        text = render_workflow(config, opts)
        assert "history" not in parsed(text)["jobs"]
        assert "testfleet-history" not in text and "Record the history" not in text
        # the collection cache is not history: it is kept either way
        assert [s.get("name") for s in parsed(text)["jobs"]["plan"]["steps"]
                if "actions/cache" in s.get("uses", "")] == ["Restore the collection cache",
                                                             "Save the collection cache"]


def test_plan_job_keeps_the_collection_cache_and_only_the_default_branch_saves_it() -> None:
    data = rendered(chain_config())
    steps = data["jobs"]["plan"]["steps"]
    names = [s.get("name") for s in steps]
    restore = steps[names.index("Restore the collection cache")]
    save = steps[names.index("Save the collection cache")]
    assert names.index("Restore the collection cache") < names.index("Plan") < names.index(
        "Save the collection cache")
    assert restore["uses"].startswith("actions/cache/restore@")
    assert restore["with"] == {"path": ".testfleet/registry-cache.bin",
                               "key": "testfleet-collection-${{ github.run_id }}",
                               "restore-keys": "testfleet-collection-"}
    assert save["uses"].startswith("actions/cache/save@")
    assert save["with"]["path"] == restore["with"]["path"]
    assert save["with"]["key"] == "testfleet-collection-${{ github.run_id }}-${{ github.run_attempt }}"
    assert save["if"] == "${{ " + DEFAULT_BRANCH_RUN + " }}"
    for job, body in data["jobs"].items():  # no other job touches it
        if job != "plan":
            assert "testfleet-collection" not in json.dumps(body)


@pytest.mark.parametrize("where", ["stage", "variant"])
def test_an_auto_lane_keeps_the_file_styles_with_the_collection(where: str) -> None:
    """A plan parses every file of a ``command = "auto"`` lane for its style unless the style
    cache is there too: ~3,000 files cost 14.7 s against 1.3 s (BENCHMARKS.md, "CI plan with a
    restored cache")."""
    stage: dict[str, Any] = {"backend": "cpu", "command": "auto"}
    if where == "variant":  # a stage of variants: every lane inherits the command
        stage["variants"] = {"a": {}, "b": {"runs_on": ["self-hosted", "b"]}}
    data = rendered(validate_config({"stages": {"unit": stage, "lint": {"backend": "cpu"}}}))
    steps = {s.get("name"): s for s in data["jobs"]["plan"]["steps"]}
    for name in ("Restore the collection cache", "Save the collection cache"):
        assert steps[name]["with"]["path"].splitlines() == [".testfleet/registry-cache.bin",
                                                            ".testfleet/style-cache.json"]


def test_a_stage_waits_in_the_workflow_for_what_any_event_makes_it_wait_for() -> None:
    """``needs_on`` (adopted from SGLang, whose PR jobs wait for other stages than its
    nightly ones): a workflow job's needs are the same on every event, so it waits for the
    union; on an event where a needed stage has no jobs that job is skipped, and a plan
    waits per event."""
    config = validate_config({"stages": {
        "unit": {"backend": "cpu"}, "lint": {"backend": "cpu"},
        "gpu": {"backend": "cuda", "runs_on": ["self-hosted", "h200"], "needs": ["unit"],
                "needs_on": {"pull_request": ["lint"]}}}})
    jobs = rendered(config)["jobs"]
    # unit and lint: the same settings, and gpu waits for both: one job (#39)
    lanes = {lane: job for job, body in jobs.items()
             if "needs.plan.outputs.stages" in str(body.get("strategy", {}).get("matrix"))
             for lane in body.get("env", {}).get("TESTFLEET_LANES", job).split()}
    assert set(jobs["gpu"]["needs"]) == {"plan", lanes["unit"], lanes["lint"]}
    assert lanes["unit"] == lanes["lint"] == "lint"


def test_waits_of_different_events_that_close_a_cycle_are_refused() -> None:
    from testfleet.errors import UsageError

    config = validate_config({"stages": {
        "a": {"backend": "cpu", "needs_on": {"push": ["b"]}},
        "b": {"backend": "cpu", "needs_on": {"pull_request": ["a"]}}}})
    with pytest.raises(UsageError, match=r"wait for each other on different events"):
        render_workflow(config)


def test_stages_with_the_same_settings_write_them_once(tmp_path: Path) -> None:
    """#39: two GPU stages on different runners with the same container, env and setup:
    the second job names the first one's steps, container and env (YAML anchors, read by
    GitHub, actionlint and zizmor), keeps its own runs-on and matrix, and parses to exactly
    the job it would be written out in full; a stage with other settings is written in
    full, and nothing is anchored that is not repeated."""
    from testfleet.integrations.setup_scripts import setup_scripts

    config = validate_config({"stages": {
        "unit": {"backend": "cpu", "setup": ["echo unit"], "fail_fast": True},
        "gpu.h200": {**GPU_CI},
        "gpu.h100": {**GPU_CI, "runs_on": ["self-hosted", "h100"]},
    }})
    text = render_stages_workflow(config)
    assert text is not None
    for key in ("steps", "container", "env"):
        assert text.count(f"{key}: &gpu_h100-{key}") == 1, key
        # gpu_h200 names it; the rescue wave calls the very same jobs (#40)
        assert text.count(f"{key}: *gpu_h100-{key}") == 1, key
    anchors = re.findall(r": &([\w-]+)$", text, re.M)
    aliases = re.findall(r": \*([\w-]+)$", text, re.M)
    assert len(anchors) == len(set(anchors)) and set(aliases) == set(anchors)  # none unused
    assert "gpu_h200-steps" not in anchors and "unit-container" not in anchors
    data = rendered(config)
    h100, h200 = data["jobs"]["gpu_h100"], data["jobs"]["gpu_h200"]
    assert h100["runs-on"] == ["self-hosted", "h100"] and h200["runs-on"] == ["self-hosted", "gpu"]
    assert h100["steps"] == h200["steps"] and h100["container"] == h200["container"]
    assert "gpu.h200" in h200["strategy"]["matrix"] and "gpu.h100" in h100["strategy"]["matrix"]
    # one directory of setup scripts for both, named for the first, its header naming both
    files = setup_scripts(config).files
    assert sorted(files) == [".github/testfleet/gpu.h100/setup-1.sh",
                             ".github/testfleet/gpu.h100/setup-2.sh",
                             ".github/testfleet/unit/setup-1.sh"]
    assert "of stages gpu.h100, gpu.h200, from" in files[".github/testfleet/gpu.h100/setup-1.sh"]
    for result in lint(tmp_path, render_workflow(config), config=config):
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("trusted", [False, True])
def test_each_stage_job_has_a_rescue_job_on_its_runner_with_its_very_steps(trusted: bool) -> None:
    """#40: the rescue wave calls the very stage jobs again (testfleet-stages.yml, written
    once): each lane's rescue job has the stage job's runner, container, env and steps, its
    matrix from the reconcile job's rescue output, never failing fast; in the trusted
    workflow the call is given what the stage call is, so a rescue job gets the verified
    merge commit and the stage's secrets only for an authorized plan."""
    config = ci_config()
    text = render_trusted_workflow(config) if trusted else render_workflow(config)
    assert text is not None
    calls = parsed(text)["jobs"]
    assert calls["rescue"]["uses"] == calls["stages"]["uses"] == "./.github/workflows/testfleet-stages.yml"
    assert calls["rescue"]["with"]["stages"] == "${{ needs.reconcile.outputs.rescue }}"
    assert calls["rescue"]["with"]["fast_fail"] is False and calls["rescue"]["with"]["rescue"] is True
    assert calls["rescue"]["secrets"] == calls["stages"]["secrets"] and "secrets: *stage-secrets" in text
    data = rendered(config, trusted=trusted)
    lanes = ["unit", "gpu_h200"]
    for job_id in lanes:
        stage, rescue = data["jobs"][job_id], data["jobs"][f"{job_id}-rescue"]
        for key in ("runs-on", "container", "env", "steps", "timeout-minutes"):
            assert rescue.get(key) == stage.get(key), key
        assert rescue["needs"][:2] == ["plan", "reconcile"]
        assert rescue["strategy"]["fail-fast"] in (False, "${{ !true }}")
        lane = "gpu.h200" if job_id == "gpu_h200" else job_id
        assert rescue["strategy"]["matrix"] == \
            f"${{{{ fromJSON(needs.reconcile.outputs.rescue)['{lane}'].matrix }}}}"
        assert "needs.reconcile.result == 'success'" in rescue["if"]
        assert f"fromJSON(needs.reconcile.outputs.rescue)['{lane}'].has_jobs" in rescue["if"]
    if trusted:  # the same authorization gate on the secrets as the stage job's
        assert "needs.plan.outputs.authorized == 'true' && secrets.HF_TOKEN" in json.dumps(
            data["jobs"]["gpu_h200-rescue"]["steps"])
        assert "${{ needs.plan.outputs.sha }}" in json.dumps(data["jobs"]["gpu_h200-rescue"]["steps"])
    reconcile, rescued = data["jobs"]["reconcile"], data["jobs"]["rescued"]
    assert reconcile["env"] == {"TESTFLEET_RESCUE_OUT": "rescue.json", "TESTFLEET_WORKFLOW":
                                f".github/workflows/testfleet{'-trusted' if trusted else ''}.yml"}
    assert rescued["env"] == {"TESTFLEET_RESCUE": "rescue.json"}
    assert rescued["steps"] == reconcile["steps"] and "steps: *reconcile-steps" in text
    assert rescued["needs"][:2] == ["plan", "reconcile"]
    assert sorted(rescued["needs"][2:]) == [f"{j}-rescue" for j in sorted(lanes)]
    assert "needs.reconcile.outputs.has_rescue == 'true'" in rescued["if"]
    assert data["jobs"]["testfleet"]["needs"][-1] == "rescued"


@pytest.mark.parametrize(("results", "rescued", "code"), [
    ("success failure success success", "success", 0),  # a lost runner, rescued
    ("success failure success failure", "failure", 1),  # the rescue's reconcile failed
    ("success failure success skipped", "skipped", 1),  # no rescue: the failure stands
    ("success success success skipped", "skipped", 0),
])
def test_summary_job_takes_the_rescue_reconcile_as_the_verdict_when_it_ran(
        results: str, rescued: str, code: int, tmp_path: Path) -> None:
    data = rendered(example().config)
    step = data["jobs"]["testfleet"]["steps"][0]
    assert step["env"]["RESCUED"] == "${{ needs.rescued.result }}"
    assert _bash(step["run"], {"RESULTS": results, "RESCUED": rescued},
                 tmp_path).returncode == code


def test_a_queue_lane_job_never_fails_fast_and_gets_the_database_on_default_branch_runs(
        tmp_path: Path) -> None:
    """#40: a queue lane's runners pull one queue: one runner's failure must not cancel the
    others (fail-fast false, whatever the run's fast-fail), and they need the database URL,
    which only default-branch runs get (like every history write)."""
    config = validate_config({"stages": {
        "q": {"backend": "cpu", "shards": 4, "execution": "queue"},
        "s": {"backend": "cpu", "shards": 2}}})
    data = rendered(config, WorkflowOptions(database_secret="TF_DB"))
    assert data["jobs"]["q"]["strategy"]["fail-fast"] is False
    assert data["jobs"]["s"]["strategy"]["fail-fast"] != False  # noqa: E712 - an expression
    run = next(s for s in data["jobs"]["q"]["steps"] if "testfleet-job" in s.get("uses", ""))
    url = run["env"]["TESTFLEET_DATABASE_URL"]
    assert "secrets.TF_DB" in url and "github.event.repository.default_branch" in url
    assert "github.event_name == 'push'" in url


def test_a_pull_requests_queue_runners_get_the_queue_credential_never_the_history_one(
        tmp_path: Path) -> None:
    """#40: with [ci] queue_secret, a queue lane's runners get the history's write secret on
    default-branch runs and the queue tables' credential otherwise; in the trusted
    workflow only the queue credential, and only for an authorized plan. A shard lane's
    jobs never get the queue credential."""
    config = validate_config({"stages": {
        "q": {"backend": "cuda", "runs_on": ["self-hosted", "gpu"], "shards": 4,
              "execution": "queue"},
        "s": {"backend": "cpu", "shards": 2}}})
    opts = WorkflowOptions(database_secret="TF_DB", queue_secret="TF_QUEUE")

    def url(data: dict[str, Any], job: str) -> str:
        run = next(s for s in data["jobs"][job]["steps"] if "testfleet-job" in s.get("uses", ""))
        return str(run.get("env", {}).get("TESTFLEET_DATABASE_URL", ""))

    main = url(rendered(config, opts), "q")
    assert "default_branch" in main
    assert main.endswith("&& (github.ref == format('refs/heads/{0}', github.event.repository."
                         "default_branch) && (github.event_name == 'push' || github.event_name "
                         "== 'schedule' || github.event_name == 'workflow_dispatch') && "
                         "secrets.TF_DB || '') || secrets.TF_QUEUE }}"), main
    assert "TF_QUEUE" not in url(rendered(config, opts), "s")
    trusted_text = render_trusted_workflow(config, opts)
    assert trusted_text is not None
    # the trusted workflow passes no history secret at all, the queue's only when authorized
    assert "TF_DB" not in trusted_text
    trusted_url = url(rendered(config, opts, trusted=True), "q")
    assert "(needs.plan.outputs.authorized == 'true' && secrets.TF_QUEUE || '')" in trusted_url
    assert "secrets.TF_DB" not in trusted_url
    for result in lint(tmp_path, render_workflow(config, opts), trusted_text, config, opts):
        assert result.returncode == 0, f"{result.args[0]}:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("read_secret", [None, "TF_DB_READ"])
def test_runs_written_to_the_database_move_the_breakers_in_the_history_job(
        tmp_path: Path, read_secret: str | None) -> None:
    """#41: jobs that write to the database bring no bundle to merge, so the history job
    folds the run into the breakers with 'breaker observe' (the write secret, the run's
    plan), before the snapshot; without a breaker that step is not written, and with the
    plan's read secret and no breaker there is no history job at all."""
    stages = {"gpu": {"backend": "cuda", "runs_on": ["self-hosted", "gpu"], "breaker": True},
              "cpu": {"backend": "cpu"}}
    opts = WorkflowOptions(database_secret="TF_DB", database_read_secret=read_secret)
    text = render_workflow(validate_config({"stages": stages}), opts)
    history = parsed(text)["jobs"]["history"]
    observe = next(s for s in history["steps"] if s.get("with", {}).get("command") == "breaker-observe")
    assert observe["env"] == {"TESTFLEET_DATABASE_URL": "${{ secrets.TF_DB }}"}
    assert observe["with"]["args"] == "--run-id\n${{ github.run_id }}\n--plan\nplan.json\n"
    names = [s.get("name") or s["uses"].split("@")[0] for s in history["steps"]]
    assert names.index("actions/download-artifact") < names.index("Move the runner-class breakers")
    assert ("Snapshot the database" in names) is (read_secret is None)
    assert ("Save the history" in names) is (read_secret is None)
    for result in lint(tmp_path, text, config=validate_config({"stages": stages}), opts=opts):
        assert result.returncode == 0, f"{result.args[0]}:\n{result.stdout}\n{result.stderr}"
    plain = render_workflow(validate_config({"stages": {"cpu": {"backend": "cpu"}}}), opts)
    assert "breaker-observe" not in plain
    assert ("history:" in plain) is (read_secret is None)
