"""A whole CI run of the example project, played without GitHub.

The workflow that ``testfleet init --github`` generates is parsed and its own
``run:`` scripts are executed with bash, with the environment GitHub would give
them: the ``plan`` job on a recorded pull-request payload, then each wave's matrix
(gated as the workflow gates it), every CPU job in its own fresh checkout and its
own process, exactly as the wave job runs it. GPU jobs cannot run here; they are
checked to be planned and never executed. Then the JUnit files are merged and
every registration's fate in the plan is compared with what actually happened,
using an independent witness: a ``sitecustomize`` that logs every Python process
started, so a test file counts as run only when a process really ran it.

The Buildkite bootstrap that ``testfleet init --buildkite`` writes is played the
same way: it plans from Buildkite's PR variables, uploads the plan and the per-job
pipeline to a stand-in ``buildkite-agent`` (with Buildkite's upload-time ``$$``
rule), and one step of that pipeline runs its job in a fresh checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from integrations.gha_calls import expanded_file
from integrations.gha_expr import evaluate, interpolate, truthy
from support import github_output_dict

EVENTS = Path(__file__).resolve().parent.parent / "fixtures" / "github_events"
PWNED = Path("/tmp/testfleet-pwned")

SITECUSTOMIZE = '''
import atexit, json, os, sys
def _log():
    path = os.environ.get("TESTFLEET_SIM_LOG")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (json.dumps({"pid": os.getpid(), "argv": sys.argv, "cwd": os.getcwd()}) + "\\n").encode())
        os.close(fd)
atexit.register(_log)
'''


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "sim", "GIT_AUTHOR_EMAIL": "sim@example.invalid",
           "GIT_COMMITTER_NAME": "sim", "GIT_COMMITTER_EMAIL": "sim@example.invalid"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


class Runner:
    """Just enough of a GitHub runner: bash with the step's env, files for the
    file commands, and the default variables a run script may read."""

    def __init__(self, tmp: Path, event: str, payload: Path,
                 env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.witness = tmp / "witness"
        self.witness.mkdir(exist_ok=True)
        (self.witness / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.log = tmp / "processes.jsonl"
        self.base = {
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", str(tmp)),
            "LANG": "C.UTF-8",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(payload),
            "PYTHONPATH": str(self.witness),
            "TESTFLEET_SIM_LOG": str(self.log),
            **(env or {}),
        }

    def step(self, script: str, cwd: Path, env: dict[str, str], name: str) -> tuple[int, str, dict[str, str]]:
        output = self.tmp / f"{name}.output"
        summary = self.tmp / f"{name}.summary"
        output.write_text("")
        full = {**self.base, **env, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script],
                              cwd=cwd, env=full, capture_output=True, text=True, timeout=600,
                              check=False)
        return proc.returncode, proc.stdout + proc.stderr, github_output_dict(output.read_text())


def resolve(expr: str, contexts: dict[str, Any]) -> str:
    """``${{ a.b.c }}`` as the generated env blocks use it (plain values as they are; other
    expressions through the expression evaluator)."""
    if "${{" not in expr:
        return expr
    m = re.fullmatch(r"\$\{\{ ([a-z_.0-9-]+) \}\}", expr)
    if not m:
        return interpolate(expr, contexts)
    value: Any = contexts
    for part in m.group(1).split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


Uses = Callable[[dict[str, Any], Path, dict[str, Any]], None]


def run_action(runner: Runner, step: dict[str, Any], cwd: Path, contexts: dict[str, Any],
               name: str, uses: Uses | None = None,
               keep_going: bool = False) -> tuple[int, str, dict[str, str]]:
    """A ``uses: ./<path>`` step: the action's own run steps read from that path of the
    workspace (``cwd``), as GitHub resolves a local action, with its inputs (defaults filled
    in), the step's env and the action's ``working-directory``, as GitHub runs a composite
    action; a local action it uses (the stage jobs' shared one runs testfleet's) is played
    the same way, each step under its ``if:``. Installing is the harness's job (testfleet
    is on PATH); other actions (artifacts, caches) are the harness's too. ``keep_going``:
    after a failed step, play on as GitHub does: the steps whose ``if:`` holds on failure
    (``!cancelled()``, ``always()``) run, the others are skipped, and the failure is the
    action's."""
    action = yaml.safe_load((cwd / step["uses"] / "action.yml").read_text())
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs.update({k: resolve(str(v), contexts) for k, v in step.get("with", {}).items()})
    ctx = {**contexts, "inputs": inputs}
    step_env = {k: resolve(v, contexts) for k, v in step.get("env", {}).items()}
    code, logs, outputs = 0, "", {}
    failed = 0
    for i, inner in enumerate(action["runs"]["steps"]):
        cond = inner.get("if", "")
        if failed and not cond:
            continue  # success(), the default condition, is false after a failure
        if cond and not truthy(evaluate(cond.removeprefix("${{").removesuffix("}}"), ctx,
                                        {"cancelled": False, "failure": (failed or code) != 0})):
            continue
        if inner.get("uses", "").startswith("./"):  # a local action inside this one
            nested = {**inner, "env": {**step.get("env", {}), **inner.get("env", {})}}
            code, log, outputs = run_action(runner, nested, cwd, ctx, f"{name}-a{i}", uses,
                                            keep_going)
            logs += log
            if code != 0:
                if not keep_going:
                    break
                failed = failed or code
            continue
        if "uses" in inner and uses is not None:
            uses(inner, cwd, ctx)
            continue
        if "run" not in inner or inner.get("name") == "Install testfleet":
            continue
        env = {**step_env, **{k: resolve(v, ctx) for k, v in inner.get("env", {}).items()}}
        where = cwd / resolve(str(inner.get("working-directory", ".")), ctx)
        code, log, outputs = runner.step(inner["run"], where, env, f"{name}-a{i}")
        logs += log
        if code != 0:
            if not keep_going:
                break
            failed = failed or code
    code = failed or code
    exposed = {k: outputs.get(v["value"].split(".")[-1].rstrip(" }"), "")
               for k, v in action.get("outputs", {}).items()}
    return code, logs, exposed


def run_steps(runner: Runner, job: dict[str, Any], cwd: Path, contexts: dict[str, Any],
              name: str, uses: Uses | None = None,
              keep_going: bool = False) -> tuple[bool, dict[str, str], str]:
    """Run a job's own ``run:`` steps and testfleet action steps whose ``if`` holds;
    ``uses(step, cwd, contexts)`` plays any other action (else the harness does)."""
    outputs: dict[str, str] = {}
    logs = ""
    for i, step in enumerate(job["steps"]):
        cond = step.get("if", "")
        if cond and not truthy(evaluate(cond, contexts, {"cancelled": False, "failure": False})):
            continue
        if "uses" in step and not step["uses"].startswith("./") and uses is not None:
            uses(step, cwd, contexts)
            continue
        if step.get("uses", "").startswith("./"):
            code, log, step_out = run_action(runner, step, cwd, contexts, f"{name}-{i}", uses,
                                             keep_going)
            logs += log
            if "id" in step:
                contexts.setdefault("steps", {})[step["id"]] = {"outputs": step_out}
                outputs.update(step_out)
            if code != 0:
                return False, outputs, logs
            continue
        if "run" not in step or step.get("name") == "Install testfleet":
            continue
        env = {k: resolve(v, contexts) for k, v in step.get("env", {}).items()}
        where = cwd / step.get("working-directory", ".")
        code, log, step_out = runner.step(step["run"], where, env, f"{name}-{i}")
        logs += log
        if "id" in step:
            contexts.setdefault("steps", {})[step["id"]] = {"outputs": step_out}
            outputs.update(step_out)
        if code != 0:
            return False, outputs, logs
    return True, outputs, logs


@pytest.fixture
def repo(example_project: Path) -> Path:
    """The example as a repository whose HEAD is a PR commit on top of its base."""
    git(example_project, "init", "-q", "-b", "main")
    git(example_project, "add", "-A")
    git(example_project, "commit", "-q", "-m", "base")
    (example_project / "fleetlib" / "train.py").write_text(
        (example_project / "fleetlib" / "train.py").read_text() + "\n# PR change\n")
    git(example_project, "commit", "-q", "-am", "pr")
    return example_project


def play_reconcile(runner: Runner, workflow: dict[str, Any], repo: Path, ws: Path,
                   plan_ws: Path, status_files: dict[str, Path],
                   contexts: dict[str, Any]) -> tuple[bool, str]:
    """The workflow's reconcile job: its checkout, the plan and every job's
    ``testfleet-status-<id>`` artifact downloaded (each into its own folder, as
    download-artifact does with a pattern), then its own steps."""
    job = workflow["jobs"]["reconcile"]
    assert "needs.plan.result == 'success'" in job["if"] and "always()" in job["if"]
    git(ws.parent, "clone", "-q", str(repo), str(ws))

    def uses(step: dict[str, Any], cwd: Path, ctx: dict[str, Any]) -> None:
        with_ = step.get("with", {})
        if step["uses"].startswith("actions/download-artifact@") and with_.get("name"):
            shutil.copy(plan_ws / "plan.json", cwd / "plan.json")
        elif step["uses"].startswith("actions/download-artifact@"):
            assert with_["pattern"] == "testfleet-status-*"
            for job_id, folder in status_files.items():
                shutil.copytree(folder, cwd / with_["path"] / f"testfleet-status-{job_id}")

    ok, _, logs = run_steps(runner, job, ws, dict(contexts), ws.name, uses=uses)
    return ok, logs


def workflow_for(project: Path) -> dict[str, Any]:
    from testfleet.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["-C", str(project), "init", "--github"])
    assert info.value.code == 0
    # the stage jobs (testfleet-stages.yml) expanded into their callers, as GitHub runs them
    return expanded_file(project / ".github" / "workflows" / "testfleet.yml")


def pull_request_plan(repo: Path, tmp_path: Path) -> tuple[dict[str, Any], Runner, dict[str, Any],
                                                             Path, dict[str, str]]:
    """A same-repository pull request's run up to its plan job: the generated workflow
    (committed), the runner, the event's contexts, the plan job played in its own checkout
    (it must pass) with its outputs in ``needs.plan``.
    Returns (workflow, runner, contexts, the plan job's workspace, its outputs)."""
    workflow = workflow_for(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add the workflow")
    runner = Runner(tmp_path, "pull_request", EVENTS / "pr_same_repo.json")
    payload = json.loads((EVENTS / "pr_same_repo.json").read_text())
    contexts: dict[str, Any] = {"inputs": {}, "matrix": {}, "github": {
        "event_name": "pull_request", "ref": "refs/pull/7/merge", "event": payload}}
    plan_ws = tmp_path / "plan-job"
    git(tmp_path, "clone", "-q", str(repo), str(plan_ws))
    ok, _, logs = run_steps(runner, workflow["jobs"]["plan"], plan_ws, contexts, "plan")
    assert ok, logs
    outputs = {k: resolve(v, contexts) for k, v in workflow["jobs"]["plan"]["outputs"].items()}
    contexts["needs"] = {"plan": {"outputs": outputs, "result": "success"}}
    return workflow, runner, contexts, plan_ws, outputs


def test_a_pull_request_run_end_to_end(repo: Path, tmp_path: Path) -> None:
    from junitparser import JUnitXml

    # -- the plan job, in its own checkout ---------------------------------
    workflow, runner, contexts, plan_ws, job_outputs = pull_request_plan(repo, tmp_path)
    plan = json.loads((plan_ws / "plan.json").read_text())  # the uploaded artifact
    assert job_outputs["digest"] == plan["digest"]
    assert plan["policy"]["include_labels"] == ["megatron"]
    assert any("## testfleet plan" in p.read_text() for p in tmp_path.glob("plan-*.summary"))

    # -- the stage jobs, in the workflow's order (a stage after the stages it needs) --
    waves = int(contexts["steps"]["plan"]["outputs"]["waves"])  # the plan step's
    assert waves == 2
    stages = json.loads(job_outputs["stages"])
    stage_jobs = [name for name in workflow["jobs"]  # rescue jobs: test_a_lost_runner_...
                  if name not in ("plan", "history", "reconcile", "rescued", "testfleet")
                  and not name.endswith("-rescue")]
    assert "history" in workflow["jobs"]  # the history loop is on by default
    assert len(stage_jobs) == len(stages)
    # a pull request plans only the GitHub-hosted stages here (testfleet-trusted.yml, the rest)
    assert {s for s, v in stages.items() if v["has_jobs"]} <= {"stage-a-cpu", "stage-b-cpu"}
    # the stage jobs are called (job 'stages'): its if gates every one of them, whatever a
    # lane's matrix says
    no_jobs = {**contexts, "needs": {"plan": {"result": "success", "outputs": {
        **job_outputs, "has_jobs": "false"}}}}
    for name in stage_jobs:
        cond = workflow["jobs"][name]["if"].removeprefix("${{").removesuffix("}}")
        assert not truthy(evaluate(cond, no_jobs, {"cancelled": False, "failure": False})), name
    results: dict[str, str] = {}
    ran_jobs: list[str] = []
    gpu_jobs: list[dict[str, Any]] = []
    junit_files: list[Path] = []
    status_files: dict[str, Path] = {}
    for name in stage_jobs:
        job = workflow["jobs"][name]
        stage = re.search(r"stages\)+\['([^']+)'\]", job["if"]).group(1)  # type: ignore[union-attr]
        assert job["needs"][0] == "plan" and all(results.get(n) for n in job["needs"][1:])
        status = {"cancelled": False, "failure": False}
        if not truthy(evaluate(job["if"].removeprefix("${{").removesuffix("}}"), contexts, status)):
            assert not stages[stage]["has_jobs"]
            results[name] = "skipped"  # asks for no runner
            continue
        if not stages[stage]["has_jobs"]:
            results[name] = "skipped"  # asks for no runner
            continue
        matrix = stages[stage]["matrix"]["include"]
        assert matrix, "has_jobs says true, so the matrix has entries"
        for entry in matrix:
            assert entry["stage"] == stage
            if entry["backend"] != "cpu":
                assert entry["runs_on"][0] == "self-hosted" and entry["container"]
                assert job["container"]["image"] == entry["container"]
                gpu_jobs.append(entry)
                continue
            workspace = tmp_path / "jobs" / entry["id"]
            git(tmp_path, "clone", "-q", str(repo), str(workspace))  # actions/checkout
            shutil.copy(plan_ws / "plan.json", workspace / "plan.json")  # download-artifact
            contexts["matrix"] = entry
            ok, _, logs = run_steps(runner, job, workspace, contexts, entry["id"])
            assert ok, logs  # every CPU job passes, so every later stage may run
            # a pull request records nothing for the history job (which it does not run)
            assert not (workspace / "testfleet-history").exists()
            ran_jobs.append(entry["id"])
            junit_files += list((workspace / "testfleet-junit").glob("*.xml"))  # upload-artifact
            status_files[entry["id"]] = workspace / "testfleet-status"  # testfleet-status-<id>
            summaries = [p.read_text() for p in tmp_path.glob(f"{entry['id']}-*.summary")]
            assert any(entry["id"] in text for text in summaries)  # the runner's step summary
        results[name] = "success"

    # -- the reconcile job: every planned job reported, each file exactly once ---------
    ok, logs = play_reconcile(runner, workflow, repo, tmp_path / "reconcile", plan_ws,
                              status_files, contexts)
    assert ok, logs
    results["reconcile"] = "success"
    # one shard's job never reports (its runner vanished): reconcile fails, naming it
    lost = sorted(status_files)[0]
    ok, logs = play_reconcile(runner, workflow, repo, tmp_path / "reconcile-lost", plan_ws,
                              {k: v for k, v in status_files.items() if k != lost}, contexts)
    assert not ok and lost in logs, logs
    assert "::error" in logs

    # -- the summary job ------------------------------------------------------
    summary_job = workflow["jobs"]["testfleet"]
    contexts["needs"].update({k: {"result": v} for k, v in results.items()})
    all_results = " ".join(["success", *results.values()])
    lost_run = " ".join(["success", *[v for k, v in results.items() if k != "reconcile"],
                         "failure"])
    failed = runner.step(summary_job["steps"][0]["run"], tmp_path, {"RESULTS": lost_run},
                         "summary-failed")
    assert failed[0] == 1  # the required check fails when reconcile fails
    code, log, _ = runner.step(summary_job["steps"][0]["run"], tmp_path, {"RESULTS": all_results}, "summary")
    assert code == 0, log

    # -- what happened, against the plan ----------------------------------
    cpu_jobs = [j for j in plan["jobs"] if j["backend"] == "cpu"]
    assert sorted(ran_jobs) == sorted(j["id"] for j in cpu_jobs)
    # GPU stages are planned for a pull request by testfleet-trusted.yml only (test_fork_safety)
    assert not gpu_jobs and all(j["backend"] == "cpu" for j in plan["jobs"])
    planned_cpu = Counter(t["file"] for j in cpu_jobs for t in j["tests"])
    assert planned_cpu and max(planned_cpu.values()) == 1

    merged = JUnitXml()
    for path in sorted(junit_files):
        for suite in JUnitXml.fromfile(str(path)):
            merged.add_testsuite(suite)
    cases = [case for suite in merged for case in suite]
    # One testcase per test (pytest stages) carries its file as a property; a file-level
    # testcase is named by the file. Each planned file must appear in exactly one job's JUnit.
    reported: Counter[str] = Counter()
    for path in sorted(junit_files):
        files_here = set()
        for elem in ElementTree.parse(path).iter("testcase"):
            prop = next((p.get("value") for p in elem.iter("property") if p.get("name") == "file"),
                        None)
            files_here.add(prop or elem.get("name"))
        reported.update(files_here)
    assert reported == planned_cpu  # each planned file reported exactly once
    assert all(case.is_passed for case in cases), [c.name for c in cases if not c.is_passed]
    assert len(junit_files) == len(cpu_jobs)

    registered = {t["file"] for j in plan["jobs"] for t in j["tests"]} | {
        s["file"] for s in plan["skipped"]}
    started = Counter()
    for line in runner.log.read_text().splitlines():
        record = json.loads(line)
        for arg in record["argv"]:
            rel = os.path.relpath(os.path.join(record["cwd"], arg)) if arg.endswith(".py") else ""
            for f in registered:
                if rel.endswith(f) or arg == f:
                    started[f] += 1
    assert started == planned_cpu  # the witness: each planned file ran in exactly one process
    skipped = {s["file"] for s in plan["skipped"]}
    assert not skipped & set(started)  # no skipped file ran
    gpu_files = {s["file"] for s in plan["skipped"] if s["backend"] != "cpu"}
    assert gpu_files and not gpu_files & set(started)

    # every registration has exactly one fate
    listed = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(repo), "list",
                             "--format", "json"], capture_output=True, text=True, check=True,
                            timeout=120)
    regs = Counter((r["file"], r["backend"]) for r in json.loads(listed.stdout)["registrations"])
    fates = Counter([(t["file"], j["backend"]) for j in plan["jobs"] for t in j["tests"]]
                    + [(s["file"], s["backend"]) for s in plan["skipped"]])
    assert fates == regs


def test_hostile_payload_through_the_workflow_scripts(repo: Path, tmp_path: Path) -> None:
    """The plan job's own scripts, fed the hostile fork PR and a hostile cadence input:
    nothing executes, and what reaches the outputs is well-formed."""
    PWNED.unlink(missing_ok=True)
    workflow = workflow_for(repo)
    runner = Runner(tmp_path, "pull_request", EVENTS / "pr_hostile.json")
    plan_job = workflow["jobs"]["plan"]
    contexts: dict[str, Any] = {"inputs": {"cadence": "$(touch /tmp/testfleet-pwned)`id`"}}
    ok, _, logs = run_steps(runner, plan_job, repo, contexts, "hostile-cadence")
    assert not ok and "unknown cadence" in logs
    contexts = {"inputs": {}}
    ok, outputs, logs = run_steps(runner, plan_job, repo, contexts, "hostile")
    assert ok, logs
    assert set(outputs) >= {"matrix", "waves", "digest", "has_jobs", "stages"}  # the action's outputs
    for value in outputs.values():
        assert "${{" not in value and "$(" not in value and "\r" not in value
    assert not PWNED.exists()


AGENT = """#!/bin/sh
# A stand-in buildkite-agent: artifacts and uploaded pipelines live in $STORE.
set -e
case "$1 $2" in
  "artifact upload")
    mkdir -p "$STORE/files/$(dirname "$3")"
    cp "$3" "$STORE/files/$3"
    cp "$3" "$STORE/artifact-$(basename "$3")" ;;
  "artifact download")
    found=0
    for f in "$STORE"/files/$3; do
      [ -e "$f" ] || continue
      rel="${f#"$STORE"/files/}"
      mkdir -p "$4/$(dirname "$rel")"
      cp "$f" "$4/$rel"
      found=1
    done
    [ "$found" = 1 ] || { echo "no artifact matches $3" >&2; exit 1; } ;;
  "pipeline upload") cp "$3" "$STORE/uploaded-pipeline.json" ;;
  "annotate --style") cat > "$STORE/annotation-$3-$5.md" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


class Buildkite:
    """Just enough of Buildkite: upload-time interpolation ($$ -> $) and an agent."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store = tmp / "bk-store"
        self.store.mkdir()
        agent = tmp / "bk-bin" / "buildkite-agent"
        agent.parent.mkdir()
        agent.write_text(AGENT)
        agent.chmod(0o755)
        self.path = f"{agent.parent}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}" \
                    f"{os.environ.get('PATH', '')}"

    def run(self, commands: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        uploaded = commands.replace("$$", "$")
        full = {"PATH": self.path, "HOME": os.environ.get("HOME", str(self.tmp)), "LANG": "C.UTF-8",
                "STORE": str(self.store), "BUILDKITE": "true",
                **{k: v.replace("$$", "$") for k, v in env.items()}}
        return subprocess.run(["bash", "-c", uploaded], cwd=cwd, env=full, capture_output=True,
                              text=True, timeout=300, check=False)


BK_REPO = "git@github.com:fleet-org/fleet.git"


@pytest.mark.parametrize(("head_repo", "fork"), [
    ("git://github.com/octo-contrib/fleet.git", True),
    ("https://github.com/Fleet-Org/fleet", False),
])
def test_buildkite_bootstrap_plans_and_a_step_runs_its_job(repo: Path, tmp_path: Path,
                                                           head_repo: str, fork: bool) -> None:
    """The generated .buildkite/pipeline.yml plans a PR from Buildkite's variables
    (hostile labels included), uploads the plan and the per-job pipeline; one CPU
    step of that pipeline then runs its job in a fresh checkout."""
    from junitparser import JUnitXml

    from testfleet.cli.main import main

    PWNED.unlink(missing_ok=True)
    with pytest.raises(SystemExit) as info:
        main(["-C", str(repo), "init", "--buildkite", "--install", "true"])
    assert info.value.code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add the bootstrap pipeline")
    bootstrap = yaml.safe_load((repo / ".buildkite" / "pipeline.yml").read_text())
    bk = Buildkite(tmp_path)
    plan_ws = tmp_path / "bk-plan"
    git(tmp_path, "clone", "-q", str(repo), str(plan_ws))
    # CI-prefixed, so that they warn (#26: a label that is no CI label at all is silent)
    labels = "run-ci-megatron,run-ci-$(touch /tmp/testfleet-pwned),run-ci-`id`"
    proc = bk.run(bootstrap["steps"][0]["command"], plan_ws, {
        "BUILDKITE_PULL_REQUEST": "412", "BUILDKITE_REPO": BK_REPO,
        "BUILDKITE_PULL_REQUEST_REPO": head_repo, "BUILDKITE_PULL_REQUEST_LABELS": labels})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not PWNED.exists()
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    assert plan["policy"]["fork"] is fork
    assert plan["policy"]["include_labels"] == ["megatron"]
    pipeline = json.loads((bk.store / "uploaded-pipeline.json").read_text())
    # first the notice step: the dormant MI300X hole and the warning about the hostile
    # labels (they grant nothing) become a build annotation, as data, never as shell code
    notice, *job_steps, wait, reconcile = pipeline["steps"]  # a PR's build writes no history
    assert len(job_steps) == len(plan["jobs"])
    assert wait == {"wait": None, "continue_on_failure": True}
    assert reconcile["key"] == "testfleet-reconcile"
    proc = bk.run("set -e\n" + "\n".join(notice["commands"]), plan_ws, notice["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not PWNED.exists()
    annotation = (bk.store / "annotation-warning-testfleet-holes.md").read_text()
    assert "stage-c-4-gpu-mi300x" in annotation and "touch /tmp/testfleet-pwned" in annotation

    step = next(s for s in job_steps if s["env"]["TESTFLEET_JOB_ID"].startswith("stage-b"))
    workspace = tmp_path / "bk-job"
    git(tmp_path, "clone", "-q", str(repo), str(workspace))
    proc = bk.run("set -e\n" + "\n".join(step["commands"]), workspace, step["env"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = next(j for j in plan["jobs"] if j["id"] == step["env"]["TESTFLEET_JOB_ID"])
    (xml,) = (workspace / "testfleet-junit").glob("*.xml")
    names = sorted(case.name for suite in JUnitXml.fromfile(str(xml)) for case in suite)
    assert names == sorted(t["file"] for t in job["tests"])


def test_buildkite_bootstrap_schedules_need_a_cadence(repo: Path, tmp_path: Path) -> None:
    from testfleet.integrations.buildkite import bootstrap

    command = yaml.safe_load(bootstrap(install="true"))["steps"][0]["command"]
    bk = Buildkite(tmp_path)
    proc = bk.run(command, repo, {"BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_SOURCE": "schedule"})
    assert proc.returncode == 2 and "TESTFLEET_CADENCE" in proc.stderr
    proc = bk.run(command, repo, {"BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_SOURCE": "schedule",
                                  "TESTFLEET_CADENCE": "nightly"})
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((bk.store / "artifact-plan.json").read_text())
    assert plan["policy"]["cadence"] == "nightly"


@pytest.mark.parametrize(("event", "payload", "inputs", "expect"), [
    # a reusable-workflow call sees the caller's event and payload; the cadence input wins
    ("push", "workflow_call_push.json", {"cadence": "release"}, ("push", "release")),
    # a caller event testfleet does not plan for still plans, as a workflow_call
    ("release", "workflow_call_push.json", {"cadence": "weekly"}, ("workflow_call", "weekly")),
    # a manual run: the payload's inputs and the inputs context agree
    ("workflow_dispatch", "workflow_dispatch.json", {"cadence": "nightly", "match_all_labels": True},
     ("workflow_dispatch", "nightly")),
    ("schedule", "schedule_weekly.json", {}, ("schedule", "weekly")),
])
def test_plan_job_scripts_on_each_trigger(repo: Path, tmp_path: Path, event: str, payload: str,
                                          inputs: dict[str, Any], expect: tuple[str, str]) -> None:
    workflow = workflow_for(repo)
    runner = Runner(tmp_path, event, EVENTS / payload)
    contexts: dict[str, Any] = {"inputs": inputs}
    ok, outputs, logs = run_steps(runner, workflow["jobs"]["plan"], repo, contexts, "plan")
    assert ok, logs
    plan = json.loads((repo / "plan.json").read_text())
    assert (plan["policy"]["event"], plan["policy"]["cadence"]) == expect
    assert outputs["cadence"] == expect[1] and outputs["digest"] == plan["digest"]


def run_job(runner: Runner, job: dict[str, Any], cwd: Path, contexts: dict[str, Any], name: str,
            uses: Uses | None = None) -> tuple[bool, dict[str, str], str]:
    """:func:`run_steps` with the job's own ``env:`` in every step's environment and in the
    ``env`` context, as GitHub gives it."""
    env = {k: resolve(str(v), contexts) for k, v in (job.get("env") or {}).items()}
    saved = dict(runner.base)
    runner.base.update(env)
    try:
        return run_steps(runner, job, cwd, {**contexts, "env": env}, name, uses=uses)
    finally:
        runner.base = saved


def test_a_lost_runner_is_rescued_through_the_workflow(repo: Path, tmp_path: Path) -> None:
    """#40, played through the generated workflow's own scripts: one shard's runner is lost
    (it never reports); the reconcile job's rescue matrix holds exactly its files, the
    rescue job (the stage job's very steps) runs them, and the reconcile after the rescue
    passes and names them. A shard whose test failed gets no rescue, and after the rescue
    its failure still fails the run."""
    from testfleet.reconcile.rescue import load_rescue

    workflow, runner, contexts, plan_ws, outputs = pull_request_plan(repo, tmp_path)
    plan = json.loads((plan_ws / "plan.json").read_text())
    stages = json.loads(outputs["stages"])
    job_of = {name: re.search(r"stages\)+\['([^']+)'\]", job["if"]).group(1)  # type: ignore[union-attr]
              for name, job in workflow["jobs"].items()
              if "needs.plan.outputs.stages" in job.get("if", "")}
    entries = [(name, e) for name, lane in job_of.items() if stages[lane]["has_jobs"]
               for e in stages[lane]["matrix"]["include"] if e["backend"] == "cpu"]
    multi = [e for _, e in entries if e["n_tests"] > 1]
    assert len(entries) >= 2 and multi, entries
    failing = multi[-1]  # a shard whose first file fails: fast-fail leaves the rest NOT_RUN
    lost = next(e for _, e in entries if e["id"] != failing["id"])
    statuses: dict[str, Path] = {}

    def play(name: str, entry: dict[str, Any], label: str, edit: str | None = None) -> Path:
        ws = tmp_path / "jobs" / label
        git(tmp_path, "clone", "-q", str(repo), str(ws))
        shutil.copy(plan_ws / "plan.json", ws / "plan.json")
        if (plan_ws / "rescue.json").exists() and entry.get("rescue"):
            shutil.copy(plan_ws / "rescue.json", ws / "rescue.json")  # download-artifact
        if edit is not None:
            (ws / edit).write_text("raise SystemExit('this test fails')\n")
        contexts["matrix"] = entry
        run_job(runner, workflow["jobs"][name], ws, contexts, label)
        return ws / "testfleet-status"

    for name, entry in entries:
        if entry["id"] == lost["id"]:
            continue  # its runner is lost: nothing of it ever reports
        statuses[entry["id"]] = play(name, entry, entry["id"])
    first_file = next(j for j in plan["jobs"] if j["id"] == failing["id"])["tests"][0]["file"]
    failed_status = play(next(n for n, e in entries if e["id"] == failing["id"]),
                         failing, failing["id"] + "-failed", edit=first_file)

    def reconcile(job_name: str, found: dict[str, Path], label: str,
                  rescue_store: Path | None = None) -> tuple[bool, dict[str, str], str]:
        ws = tmp_path / label
        git(tmp_path, "clone", "-q", str(repo), str(ws))

        def uses(step: dict[str, Any], cwd: Path, ctx: dict[str, Any]) -> None:
            with_ = step.get("with", {})
            if step["uses"].startswith("actions/download-artifact@") and \
                    with_.get("name") == "testfleet-plan":
                shutil.copy(plan_ws / "plan.json", cwd / "plan.json")
            elif step["uses"].startswith("actions/download-artifact@") and \
                    with_.get("name") == "testfleet-rescue":
                assert rescue_store is not None
                shutil.copy(rescue_store, cwd / "rescue.json")
            elif step["uses"].startswith("actions/download-artifact@"):
                for job_id, folder in found.items():
                    shutil.copytree(folder, cwd / with_["path"] / f"testfleet-status-{job_id}")
            elif step["uses"].startswith("actions/upload-artifact@"):
                assert with_["name"] == "testfleet-rescue"
                shutil.copy(cwd / "rescue.json", plan_ws / "rescue.json")  # the artifact

        ctx = dict(contexts)
        ok, _, logs = run_job(runner, workflow["jobs"][job_name], ws, ctx, label, uses=uses)
        job_outputs = {k: resolve(v, ctx) for k, v in
                       (workflow["jobs"][job_name].get("outputs") or {}).items()}
        return ok, job_outputs, logs

    # -- the test failure alone: no rescue, the run fails as before -----------------------
    alone = {**{k: v for k, v in statuses.items() if k != failing["id"]},
             failing["id"]: failed_status}
    lost_job = next(n for n, e in entries if e["id"] == lost["id"])
    ok, out, logs = reconcile("reconcile", {**alone, lost["id"]: play(lost_job, lost, "lost-ok")},
                              "reconcile-failed-only")
    assert not ok and out["has_rescue"] == "false", logs
    assert not (plan_ws / "rescue.json").exists()

    # -- one lost runner and one failed shard: only the lost shard's files are rescued ----
    ok, out, logs = reconcile("reconcile", alone, "reconcile-both")
    assert not ok and out["has_rescue"] == "true", logs  # the failure fails it anyway
    rescue_matrix = json.loads(out["rescue"])
    lost_files = sorted(t["file"] for j in plan["jobs"] if j["id"] == lost["id"]
                        for t in j["tests"])
    # the job fails, so its upload step does not run and no rescue job starts; the wave
    # it wrote is the lost shard's alone all the same
    assert not (plan_ws / "rescue.json").exists()
    wave = load_rescue(tmp_path / "reconcile-both" / "rescue.json")
    assert [(j.origin, sorted(j.files)) for j in wave.jobs] == [(lost["id"], lost_files)]
    assert all(not v["has_jobs"] for lane, v in rescue_matrix.items() if lane != lost["stage"])

    # -- the lost runner alone: the first reconcile hands its files to the rescue wave ----
    ok, out, logs = reconcile("reconcile", statuses, "reconcile-first")
    assert ok and out["has_rescue"] == "true", logs  # the rescue's reconcile decides
    assert "::warning" in logs and lost["id"] in logs
    rescue_store = plan_ws / "rescue.json"
    assert load_rescue(rescue_store) == wave  # the same wave, the same digest
    contexts["needs"]["reconcile"] = {"result": "success", "outputs": out}
    rescue_entries = json.loads(out["rescue"])[lost["stage"]]["matrix"]["include"]
    assert [e["id"] for e in rescue_entries] == [lost["id"] + "-rescue"]
    (entry,) = rescue_entries
    assert entry["runs_on"] == lost["runs_on"] and entry["rescue"] == wave.digest
    rescue_job = next(n for n, j in workflow["jobs"].items() if n.endswith("-rescue")
                      and f"['{lost['stage']}']" in j["if"])
    cond = workflow["jobs"][rescue_job]["if"].removeprefix("${{").removesuffix("}}")
    assert truthy(evaluate(cond, contexts, {"cancelled": False, "failure": True}))
    # the call (job 'rescue') gates it: no rescue wave, no rescue job, whatever its matrix
    no_wave = {**contexts, "needs": {**contexts["needs"], "reconcile": {
        "result": "success", "outputs": {**out, "has_rescue": "false"}}}}
    assert not truthy(evaluate(cond, no_wave, {"cancelled": False, "failure": True}))
    # its matrix is the reconcile's rescue wave, run without fast-fail (the call passes
    # fast_fail: false); the plan's own job of that lane has fast-fail on
    strategy = workflow["jobs"][rescue_job]["strategy"]
    assert "needs.reconcile.outputs.rescue" in strategy["matrix"]
    matrix = strategy["matrix"].strip().removeprefix("${{").removesuffix("}}")
    assert evaluate(matrix, contexts, {"cancelled": False, "failure": True})["include"] == \
        rescue_entries
    assert interpolate(strategy["fail-fast"], contexts) == "false"
    plan_job = rescue_job.removesuffix("-rescue")
    assert interpolate(workflow["jobs"][plan_job]["strategy"]["fail-fast"], contexts) == "true"
    rescued_status = play(rescue_job, entry, entry["id"])
    (xml,) = (rescued_status.parent / "testfleet-junit").glob("*.xml")
    ran = {case.get("name") for case in ElementTree.parse(xml).iter("testcase")}
    ran |= {p.get("value") for p in ElementTree.parse(xml).iter("property")
            if p.get("name") == "file"}
    assert set(lost_files) <= ran  # the lost shard's files, run by the rescue job

    # -- the reconcile after the rescue: passes, naming the rescued files -----------------
    for lane in {j for j in workflow["jobs"] if j.endswith("-rescue")}:
        contexts["needs"][lane] = {"result": "success"}
    cond = workflow["jobs"]["rescued"]["if"].removeprefix("${{").removesuffix("}}")
    assert truthy(evaluate(cond, contexts, {"cancelled": False, "failure": True}))
    ok, _, logs = reconcile("rescued", {**statuses, entry["id"]: rescued_status},
                            "reconcile-rescued", rescue_store)
    assert ok, logs
    assert "from the rescue wave" in logs and all(f in logs for f in lost_files)
    # the same rescue beside the failed shard: its failure still fails the run
    ok, _, logs = reconcile("rescued", {**alone, entry["id"]: rescued_status},
                            "reconcile-rescued-failed", rescue_store)
    assert not ok and first_file in logs, logs
