"""``testfleet reconcile`` on status files written by real ``testfleet run`` and pytest
processes: a job that never reports, a file run by two jobs, a runner killed outright, a
refused plan, stage shards against their frozen plan, and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import clean_env, ran, run_pytest, run_testfleet


def _plan(root: Path) -> dict:
    res = run_testfleet(root, "plan", "--stage", "s", "--format", "json", "--output", "plan.json")
    assert res.returncode == 0, res.stderr
    return json.loads((root / "plan.json").read_text(encoding="utf-8"))


def _run_job(root: Path, job: str, status: str, *extra: str,
             env: dict[str, str] | None = None) -> None:
    res = run_testfleet(root, "run", "--plan", "plan.json", "--job", job, "--status-file", status,
                        "--display", "plain", *extra, env=env)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_job_that_never_reports_fails_reconcile_naming_it(
        log_project: Callable[..., Path], tmp_path: Path) -> None:
    root = log_project(files=7, shards=3)
    plan = _plan(root)
    jobs = [j["id"] for j in plan["jobs"]]
    assert len(jobs) == 3
    for job in (jobs[0], jobs[2]):
        _run_job(root, job, f"st/{job}.json")
    summary = tmp_path / "summary.md"
    env = clean_env(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", "st", env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    missing = {t["file"] for t in plan["jobs"][1]["tests"]}
    assert f"{jobs[1]} (s): never reported" in res.stdout
    assert all(f in res.stdout for f in missing)
    assert f"::error title=testfleet reconcile::1 jobs that never reported: {jobs[1]}" in res.stdout
    md = summary.read_text(encoding="utf-8")
    assert "❌ testfleet reconcile" in md and jobs[1] in md
    doc = json.loads(run_testfleet(root, "reconcile", "--plan", "plan.json", "st",
                                   "--format", "json").stdout)
    assert doc["ok"] is False and [j["job_id"] for j in doc["missing_jobs"]] == [jobs[1]]
    assert {f["file"] for f in doc["missing"]} == missing
    _run_job(root, jobs[1], f"st/{jobs[1]}.json")  # the job reports: now it reconciles
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", "st")
    assert res.returncode == 0 and "every planned file ran exactly once (7 file(s)" in res.stdout
    assert dict(ran(root)) == {f"tests/test_f{i}.py": 1 for i in range(7)}


def test_a_file_run_by_two_jobs_fails_reconcile(log_project: Callable[..., Path]) -> None:
    root = log_project(files=4, shards=2)
    plan = _plan(root)
    jobs = [j["id"] for j in plan["jobs"]]
    for job in jobs:
        _run_job(root, job, f"st/{job}.json")
    assert run_testfleet(root, "reconcile", "--plan", "plan.json", "st").returncode == 0
    # the same job run twice (a matrix that lists a shard twice)
    _run_job(root, jobs[0], "st/again.json")
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", "st")
    assert res.returncode == 1
    twice = sorted(t["file"] for t in plan["jobs"][0]["tests"])
    assert f"{len(twice)} files run more than once" in res.stdout
    assert f"s {twice[0]} (planned in {jobs[0]}) by {jobs[0]}, {jobs[0]}" in res.stdout
    # one file run by another job from another plan (a path that re-planned)
    (root / "st" / "again.json").unlink()
    other = plan["jobs"][1]["tests"][0]["file"]
    res = run_testfleet(root, "run", "--file", other, "--stage", "s", "--status-file",
                        "st/stray.json", "--display", "plain")
    assert res.returncode == 0, res.stderr
    doc = json.loads(run_testfleet(root, "reconcile", "--plan", "plan.json", "st",
                                   "--format", "json").stdout)
    assert [(d["file"], len(d["jobs"])) for d in doc["duplicated"]] == [(other, 2)]
    assert [d["job_id"] for d in doc["other_plan"]] == ["s-1-of-2"]  # shards = 2, one file


def test_a_runner_killed_outright_leaves_an_incomplete_status(
        log_project: Callable[..., Path]) -> None:
    root = log_project(files=3, shards=1)
    (root / "tests" / "test_f1.py").write_text(
        "import os, signal\nfrom testfleet import register_cpu_ci\n"
        'register_cpu_ci(est_time=10, suite="s")\n'
        "if __name__ == '__main__':\n    os.kill(os.getppid(), signal.SIGKILL)\n",
        encoding="utf-8")
    plan = _plan(root)
    job = plan["jobs"][0]["id"]
    res = run_testfleet(root, "run", "--plan", "plan.json", "--job", job, "--status-file",
                        "st/j.json", "--display", "plain")
    assert res.returncode == -9, res.stdout + res.stderr
    status = json.loads((root / "st" / "j.json").read_text(encoding="utf-8"))
    assert status["complete"] is False and status["exit_status"] == -1
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", "st")
    assert res.returncode == 1
    assert "jobs that did not finish" in res.stdout and "files reported but not run" in res.stdout


def test_a_refused_plan_reports_why(log_project: Callable[..., Path]) -> None:
    root = log_project(files=2, shards=1)
    plan = _plan(root)
    job = plan["jobs"][0]["id"]
    res = run_testfleet(root, "run", "--plan", "plan.json", "--job", job, "--status-file",
                        "st/j.json", env=clean_env(TESTFLEET_PLAN_DIGEST="sha256:" + "0" * 64))
    assert res.returncode == 2 and "not the plan of this run" in res.stderr
    assert ran(root) == {}
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", "st")
    assert res.returncode == 1 and "refused" in res.stdout
    assert "statuses from another plan" in res.stdout and "files never reported" in res.stdout


def test_stage_shards_and_plugin_jobs_reconcile(log_project: Callable[..., Path]) -> None:
    root = log_project(files=5, shards=2)
    for i in (2, 1):
        res = run_testfleet(root, "run", "--stage", "s", "--shard", f"{i}/2", "--status-file",
                            f"st/{i}.json", "--display", "plain")
        assert res.returncode == 0, res.stderr
    statuses = [json.loads((root / "st" / f"{i}.json").read_text()) for i in (1, 2)]
    assert statuses[0]["plan_digest"] == statuses[1]["plan_digest"]
    frozen = statuses[0]["plan_file"]
    assert frozen == statuses[1]["plan_file"] and (root / frozen).is_file()
    assert run_testfleet(root, "reconcile", "--plan", frozen, "st").returncode == 0
    # the plugin's statuses, jobs of a plan file, one session under pytest-xdist
    plan = _plan(root)
    for job in plan["jobs"]:
        res = run_pytest(root, "-n", "2", "--testfleet-plan", "plan.json", "--testfleet-job",
                         job["id"], "--testfleet-status-file", f"pst/{job['id']}.json")
        assert res.returncode == 0, res.stdout + res.stderr
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", "pst")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads((root / "pst" / f"{plan['jobs'][0]['id']}.json").read_text())
    assert doc["runner"] == "pytest" and doc["complete"] and doc["plan_digest"] == plan["digest"]


@pytest.mark.parametrize(("setup", "args", "message"), [
    ("corrupt", ["st"], "not valid JSON"),
    ("wrong-shape", ["st"], "invalid job status"),
    ("none", [], "name the status files"),
    ("digest", ["--expect-digest", "sha256:" + "1" * 64, "st"], "not the plan of this run"),
])
def test_bad_input_is_exit_2(log_project: Callable[..., Path], setup: str, args: list[str],
                             message: str) -> None:
    root = log_project(files=1, shards=1)
    _plan(root)
    (root / "st").mkdir()
    (root / "st" / "other.json").write_text('{"schema": "something.else/1"}')  # skipped
    if setup == "corrupt":
        (root / "st" / "j.json").write_text('{"schema": "testfleet.job-status/1", ')
    if setup == "wrong-shape":
        (root / "st" / "j.json").write_text('{"schema": "testfleet.job-status/1", "shard": "1"}')
    res = run_testfleet(root, "reconcile", "--plan", "plan.json", *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
