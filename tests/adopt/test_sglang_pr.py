"""SGLang's pull-request stages adopted from its own files, unmodified (tests/fixtures/
real_trees/sglang-pr, trimmed from modal-projects/sglang): every stage ``pr-test.yml`` runs
through ``_pr-test-stage.yml`` gets the runner labels and the install script its
``runner_config`` names in ``scripts/ci/runner_configs.yml``, and the parallelism
``compute_partitions.py`` gives it: 0.75 x the stage's ``run_timeout_minutes`` per shard,
``size // 3`` at once, base-a pinned. SGLang's own ``compute_partitions`` (run here in a
separate python3, as the reference; adoption never runs it) gives the partition counts the
plan is measured against."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from support import run_cli
from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.changes import ChangeSet
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.registry import collect

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "sglang-pr"
#: SGLang's own partition counts, from its compute_partitions with the static estimates
SGLANG_PARTITIONS = (
    "import json, sys; sys.path.insert(0, 'scripts/ci/utils'); import compute_partitions as cp; "
    "tests = cp.collect_tests(cp.discover_files('.'), sanity_check=False); "
    "print(json.dumps(cp.compute_partitions(tests, '.', "
    "cp.load_run_timeouts('.github/workflows/pr-test.yml'))))")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    dest = tmp_path / "sglang"
    shutil.copytree(FIXTURE, dest)
    return dest


def stage_jobs(tree: Path) -> dict[str, dict[str, str]]:
    """suite -> the literal ``with:`` of its pr-test.yml job that calls _pr-test-stage.yml."""
    jobs = yaml.safe_load((tree / ".github/workflows/pr-test.yml").read_text())["jobs"]
    return {job["with"]["self_name"]: job["with"] for job in jobs.values()
            if job.get("uses") == "./.github/workflows/_pr-test-stage.yml"}


def test_the_stages_take_runners_install_and_parallelism_from_the_projects_data(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    # the summary comes first, the stages it touches named
    assert out.splitlines()[0] == "adoption: 13 stage(s) from 45 registration(s)"
    assert "needs your decision" not in out
    # the label SGLang switches on what changed: the one chosen, and why, said once
    switch = ("scripts/ci/runner_configs.yml's '$b200_runner' is chosen at run time by step "
              "set-runner of .github/workflows/_pr-test-check-changes.yml job run "
              "('4-gpu-b200-kernel' when if [[ \"$sgl_kernel\" == \"true\" ]], else '4-gpu-b200'); "
              "adopted '4-gpu-b200', its value when that condition is false")
    assert out.count(switch) == 1
    configs = yaml.safe_load((tree / "scripts/ci/runner_configs.yml").read_text())["runner_configs"]
    stages = load_project(tree).config.stages
    calls = stage_jobs(tree)
    assert len(calls) == 12
    for suite, with_ in calls.items():
        entry = configs[with_["runner_config"]]
        # $b200_runner: 4-gpu-b200-kernel only when sgl-kernel changed, else 4-gpu-b200
        labels = ["4-gpu-b200" if entry["runs_on"] == "$b200_runner" else entry["runs_on"]]
        stage = stages[suite]
        assert (stage.runs_on, stage.disabled) == (labels, None), suite
        install = (f"CUSTOM_BUILD_SGL_KERNEL=false timeout {entry['install_timeout']}m "
                   f"bash {entry['install']}")
        assert stage.setup[1].splitlines()[-1] == install, suite
        devices = entry.get("rdma_devices", "")
        assert stage.setup[0] == f'echo "SGLANG_CI_RDMA_ALL_DEVICES={devices}" >> "$GITHUB_ENV"'
        assert stage.job_timeout_minutes == 240
        if suite == "base-a-test-1-gpu-small":  # pinned by _BASE_A_OVERRIDES
            assert (stage.shards, stage.target_minutes) == (1, None)
        else:
            assert stage.target_minutes == 0.75 * int(with_["run_timeout_minutes"]), suite
            assert stage.shards is None and stage.max_parallel is not None
    # the inline CPU stage: its count pinned too, no throttle
    assert (stages["base-a-test-cpu"].shards, stages["base-a-test-cpu"].max_parallel) == (8, None)
    # a stage's own warmup inputs run after the install, as its job runs them
    assert stages["base-c-test-8-gpu-h200"].setup[2].splitlines()[-1].startswith(
        "python3 scripts/ci/cuda/warmup_deep_gemm.py deepseek-ai/DeepSeek-V3-0324:8")


def test_every_shard_fits_sglangs_budget_or_uses_its_partition_count(
        tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "-C", str(tree), "init", "--from-existing")
    assert code == 0, out + err
    env = {**os.environ, "PYTHONPATH": str(tree / "python"), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", SGLANG_PARTITIONS], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout)
    project = load_project(tree)
    trigger = Trigger(event="pull_request", labels=("run-ci",))
    changes = ChangeSet(paths=("python/sglang/srt/server_args.py",), source="test")
    plan = make_plan(project, collect(project, use_cache=False),
                     PlanRequest(trigger=trigger, changes=changes))
    timeouts = {s: int(w["run_timeout_minutes"]) for s, w in stage_jobs(tree).items()}
    timeouts["base-a-test-cpu"] = 10  # its Run test step's own timeout-minutes
    assert set(theirs) == set(timeouts)
    for suite, minutes in timeouts.items():
        shards = [j for j in plan.jobs if j.stage == suite]
        assert shards, suite
        fits = max(j.estimate for j in shards) <= 0.75 * minutes * 60
        assert fits or len(shards) >= theirs[suite]["size"], suite
        throttle = shards[0].ci.max_parallel
        assert throttle is None or throttle == max(len(shards) // 3, 1), suite
    assert not [w for w in plan.warnings if "longer than the job's" in w]
