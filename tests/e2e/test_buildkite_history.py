"""The Buildkite history loop and the bootstrap's handling of rejected registrations,
played with the generated pipelines' own commands and a stand-in ``buildkite-agent``
(artifacts kept by path, Buildkite's upload-time ``$$`` rule).

A default-branch build: the bootstrap plans, every CPU step runs its job and uploads
its bundle, the ``testfleet-history`` step merges them into the database named by
``TESTFLEET_DATABASE_URL``; the next build plans from it. A pull request's pipeline
records nothing and has no history step. A tree with a rejected registration still
runs every valid test, and the build fails at its last step.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.test_ci_simulation import Buildkite, git

MAIN = {"BUILDKITE_BRANCH": "main", "BUILDKITE_PIPELINE_DEFAULT_BRANCH": "main",
        "BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_REPO": "git@github.com:fleet-org/fleet.git"}


@pytest.fixture
def bk_repo(example_project: Path) -> Path:
    from testfleet.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["-C", str(example_project), "init", "--buildkite", "--install", "true"])
    assert info.value.code == 0
    git(example_project, "init", "-q", "-b", "main")
    git(example_project, "add", "-A")
    git(example_project, "commit", "-q", "-m", "base")
    return example_project


def bootstrap(bk: Buildkite, repo: Path, ws: Path, env: dict[str, str]) -> dict[str, Any]:
    git(repo.parent, "clone", "-q", str(repo), str(ws))
    command = yaml.safe_load((repo / ".buildkite" / "pipeline.yml").read_text())["steps"][0]["command"]
    proc = bk.run(command, ws, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((bk.store / "uploaded-pipeline.json").read_text())


def run_step(bk: Buildkite, repo: Path, step: dict[str, Any], ws: Path,
             env: dict[str, str]) -> tuple[int, str]:
    if not ws.exists():
        git(repo.parent, "clone", "-q", str(repo), str(ws))
    proc = bk.run("set -e\n" + "\n".join(step["commands"]), ws, {**env, **step.get("env", {})})
    for pattern in step.get("artifact_paths", []):  # the agent uploads them whatever the outcome
        for path in ws.glob(pattern):
            dest = bk.store / "files" / path.relative_to(ws)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
    return proc.returncode, proc.stdout + proc.stderr


def cpu_steps(pipeline: dict[str, Any], plan: dict[str, Any]) -> list[dict[str, Any]]:
    cpu = {j["id"] for j in plan["jobs"] if j["backend"] == "cpu"}
    return [s for s in pipeline["steps"] if s.get("env", {}).get("TESTFLEET_JOB_ID") in cpu]


def test_a_default_branch_build_merges_its_bundles_and_the_next_plans_from_them(
        bk_repo: Path, tmp_path: Path) -> None:
    history = tmp_path / "shared" / "history.db"  # the database only the history step gets
    history.parent.mkdir()
    bk = Buildkite(tmp_path)
    build = {**MAIN, "BUILDKITE_BUILD_NUMBER": "41", "TESTFLEET_CADENCE": "nightly"}
    pipeline = bootstrap(bk, bk_repo, tmp_path / "plan-41", build)
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    steps = cpu_steps(pipeline, plan)
    assert steps
    for step in steps:
        code, log = run_step(bk, bk_repo, step, tmp_path / step["key"], build)
        assert code == 0, log
    bundles = sorted((bk.store / "files" / "testfleet-history").glob("*.bundle"))
    assert [b.stem for b in bundles] == sorted(s["key"] for s in steps)
    wait, merge, reconcile = pipeline["steps"][-3:]
    assert wait == {"wait": None, "continue_on_failure": True}
    assert merge["key"] == "testfleet-history"
    # the GPU jobs never ran here, so they never reported: as lost agents' jobs they go to
    # the rescue wave (#40), and the reconcile after it fails the build naming each of them
    # (their rescue steps cannot run here either), and none of the CPU jobs that did report
    code, log = run_step(bk, bk_repo, reconcile, tmp_path / "reconcile-41", build)
    gpu = sorted(j["id"] for j in plan["jobs"] if j["backend"] != "cpu")
    assert code == 0 and gpu and all(job_id in log for job_id in gpu), log
    uploaded = json.loads((bk.store / "uploaded-pipeline.json").read_text())
    *rescue_steps, rescue_wait, again, rescued = uploaded["steps"]
    assert sorted(r["env"]["TESTFLEET_JOB_ID"] for r in rescue_steps) == [f"{g}-rescue" for g in gpu]
    assert rescue_wait == {"wait": None, "continue_on_failure": True}
    assert again["key"] == "testfleet-history-rescued"  # the rescue's records, merged
    code, log = run_step(bk, bk_repo, rescued, tmp_path / "rescued-41", build)
    assert code == 1 and all(job_id in log for job_id in gpu), log
    assert not any(f"missing job {s['key']}" in log for s in steps)
    assert merge["if"] == "build.pull_request.id == null && build.branch == pipeline.default_branch"
    assert merge["concurrency"] == 1 and merge["concurrency_group"].startswith(
        "${BUILDKITE_PIPELINE_SLUG}/")
    # test steps never see the database; without it the history step says what it needs
    code, log = run_step(bk, bk_repo, merge, tmp_path / "history-41", build)
    assert code == 2 and "TESTFLEET_DATABASE_URL" in log
    code, log = run_step(bk, bk_repo, merge, tmp_path / "history-41", {
        **build, "TESTFLEET_DATABASE_URL": str(history)})
    assert code == 0, log
    ran = {t["file"] for j in plan["jobs"] if j["backend"] == "cpu" for t in j["tests"]}
    con = sqlite3.connect(history)
    stored = {f for (f,) in con.execute("SELECT file FROM executions WHERE ci_run_id = '41'")}
    con.close()
    assert stored == ran

    # the next build's plan reads the shared history
    pipeline = bootstrap(bk, bk_repo, tmp_path / "plan-42", {
        **build, "BUILDKITE_BUILD_NUMBER": "42", "TESTFLEET_DATABASE_URL": str(history)})
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    share = {s["name"]: s["history_share"] for s in plan["stages"]}
    assert share["stage-a-cpu"] > 0 and share["stage-b-cpu"] > 0

    # a build of another branch runs its steps but records nothing
    other = {**build, "BUILDKITE_BRANCH": "feature", "BUILDKITE_BUILD_NUMBER": "43"}
    for f in bundles:
        f.unlink()
    step = cpu_steps(pipeline, plan)[0]
    code, log = run_step(bk, bk_repo, step, tmp_path / "feature-step", other)
    assert code == 0, log
    assert not list((bk.store / "files" / "testfleet-history").glob("*.bundle"))
    code, log = run_step(bk, bk_repo, merge, tmp_path / "feature-history", {
        **other, "TESTFLEET_DATABASE_URL": str(history)})
    assert code == 2 and "only builds of the default branch" in log


def test_a_failing_step_still_records_and_keeps_its_exit_status(bk_repo: Path,
                                                                 tmp_path: Path) -> None:
    test = bk_repo / "tests" / "fast" / "test_kl.py"
    test.write_text(test.read_text() + "\n\ndef test_broken():\n    assert False\n")
    git(bk_repo, "commit", "-q", "-am", "break a test")
    bk = Buildkite(tmp_path)
    build = {**MAIN, "BUILDKITE_BUILD_NUMBER": "7"}
    pipeline = bootstrap(bk, bk_repo, tmp_path / "plan", build)
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    job = next(j for j in plan["jobs"] if any(t["file"] == "tests/fast/test_kl.py"
                                              for t in j["tests"]))
    step = next(s for s in pipeline["steps"] if s.get("env", {}).get("TESTFLEET_JOB_ID") == job["id"])
    code, log = run_step(bk, bk_repo, step, tmp_path / "step", build)
    assert code == 1, log
    (bundle,) = (bk.store / "files" / "testfleet-history").glob("*.bundle")
    from testfleet.history.bundle import read_file

    payload = read_file(bundle).payload
    assert payload.source.ref == "refs/heads/main" and payload.source.ci_run_id == "7"
    assert ("tests/fast/test_kl.py", "FAILED") in {(e.file, e.outcome) for e in payload.executions}
    assert any(c.name.endswith("test_broken") and c.outcome == "FAILED" for c in payload.testcases)


def test_a_pull_request_pipeline_records_nothing(bk_repo: Path, tmp_path: Path) -> None:
    bk = Buildkite(tmp_path)
    pr = {**MAIN, "BUILDKITE_PULL_REQUEST": "12", "BUILDKITE_BRANCH": "feature",
          "BUILDKITE_PULL_REQUEST_REPO": MAIN["BUILDKITE_REPO"],
          "BUILDKITE_PULL_REQUEST_LABELS": "run-ci-megatron", "BUILDKITE_BUILD_NUMBER": "9"}
    pipeline = bootstrap(bk, bk_repo, tmp_path / "plan", pr)
    assert all(s.get("key") != "testfleet-history" for s in pipeline["steps"])
    assert "history export" not in json.dumps(pipeline)
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    step = cpu_steps(pipeline, plan)[0]
    code, log = run_step(bk, bk_repo, step, tmp_path / "step", pr)
    assert code == 0, log
    assert not (bk.store / "files" / "testfleet-history").exists()


def test_rejected_registrations_run_the_valid_tests_and_fail_the_build_last(
        bk_repo: Path, tmp_path: Path) -> None:
    """Like the GitHub workflow: plan exit 1 uploads the plan of every valid test; the
    build fails at its last step, which says why."""
    bad = bk_repo / "tests" / "unit" / "test_broken_marker.py"
    bad.write_text("from tests.ci.ci_register import register_cpu_ci\n\n"
                   "register_cpu_ci(est_time=5, suite='stage-nope')\n\n"
                   "def test_x():\n    pass\n")
    git(bk_repo, "add", "-A")
    git(bk_repo, "commit", "-q", "-m", "a bad registration")
    bk = Buildkite(tmp_path)
    build = {**MAIN, "BUILDKITE_BUILD_NUMBER": "8"}
    pipeline = bootstrap(bk, bk_repo, tmp_path / "plan", build)  # passes: the plan was made
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    assert [s["file"] for s in plan["skipped"] if s["reason"] == "invalid"] == [
        "tests/unit/test_broken_marker.py"]
    assert cpu_steps(pipeline, plan)  # every valid test is scheduled
    wait, merge, reconcile, last = pipeline["steps"][-4:]
    assert wait == {"wait": None, "continue_on_failure": True}
    assert (merge["key"], reconcile["key"], last["key"]) == (
        "testfleet-history", "testfleet-reconcile", "testfleet-tree-errors")
    code, log = run_step(bk, bk_repo, last, tmp_path / "last", build)
    assert code == 1 and "1 registration(s) were rejected" in log


def test_a_lost_agent_job_is_rescued_by_the_uploaded_rescue_steps(bk_repo: Path,
                                                                  tmp_path: Path) -> None:
    """#40 on Buildkite: a test step retries on agent loss and soft-fails only on it; one CPU
    step's agent is lost for good (no status): the reconcile step uploads a rescue step on
    the same agents that runs exactly its files, and the reconcile after it names them as
    rescued. A step whose test failed is not rescued."""
    bk = Buildkite(tmp_path)
    build = {**MAIN, "BUILDKITE_BUILD_NUMBER": "51", "TESTFLEET_CADENCE": "nightly"}
    pipeline = bootstrap(bk, bk_repo, tmp_path / "plan-51", build)
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    steps = cpu_steps(pipeline, plan)
    assert len(steps) >= 2
    for step in steps:
        assert step["retry"]["automatic"][0] == {"exit_status": -1, "limit": 2}
        assert {"signal_reason": "agent_stop", "limit": 2} in step["retry"]["automatic"]
        assert step["soft_fail"] == [{"exit_status": -1}]
    lost, *others = steps
    for step in others:
        code, log = run_step(bk, bk_repo, step, tmp_path / step["key"], build)
        assert code == 0, log
    reconcile = next(s for s in pipeline["steps"] if s.get("key") == "testfleet-reconcile")
    code, log = run_step(bk, bk_repo, reconcile, tmp_path / "reconcile-51", build)
    assert code == 0, log
    uploaded = json.loads((bk.store / "uploaded-pipeline.json").read_text())
    rescue = next(s for s in uploaded["steps"] if s.get("env", {}).get("TESTFLEET_JOB_ID")
                  == lost["env"]["TESTFLEET_JOB_ID"] + "-rescue")
    assert rescue.get("agents") == lost.get("agents") and "retry" not in rescue
    assert rescue["env"]["TESTFLEET_RESCUE_DIGEST"].startswith("sha256:")
    code, log = run_step(bk, bk_repo, rescue, tmp_path / "rescue-51", build)
    assert code == 0, log
    lost_files = [t["file"] for j in plan["jobs"] if j["id"] == lost["env"]["TESTFLEET_JOB_ID"]
                  for t in j["tests"]]
    # the history step ran before the wave: the one after it merges the rescue's records
    again = next(s for s in uploaded["steps"] if s.get("key") == "testfleet-history-rescued")
    assert again["concurrency_group"] == "${BUILDKITE_PIPELINE_SLUG}/testfleet-history"
    history = tmp_path / "shared" / "history.db"
    history.parent.mkdir(parents=True, exist_ok=True)
    code, log = run_step(bk, bk_repo, again, tmp_path / "history-51",
                         {**build, "TESTFLEET_DATABASE_URL": str(history)})
    assert code == 0, log
    con = sqlite3.connect(history)
    recorded = {r[0] for r in con.execute("SELECT file FROM executions")}
    con.close()
    assert set(lost_files) <= recorded, (lost_files, recorded)
    rescued = uploaded["steps"][-1]
    assert rescued["key"] == "testfleet-rescued"
    code, log = run_step(bk, bk_repo, rescued, tmp_path / "rescued-51", build)
    assert "from the rescue wave" in log and all(f in log for f in lost_files), log
    # only the GPU jobs (never run here) are left unaccounted for, never the CPU ones
    cpu_ids = {s["env"]["TESTFLEET_JOB_ID"] for s in steps}
    assert code == 1 and not any(c in log for c in cpu_ids - {lost["env"]["TESTFLEET_JOB_ID"]})
