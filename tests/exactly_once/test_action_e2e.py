"""A CI run through the composite action's own scripts, with the real testfleet: the plan
step, one run step per matrix job into ``status-dir`` (one job never reports: its runner
was lost), artifacts collected per job as the CI engine does, and the final reconcile
step, which must fail and name the job (issue #26's done criterion)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from support import github_output_dict
from testfleet.integrations.action import render_action


def _step(inputs: dict[str, str], cwd: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    data: dict[str, Any] = yaml.safe_load(render_action())
    spec = next(s for s in data["runs"]["steps"] if s["name"] == "testfleet")
    values = {k: str(v.get("default", "")) for k, v in data["inputs"].items()} | inputs
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "HOME": os.environ.get("HOME", str(tmp)), "LANG": "C.UTF-8", "CI": "true",
           "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "workflow_dispatch",
           "GITHUB_RUN_ID": "4242", "GITHUB_RUN_ATTEMPT": "1",
           "GITHUB_EVENT_PATH": str(tmp / "event.json"), "GITHUB_REF": "refs/heads/main",
           "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"), "GITHUB_OUTPUT": str(tmp / "output")}
    for key, expr in spec["env"].items():
        env[key] = values[expr.removeprefix("${{ inputs.").removesuffix(" }}")]
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                           spec["run"]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_a_shard_that_never_reports_fails_the_reconcile_step(
        log_project: Callable[..., Path], tmp_path: Path) -> None:
    root = log_project(files=6, shards=3)
    (tmp_path / "output").write_text("")
    (tmp_path / "event.json").write_text('{"inputs": {}}')
    plan = _step({"command": "plan", "args": "--stage\ns"}, root, tmp_path)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    outputs = github_output_dict((tmp_path / "output").read_text())
    digest = outputs["digest"]
    jobs = [entry["id"] for entry in yaml.safe_load(outputs["matrix"])["include"]]
    assert len(jobs) == 3
    artifacts = tmp_path / "artifacts"
    lost = jobs[1]
    for job in jobs:
        if job == lost:
            continue  # its runner went away: no status, no artifact
        checkout = tmp_path / f"runner-{job}"  # every matrix job on its own machine
        shutil.copytree(root, checkout)
        run = _step({"command": "run", "job": job, "plan-digest": digest}, checkout, tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        shutil.copytree(checkout / "testfleet-status", artifacts / f"testfleet-status-{job}")
    reconcile = _step({"command": "reconcile", "plan-digest": digest, "args": str(artifacts)},
                      root, tmp_path)
    assert reconcile.returncode == 1, reconcile.stdout + reconcile.stderr
    assert f"::error title=testfleet reconcile::1 jobs that never reported: {lost} (s)" \
        in reconcile.stdout
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "❌ testfleet reconcile" in summary and lost in summary
    # a plan that is not this run's is refused before anything is compared
    wrong = _step({"command": "reconcile", "plan-digest": "sha256:" + "0" * 64,
                   "args": str(artifacts)}, root, tmp_path)
    assert wrong.returncode == 2 and "not the plan of this run" in wrong.stderr
