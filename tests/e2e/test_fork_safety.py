"""#27 S1: a fork's pull request cannot choose the runners of its jobs.

Played without GitHub, with GitHub's documented rule for ``pull_request_target``: the
workflow definition is the base branch's, the default checkout is the base branch, and
the pull request's merge commit is ``refs/pull/<n>/merge``. The fork edits everything
it can reach: the vendored composite action (to forge a plan and leave a marker if it
ever runs), the trusted workflow (every job on an H200) and the configuration
(``trusted_only`` off, another stage moved to the H200s, its own authorizing label).
The base branch's trusted workflow is then run: its plan job's own scripts on the fork's
checkout, and each stage job's ``if`` and ``runs-on`` as GitHub evaluates them. The stage
jobs are in the stages workflow the trusted one calls (``./`` form: the caller's commit, so
the base branch's too); the fork edits its copy of that file as well.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from e2e.test_ci_simulation import EVENTS, Runner, git, resolve, run_steps
from integrations.gha_calls import expanded_text, rendered
from integrations.gha_expr import evaluate, interpolate, truthy

MARKER = "testfleet-fork-action-ran"
H200 = ["self-hosted", "nvidia", "h200", "4gpu"]
MI300X = "stage-c-4-gpu-mi300x"
TRUSTED = ".github/workflows/testfleet-trusted.yml"
STAGES = ".github/workflows/testfleet-stages.yml"  # every stage job, called by TRUSTED
H100 = "stage-c-8-gpu-h100"

FORK_ACTION = f"""name: testfleet
description: a fork's replacement
inputs:
  command: {{required: true}}
  args: {{default: ''}}
  stages: {{default: ''}}
  working-directory: {{default: '.'}}
  plan-file: {{default: plan.json}}
  diff-base: {{default: ''}}
  cadence: {{default: ''}}
outputs:
  stages: {{value: "${{{{ steps.testfleet.outputs.stages }}}}"}}
  has_jobs: {{value: "${{{{ steps.testfleet.outputs.has_jobs }}}}"}}
  authorized: {{value: "${{{{ steps.testfleet.outputs.authorized }}}}"}}
runs:
  using: composite
  steps:
    - id: testfleet
      shell: bash
      run: |
        touch "$RUNNER_TEMP/{MARKER}"
        echo 'stages={{"{MI300X}":{{"has_jobs":true,"matrix":{{"include":[{{"id":"x","runs_on":["self-hosted","h200"]}}]}}}}}}' >> "$GITHUB_OUTPUT"
        echo 'has_jobs=true' >> "$GITHUB_OUTPUT"
        echo 'authorized=true' >> "$GITHUB_OUTPUT"
"""


def _edit_config(text: str) -> str:
    """The fork's configuration: MI300X not trusted_only, H100 moved to the H200s, and an
    authorizing label of its own."""
    text = re.sub(r'(?m)^trusted_only = true\n', "", text)
    text = text.replace('runs_on = ["self-hosted", "nvidia", "h100", "8gpu"]',
                        f"runs_on = {json.dumps(H200)}")
    return text.replace("[tool.testfleet.policy]\n",
                        '[tool.testfleet.policy]\nauthorize_labels = ["please"]\n')


@pytest.fixture
def fork_pr(example_project: Path) -> dict[str, Any]:
    """A base commit with the generated workflows (MI300X switched on), a fork commit that
    edits the action, the trusted workflow and the config, and GitHub's merge commit."""
    root = example_project
    pyproject = root / "pyproject.toml"
    pyproject.write_text(re.sub(r'(?m)^disabled = "MI300X[^\n]*\n', "", pyproject.read_text()))
    from testfleet.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["-C", str(root), "init", "--github", "--install", "true"])
    assert info.value.code == 0
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    git(root, "checkout", "-q", "-b", "fork")
    (root / ".github" / "actions" / "testfleet" / "action.yml").write_text(FORK_ACTION)
    for workflow in (root / TRUSTED, root / STAGES):  # the stage jobs' runners: STAGES
        workflow.write_text(re.sub(r"(?m)^(\s+runs-on:).*$", r"\1 [self-hosted, h200]",
                                   workflow.read_text()))
    pyproject.write_text(_edit_config(pyproject.read_text()))
    train = root / "fleetlib" / "train.py"  # a change every GPU stage is affected by
    train.write_text(train.read_text() + "\n# fork change\n")
    git(root, "commit", "-q", "-am", "fork: a faster runner, please")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "Merge fork into main", "fork")
    git(root, "update-ref", "refs/pull/414/merge", "HEAD")
    git(root, "reset", "-q", "--hard", base)  # main is the base again
    return {"root": root, "base": base, "head": head}


def _payload(tmp_path: Path, pr: dict[str, Any], action: str, labels: list[str],
             added: str | None, head: str | None = None) -> Path:
    data = json.loads((EVENTS / "pr_fork_labeled.json").read_text())
    data["action"] = action
    data["number"] = data["pull_request"]["number"] = 414
    data["pull_request"]["labels"] = [{"name": n} for n in labels]
    data["pull_request"]["base"]["sha"] = pr["base"]
    data["pull_request"]["head"]["sha"] = head or pr["head"]
    if added is not None:
        data["label"] = {"name": added}
    path = tmp_path / f"payload-{action}-{data['pull_request']['head']['sha'][:12]}.json"
    path.write_text(json.dumps(data))
    return path


def _checkout(root: Path, ws: Path) -> Any:
    """actions/checkout as GitHub runs it for pull_request_target: the default checkout is
    the base branch; ``ref``/``path`` fetch that ref into that path. Other actions: no-ops."""

    def uses(step: dict[str, Any], cwd: Path, contexts: dict[str, Any]) -> None:
        if not step["uses"].startswith("actions/checkout@"):
            return
        with_ = step.get("with", {})
        assert with_["persist-credentials"] is False
        if "path" not in with_:
            return  # the workspace is already the base branch's checkout
        dest = cwd / with_["path"]
        git(cwd, "clone", "-q", str(root), str(dest))
        git(dest, "fetch", "-q", "origin", interpolate(with_["ref"], contexts))
        git(dest, "checkout", "-q", "FETCH_HEAD")

    return uses


def _show(root: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(root), "show", f"{rev}:{path}"],
                          capture_output=True, text=True, check=True).stdout


def play(pr: dict[str, Any], tmp_path: Path, action: str, labels: list[str],
         added: str | None = None, head: str | None = None) -> dict[str, Any]:
    """The base branch's trusted workflow for one pull_request_target event (``head``: the
    payload's pull_request.head.sha, the fork's first head by default): the plan job run
    for real, then each stage job's ``if``, ``runs-on`` and checkout. Returns what GitHub
    would dispatch: {job id: runs-on} for every job whose ``if`` holds, with its matrix and
    the commit it checks out; or, when the plan job fails, {"failed": its log}."""
    root: Path = pr["root"]
    # the base's trusted workflow with its calls of the base's stages workflow expanded
    workflow = expanded_text(_show(root, pr["base"], TRUSTED), _show(root, pr["base"], STAGES))
    payload = _payload(tmp_path, pr, action, labels, added, head)
    event = json.loads(payload.read_text())
    run = f"{payload.stem.removeprefix('payload-')}-{len(list(tmp_path.glob('ws-*')))}"
    ws = tmp_path / f"ws-{run}"
    git(tmp_path, "clone", "-q", str(root), str(ws))
    git(ws, "checkout", "-q", pr["base"])
    temp = tmp_path / f"runner-temp-{run}"
    temp.mkdir()
    runner = Runner(tmp_path, "pull_request_target", payload, env={"RUNNER_TEMP": str(temp)})
    contexts: dict[str, Any] = {"inputs": {}, "matrix": {}, "github": {
        "event_name": "pull_request_target", "ref": "refs/heads/main", "event": event,
        "repository": "fleet-org/fleet"}}
    plan_job = workflow["jobs"]["plan"]
    ok, _, logs = run_steps(runner, plan_job, ws, contexts, f"trusted-{run}",
                            uses=_checkout(root, ws))
    assert not (temp / MARKER).exists(), "the fork's action ran in the trusted plan job"
    if not ok:
        return {"failed": logs}
    outputs = {k: resolve(v, contexts) for k, v in plan_job["outputs"].items()}
    plan = json.loads((ws / "plan.json").read_text())
    assert outputs["digest"] == plan["digest"]
    contexts["needs"] = {"plan": {"outputs": outputs, "result": "success"}}
    stages = json.loads(outputs["stages"])
    status = {"cancelled": False, "failure": False}
    dispatched: dict[str, Any] = {}
    for name, job in workflow["jobs"].items():
        if name in ("plan", "reconcile", "rescued", "testfleet") or name.endswith("-rescue"):
            continue  # rescue jobs: their steps are the stage job's (tests/integrations)
        if truthy(evaluate(job["if"].removeprefix("${{").removesuffix("}}"), contexts, status)):
            lane = re.search(r"stages\)+\['([^']+)'\]", job["if"]).group(1)  # type: ignore[union-attr]
            secrets = {k: interpolate(v, {**contexts, "secrets": {k: "s3cret"}})
                       for s in job["steps"] if s.get("name") == "Run"
                       for k, v in s.get("env", {}).items()}
            checkout = next(s for s in job["steps"]
                            if s.get("uses", "").startswith("actions/checkout@"))
            dispatched[lane] = {"runs-on": job["runs-on"], "secrets": secrets,
                                "matrix": stages[lane]["matrix"]["include"],
                                "commit": interpolate(checkout["with"]["ref"], contexts)}
    return {"plan": plan, "outputs": outputs, "dispatched": dispatched}


def _base_runners(pr: dict[str, Any]) -> dict[str, list[str]]:
    text = subprocess.run(["git", "-C", str(pr["root"]), "show", f"{pr['base']}:pyproject.toml"],
                          capture_output=True, text=True, check=True).stdout
    stages = tomllib.loads(text)["tool"]["testfleet"]["stages"]
    return {name: stage.get("runs_on", ["ubuntu-latest"]) for name, stage in stages.items()}


def test_a_fork_cannot_choose_its_runners_or_authorize_itself(fork_pr: dict[str, Any],
                                                               tmp_path: Path) -> None:
    """A push to a fork's PR that carries an authorizing label from before (synchronize),
    plus the fork's own 'please' label: nothing trusted_only is planned, the fork's action
    never runs, and every dispatched job runs where the base branch says."""
    run = play(fork_pr, tmp_path, "synchronize", ["run-ci-amd", "run-ci-megatron", "please"])
    plan, dispatched = run["plan"], run["dispatched"]
    assert plan["policy"]["fork"] is True and plan["trust"]["source"] == "base"
    assert plan["policy"]["authorized"] is False and run["outputs"]["authorized"] == "false"
    assert MI300X not in dispatched  # trusted_only at the base, whatever the fork's config says
    assert {s["name"]: s["status"] for s in plan["stages"]}[MI300X] == "unauthorized"
    runners = _base_runners(fork_pr)
    assert dispatched, "\n".join(f"{s['name']}: {s['status']}: {s['reason']}" for s in plan["stages"])
    for lane, job in dispatched.items():
        expected = runners[lane]
        assert job["runs-on"] == expected
        assert all(entry["runs_on"] == expected for entry in job["matrix"])
        # an unauthorized plan: the stage's secrets are empty in every job
        assert all(v == "" for k, v in job["secrets"].items() if k != "TESTFLEET_DATABASE_URL")
    # the fork moved H100 to the H200s in its config; the base's H100 runners stay
    assert runners[H100] != H200 and dispatched.get(H100, {"runs-on": runners[H100]})[
        "runs-on"] == runners[H100]
    # the fork did ask for other runners: its own copies of the workflows name the H200s
    for path in (TRUSTED, STAGES):
        assert "runs-on: [self-hosted, h200]" in _show(fork_pr["root"], fork_pr["head"], path)


def test_a_maintainer_label_authorizes_the_base_runners_only(fork_pr: dict[str, Any],
                                                             tmp_path: Path) -> None:
    """Positive control: the label a maintainer adds (labeled) authorizes the fork, so the
    trusted_only MI300X stage runs, on the base's MI300X runners, with its secrets."""
    run = play(fork_pr, tmp_path, "labeled", ["run-ci-amd", "run-ci-megatron"], added="run-ci-amd")
    assert run["plan"]["policy"]["authorized"] is True
    dispatched, runners = run["dispatched"], _base_runners(fork_pr)
    assert MI300X in dispatched
    for lane, job in dispatched.items():
        assert job["runs-on"] == runners[lane]
        assert all(entry["runs_on"] == runners[lane] for entry in job["matrix"])
    # authorized: the stage's secrets reach its Run step
    assert all(v == "s3cret" for k, v in dispatched[MI300X]["secrets"].items()) or \
        not dispatched[MI300X]["secrets"]


def _rev(root: Path, rev: str) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", rev], capture_output=True,
                          text=True, check=True).stdout.strip()


def _push_after_the_label(pr: dict[str, Any]) -> str:
    """The fork pushes again after a maintainer labelled its head; GitHub recomputes
    refs/pull/<n>/merge. Returns the new head."""
    root: Path = pr["root"]
    git(root, "checkout", "-q", "fork")
    train = root / "fleetlib" / "train.py"
    train.write_text(train.read_text() + "# pushed after the label\n")
    git(root, "commit", "-q", "-am", "fork: nobody looked at this one")
    new_head = _rev(root, "HEAD")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "Merge fork into main", "fork")
    git(root, "update-ref", "refs/pull/414/merge", "HEAD")
    git(root, "reset", "-q", "--hard", pr["base"])
    return new_head


def test_a_label_authorizes_only_the_commit_it_was_set_on(fork_pr: dict[str, Any],
                                                          tmp_path: Path) -> None:
    """#36 item 2 (TOCTOU): the maintainer labels the fork's head, the fork pushes before
    the labelled run's plan job starts, so refs/pull/414/merge already merges the new push.
    The plan job refuses it and asks for the label again; nothing is planned or dispatched.
    Labelled again (an event naming the new head), the run is authorized for that head, and
    every test job checks out the merge commit of exactly the head that was labelled."""
    labelled = play(fork_pr, tmp_path, "labeled", ["run-ci-amd"], added="run-ci-amd")
    assert labelled["plan"]["policy"]["authorized"] is True
    for job in labelled["dispatched"].values():  # unmoved: the labelled head's merge commit
        assert _rev(fork_pr["root"], f"{job['commit']}^2") == fork_pr["head"]
    new_head = _push_after_the_label(fork_pr)
    moved = play(fork_pr, tmp_path, "labeled", ["run-ci-amd"], added="run-ci-amd")
    assert set(moved) == {"failed"}
    message = (f"the pull request moved after it was labelled (labelled {fork_pr['head']}, "
               f"now {new_head}): a maintainer must label it again")
    assert f"::error title=testfleet plan::{message}" in moved["failed"]
    # a push is no label: the fork's own synchronize run for the new head stays unauthorized
    pushed = play(fork_pr, tmp_path, "synchronize", ["run-ci-amd"], head=new_head)
    assert pushed["plan"]["policy"]["authorized"] is False and MI300X not in pushed["dispatched"]
    again = play(fork_pr, tmp_path, "labeled", ["run-ci-amd"], added="run-ci-amd", head=new_head)
    assert again["plan"]["policy"]["authorized"] is True and MI300X in again["dispatched"]
    for job in again["dispatched"].values():
        assert job["commit"] == _rev(fork_pr["root"], "refs/pull/414/merge")
        assert _rev(fork_pr["root"], f"{job['commit']}^2") == new_head


def test_the_pull_request_workflow_never_dispatches_a_self_hosted_job(example_project: Path) -> None:
    """testfleet.yml runs on pull_request (the PR's own file): its self-hosted jobs are
    skipped there whatever a plan says, so an unmodified workflow never asks for one."""
    from testfleet.config import load_project

    # render_workflow with the stage jobs of testfleet-stages.yml, as testfleet.yml calls them
    data = rendered(load_project(example_project).config)
    lanes = json.dumps({k: {"has_jobs": True} for k in data["jobs"]})
    everything = {"plan": {"result": "success", "outputs": {
        "stages": lanes, "bypass_fastfail": "true", "has_jobs": "true"}},
        # every lane's rescue job too (#40): never dispatched on pull_request either
        "reconcile": {"result": "success", "outputs": {"rescue": lanes, "has_rescue": "true"}}}
    status = {"cancelled": False, "failure": False}
    checked: set[str] = set()
    for event, expected in (("pull_request", False), ("push", True)):
        ctx = {"github": {"event_name": event}, "needs": everything}
        for name, job in data["jobs"].items():
            labels = job.get("runs-on")
            if isinstance(labels, list) and "self-hosted" in labels:
                cond = job["if"].removeprefix("${{").removesuffix("}}")
                assert truthy(evaluate(cond, ctx, status)) is expected, (event, name)
                checked.add(name)
    # every self-hosted stage, its plan job and its rescue job, was checked
    assert {"stage-c-4-gpu-h200", "stage-c-4-gpu-h200-rescue", MI300X, f"{MI300X}-rescue",
            H100, f"{H100}-rescue"} <= checked
    assert shutil.which("git")
