"""The seed's night, replayed end to end through the generated GitHub workflow (#41).

The seed's pull request disabled eight MI300X files by hand because nothing else could
stop CI from queueing on runners that failed at start-up. Here nobody edits anything:
the project opts its MI300X lane in to a breaker (``breaker = true``) once, and five
default-branch runs of the workflow ``testfleet init --github`` writes are played as in
``test_history_loop`` (its own ``run:`` scripts and the vendored actions' steps, with
GitHub's cache and artifact rules), this time running the MI300X jobs too, on simulated
runners whose devices are gone (runs 1 and 2) and back (from run 3):

1. and 2. all eight files fail at start-up with one device error (differing PIDs and
   device numbers): one infrastructure incident; after run 2 the breaker opens;
3. the plan schedules only the probe on that lane; the eight registrations have the fate
   ``runner-broken`` and the lane is a coverage hole in the plan's outputs; the probe is
   clean; a pull request then reads the state and writes nothing;
4. the probe is clean again: the breaker closes by itself;
5. the plan schedules the eight files again.

A second night shows that eight files failing with eight different assertion messages
(a test incident each) open nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e.test_ci_simulation import EVENTS, git, run_steps, workflow_for
from e2e.test_history_loop import DEFAULT, GitHub, history_entries, plan_phase, rows
from integrations.gha_calls import expanded_file
from integrations.gha_expr import evaluate, truthy

LANE = "stage-c-4-gpu-mi300x"
FILES = sorted([f"tests/e2e/amd/test_mi300x_{name}.py" for name in (
    "deepseek_v4_flash", "glm5_2", "inkling_small", "qwen3_4b_fsdp_hybrid", "glm47_r3_mtp",
    "qwen3_30b_deepep_fp8", "qwen3_4b_offload_disk", "qwen35_35b_mtp1")])

CONFIG = f"""\
[tool.testfleet]
roots = ["tests"]
pattern = "test_*.py"

[tool.testfleet.labels]
amd = "AMD ROCm tests"

[tool.testfleet.stages.stage-a-cpu]
backend = "cpu"
runs_on = ["ubuntu-latest"]
command = "python"

[tool.testfleet.stages.{LANE}]
backend = "rocm"
runs_on = ["self-hosted", "amd", "mi300x", "4gpu"]
command = "python"
max_shards = 2
target_minutes = 90
needs = ["stage-a-cpu"]
trusted_only = true
breaker = true

[tool.testfleet.policy]
schedules = {{ "0 15 * * 0-5" = "nightly", "0 15 * * 6" = "weekly" }}
"""

#: What a file does on the simulated runner: on a runner whose devices are gone the ROCm
#: runtime fails before the test starts (the PID and device number differ every time);
#: otherwise the test runs, and in the second night it fails its own assertion.
TEST_FILE = """\
import os
import sys

from testfleet import register_rocm_ci

register_rocm_ci(est_time={est}, suite="{lane}", labels=["amd"])

if os.environ.get("SIM_HIP_DEVICES") == "none":
    device = os.getpid() % 8
    print(f"[rank0]: RuntimeError: HIP error: hipErrorNoDevice (device {{device}}), "
          f"pid {{os.getpid()}}", file=sys.stderr)
    sys.exit(1)
if os.environ.get("SIM_WRONG_RESULT"):
    assert {est} < 0, "loss diverged at step {est}: {name}"
print("ok")
"""


def make_project(root: Path) -> Path:
    (root / "tests" / "e2e" / "amd").mkdir(parents=True)
    (root / "tests" / "fast").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "night"\nversion = "0"\n\n' + CONFIG)
    (root / "tests" / "fast" / "test_cpu_ok.py").write_text(
        'from testfleet import register_cpu_ci\n\nregister_cpu_ci(est_time=5, suite="stage-a-cpu")\n'
        'print("ok")\n')
    for i, path in enumerate(FILES):
        (root / path).write_text(TEST_FILE.format(est=600 + 60 * i, lane=LANE,
                                                  name=Path(path).stem))
    git(root, "init", "-q", "-b", "main")
    workflow_for(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a project whose MI300X lane has a breaker")
    return root


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testfleet.cli.main", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=180, check=False,
                          env={"PATH": str(Path(sys.executable).parent), "LANG": "C.UTF-8",
                               "GIT_AUTHOR_NAME": "ops"})


def play(gh: GitHub, workflow: dict[str, Any], repo: Path, tmp: Path, *, event: str,
         payload: dict[str, Any], ref: str, run: str, devices: str,
         wrong: bool = False) -> dict[str, Any]:
    """One workflow run: the plan job, every stage job the plan and the job conditions call
    for (the MI300X ones on runners whose devices are ``devices``), then the history job
    when its condition holds. A failed stage job fails its job as GitHub would, and the
    steps that run on failure (the history export) still run."""
    work, runner, contexts, actions, plan_ws = plan_phase(
        gh, workflow, repo, tmp, event=event, payload=payload, ref=ref, run=run,
        repository="radixark/miles")
    plan = json.loads((plan_ws / "plan.json").read_text())
    outputs = contexts["needs"]["plan"]["outputs"]
    step_outputs = contexts.get("steps", {}).get("plan", {}).get("outputs", {})
    out: dict[str, Any] = {"plan": plan, "plan_ws": plan_ws, "outputs": outputs,
                           "plan_step": step_outputs, "ran": [],
                           "history_ran": False, "failed": []}
    stages = json.loads(outputs["stages"])
    results: dict[str, str] = {}
    for name, job in workflow["jobs"].items():
        if name in ("plan", "history", "reconcile", "testfleet", "rescued") or \
                name.endswith("-rescue"):  # the rescue wave (#40) follows reconcile: not played here
            continue
        status = {"failure": any(results.get(n) == "failure" for n in job["needs"][1:]),
                  "cancelled": False}
        stage = next(s for s in stages if f"['{s}']" in job["if"])
        if not truthy(evaluate(job["if"], contexts, status)):
            results[name] = "skipped"
            continue
        results[name] = "success"
        for entry in stages[stage]["matrix"]["include"]:
            ws = work / entry["id"]
            git(work, "clone", "-q", str(repo), str(ws))
            contexts["matrix"] = entry
            runner.base.pop("SIM_HIP_DEVICES", None)
            runner.base.pop("SIM_WRONG_RESULT", None)
            if entry["backend"] == "rocm":  # the job lands on an MI300X runner
                runner.base["SIM_HIP_DEVICES"] = devices
                if wrong:
                    runner.base["SIM_WRONG_RESULT"] = "1"
            ok, _, logs = run_steps(runner, job, ws, contexts, entry["id"], actions,
                                    keep_going=True)
            out["ran"].append(entry["id"])
            if not ok:
                results[name] = "failure"
                out["failed"].append(entry["id"])
    contexts["matrix"] = {}
    contexts["needs"].update({k: {"result": v} for k, v in results.items()})
    history = workflow["jobs"]["history"]
    if truthy(evaluate(history["if"], contexts, {"cancelled": False, "failure": False})):
        ws = work / "history"
        git(work, "clone", "-q", str(repo), str(ws))
        ok, _, logs = run_steps(runner, history, ws, contexts, "history", actions)
        assert ok, logs
        out["history_ran"] = True
        out["merge_log"] = logs
    return out


def lane_jobs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in plan["jobs"] if j["stage"] == LANE]


def fates(plan: dict[str, Any]) -> dict[str, str]:
    return {s["file"]: s["reason"] for s in plan["skipped"] if s["suite"] == LANE}


def summary(plan: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in plan["stages"] if s["name"] == LANE)


def breaker_rows(db: Path) -> list[tuple[Any, ...]]:
    return rows(db, "SELECT seq, kind, run FROM breaker_events WHERE lane = "
                    f"'{LANE}' ORDER BY seq")


@pytest.fixture
def night(tmp_path: Path) -> tuple[Path, dict[str, Any], GitHub]:
    repo = make_project(tmp_path / "miles")
    workflow = expanded_file(repo / ".github" / "workflows" / "testfleet.yml")
    return repo, workflow, GitHub(tmp_path)


def test_the_seed_night_contained_and_restored_without_a_pull_request(
        night: tuple[Path, dict[str, Any], GitHub], tmp_path: Path) -> None:
    repo, workflow, gh = night
    tree = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    nightly = json.loads((EVENTS / "schedule_nightly.json").read_text())
    dispatch = json.loads((EVENTS / "workflow_dispatch.json").read_text())
    dispatch["inputs"] = {"cadence": "nightly", "match_all_labels": True}

    # -- runs 1 and 2: the MI300X runners fail at start-up ---------------------------
    for run, event, payload in (("1001", "schedule", nightly), ("1002", "workflow_dispatch", dispatch)):
        r = play(gh, workflow, repo, tmp_path, event=event, payload=payload, ref=DEFAULT,
                 run=run, devices="none")
        assert sorted(t["file"] for j in lane_jobs(r["plan"]) for t in j["tests"]) == FILES
        assert not any(j.get("probe") for j in lane_jobs(r["plan"]))
        assert r["failed"] and all(LANE in f for f in r["failed"])
        assert r["history_ran"]
    saved = history_entries(gh)[-1][2]
    # one device error on every file, normalised to one signature despite PIDs and devices
    failed = rows(saved, "SELECT DISTINCT signature FROM executions WHERE ci_run_id = '1002' "
                         f"AND stage = '{LANE}'")
    assert len(failed) == 1 and failed[0][0]
    assert rows(saved, "SELECT COUNT(DISTINCT file) FROM executions WHERE ci_run_id = '1002' "
                       f"AND stage = '{LANE}' AND outcome = 'FAILED'") == [(8,)]
    assert [k for _, k, _ in breaker_rows(saved)] == ["observed", "opened"]
    assert "breaker stage-c-4-gpu-mi300x: opened after 2 default-branch run(s)" in r["merge_log"]
    state = json.loads(rows(saved, "SELECT state FROM breaker_events ORDER BY seq DESC LIMIT 1")[0][0])
    assert state["status"] == "open" and [x["run"] for x in state["runs"]] == ["1001", "1002"]
    assert state["runs"][0]["url"] == "https://github.com/radixark/miles/actions/runs/1001"
    assert "hipErrorNoDevice" in state["text"] and state["signature"] == failed[0][0]

    # -- run 3: only the probe on that lane; the eight are runner-broken, a hole ------
    r3 = play(gh, workflow, repo, tmp_path, event="schedule", payload=nightly, ref=DEFAULT,
              run="1003", devices="ok")
    (probe,) = lane_jobs(r3["plan"])
    assert probe["probe"] is True and probe["breaker"] is True
    assert probe["runs_on"] == ["self-hosted", "amd", "mi300x", "4gpu"]
    shortest = "tests/e2e/amd/test_mi300x_deepseek_v4_flash.py"  # est_time 600, the least
    assert [t["file"] for t in probe["tests"]] == [shortest]  # its shortest registered file
    assert fates(r3["plan"]) == {f: "runner-broken" for f in FILES}
    detail = next(s["detail"] for s in r3["plan"]["skipped"] if s["suite"] == LANE)
    assert "hipErrorNoDevice" in detail and "1001, 1002" in detail and "since" in detail
    assert summary(r3["plan"])["status"] == "runner-broken" and summary(r3["plan"])["hole"]
    assert any(w.startswith("coverage hole: stage stage-c-4-gpu-mi300x") for w in r3["plan"]["warnings"])
    assert LANE in json.loads(r3["plan_step"]["coverage_hole_stages"])
    assert r3["ran"] == ["stage-a-cpu-1-of-1", f"{LANE}-probe"] and not r3["failed"]
    # the other outputs count the lane as a hole too: check, report, results
    ws = r3["plan_ws"]
    proc = cli("check", cwd=ws)
    assert f"coverage hole: stage {LANE} has no registration that can run (runner-broken: " \
        "runner class broken: breaker open since" in proc.stdout, proc.stdout
    assert proc.returncode == 0, proc.stdout  # open 0 days: a hole, not yet the human decision
    proc = cli("report", "--format", "json", cwd=ws)
    doc = json.loads(proc.stdout)
    assert f"1 runner class broken, held back by its breaker ({LANE})" in doc["headline"]
    assert {(h["name"], h["cause"]) for h in doc["holes"]} >= {(LANE, "runner-broken")}
    proc = cli("report", "--format", "html", "-o", "report.html", cwd=ws)
    html = (ws / "report.html").read_text()
    failing_now = html[html.index('id="failing"'):]
    assert "Held back by a runner-class breaker" in failing_now[:3000]
    proc = cli("results", "--format", "json", cwd=ws)
    assert [h["lane"] for h in json.loads(proc.stdout)["held_back"]] == [LANE]
    main_after_3 = history_entries(gh)[-1][2].read_bytes()

    # -- a pull request in between reads the state and writes nothing ----------------
    git(repo, "checkout", "-q", "-b", "pr")
    (repo / "tests" / "fast" / "test_cpu_ok.py").write_text(
        (repo / "tests" / "fast" / "test_cpu_ok.py").read_text() + "# PR change\n")
    git(repo, "commit", "-q", "-am", "pr")
    pr = play(gh, workflow, repo, tmp_path, event="pull_request",
              payload=json.loads((EVENTS / "pr_same_repo.json").read_text()),
              ref="refs/pull/7/merge", run="2001", devices="ok")
    assert not pr["history_ran"]
    assert any("breaker open" in w for w in pr["plan"]["warnings"])
    assert summary(pr["plan"])["hole"] is True
    assert not any(j.get("probe") for j in lane_jobs(pr["plan"]))  # a PR never probes
    assert history_entries(gh)[-1][2].read_bytes() == main_after_3
    git(repo, "checkout", "-q", "main")

    # -- run 4: clean again; the breaker closes by itself -----------------------------
    r4 = play(gh, workflow, repo, tmp_path, event="schedule", payload=nightly, ref=DEFAULT,
              run="1004", devices="ok")
    assert [j["id"] for j in lane_jobs(r4["plan"])] == [f"{LANE}-probe"]
    saved = history_entries(gh)[-1][2]
    assert [k for _, k, _ in breaker_rows(saved)] == ["observed", "opened", "observed", "closed"]
    assert "breaker stage-c-4-gpu-mi300x: closed after 2 clean probe(s)" in r4["merge_log"]

    # -- run 5: the eight files are scheduled again -----------------------------------
    r5 = play(gh, workflow, repo, tmp_path, event="schedule", payload=nightly, ref=DEFAULT,
              run="1005", devices="ok")
    assert sorted(t["file"] for j in lane_jobs(r5["plan"]) for t in j["tests"]) == FILES
    assert not any(j.get("probe") for j in lane_jobs(r5["plan"])) and not fates(r5["plan"])
    assert summary(r5["plan"])["status"] == "scheduled" and not r5["failed"]
    proc = cli("breaker", "list", "--format", "json", cwd=r5["plan_ws"])
    assert proc.returncode == 0, proc.stderr
    (episode,) = json.loads(proc.stdout)["lanes"][0]["episodes"]
    assert episode["closed_at"] is not None and episode["held_runs"] == 2
    assert episode["held_registrations"] == 16
    # nobody edited a config or test file
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()
            and ".git" not in p.parts} == tree


def test_eight_different_assertion_failures_open_nothing(
        night: tuple[Path, dict[str, Any], GitHub], tmp_path: Path) -> None:
    repo, workflow, gh = night
    nightly = json.loads((EVENTS / "schedule_nightly.json").read_text())
    for run in ("1001", "1002", "1003"):
        r = play(gh, workflow, repo, tmp_path, event="schedule", payload=nightly, ref=DEFAULT,
                 run=run, devices="ok", wrong=True)
        assert sorted(t["file"] for j in lane_jobs(r["plan"]) for t in j["tests"]) == FILES
        assert not fates(r["plan"]) and r["failed"]
    saved = history_entries(gh)[-1][2]
    assert len(rows(saved, "SELECT DISTINCT signature FROM executions WHERE ci_run_id = '1003' "
                           f"AND stage = '{LANE}'")) == 8
    assert {k for _, k, _ in breaker_rows(saved)} == {"observed"}
    state = json.loads(rows(saved, "SELECT state FROM breaker_events ORDER BY seq DESC LIMIT 1")[0][0])
    assert state["status"] == "closed" and state["streak"] == []


# -- the same night through the Buildkite pipeline ------------------------------------

MAIN = {"BUILDKITE_BRANCH": "main", "BUILDKITE_PIPELINE_DEFAULT_BRANCH": "main",
        "BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_REPO": "git@github.com:radixark/miles.git",
        "TESTFLEET_CADENCE": "nightly"}


def test_the_seed_night_through_the_buildkite_pipeline(tmp_path: Path) -> None:
    """Five default-branch builds (the history step merges into the shared database the
    plan reads), the MI300X steps on runners without devices in builds 1 and 2."""
    from e2e.test_buildkite_history import bootstrap, run_step
    from e2e.test_ci_simulation import Buildkite
    from testfleet.cli.main import main

    repo = make_project(tmp_path / "miles")
    with pytest.raises(SystemExit) as info:
        main(["-C", str(repo), "init", "--buildkite", "--install", "true"])
    assert info.value.code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the Buildkite pipeline")
    history = tmp_path / "shared" / "history.db"
    history.parent.mkdir()
    db = {"TESTFLEET_DATABASE_URL": str(history)}

    def build(number: int, devices: str) -> dict[str, Any]:
        (tmp_path / f"bk-{number}").mkdir()
        bk = Buildkite(tmp_path / f"bk-{number}")
        env = {**MAIN, "BUILDKITE_BUILD_NUMBER": str(number)}
        pipeline = bootstrap(bk, repo, tmp_path / f"plan-{number}", {**env, **db})
        plan = json.loads((bk.store / "artifact-plan.json").read_text())
        jobs = {j["id"]: j for j in plan["jobs"]}
        failed = []
        for step in pipeline["steps"]:
            job = jobs.get(step.get("env", {}).get("TESTFLEET_JOB_ID", ""))
            if job is None:
                continue
            sim = {"SIM_HIP_DEVICES": devices} if job["backend"] == "rocm" else {}
            code, log = run_step(bk, repo, step, tmp_path / f"{number}-{step['key']}",
                                 {**env, **sim})
            if code != 0:
                failed.append(job["id"])
        merge = next(s for s in pipeline["steps"] if s.get("key") == "testfleet-history")
        code, log = run_step(bk, repo, merge, tmp_path / f"history-{number}", {**env, **db})
        assert code == 0, log
        return {"plan": plan, "failed": failed, "log": log}

    for number in (1, 2):
        b = build(number, "none")
        assert sorted(t["file"] for j in lane_jobs(b["plan"]) for t in j["tests"]) == FILES
        assert b["failed"] and all(LANE in f for f in b["failed"])
    assert "breaker stage-c-4-gpu-mi300x: opened after 2 default-branch run(s) in a row (1, 2)" \
        in b["log"]
    b3 = build(3, "ok")
    assert [j["id"] for j in lane_jobs(b3["plan"])] == [f"{LANE}-probe"]
    assert fates(b3["plan"]) == {f: "runner-broken" for f in FILES}
    assert summary(b3["plan"])["hole"] and not b3["failed"]
    b4 = build(4, "ok")
    assert [j["id"] for j in lane_jobs(b4["plan"])] == [f"{LANE}-probe"]
    assert "closed after 2 clean probe(s)" in b4["log"]
    b5 = build(5, "ok")
    assert sorted(t["file"] for j in lane_jobs(b5["plan"]) for t in j["tests"]) == FILES
    assert not fates(b5["plan"]) and not b5["failed"]
    assert [k for _, k, _ in breaker_rows(history)] == [
        "observed", "opened", "observed", "closed", "observed"]
