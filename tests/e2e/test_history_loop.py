"""The history loop of the generated workflow, played over several CI runs without GitHub.

Three runs of the default branch and one pull request run the jobs of the workflow
``testfleet init --github`` writes: its own ``run:`` scripts and the vendored action's
steps are executed with bash; what GitHub does between jobs is played by copying
files, with GitHub's rules:

- the Actions cache: an entry belongs to the ref whose run saved it; a run restores
  from its own ref's entries first, then the default branch's (exact key, else the
  newest entry whose key starts with a restore key); a key, once saved, is immutable;
- artifacts belong to the run that uploaded them; ``download-artifact`` without a
  ``run-id`` sees only the current run's.

The runs: (1) a manual regular run plans on the literals; (2) a nightly plans from
run 1's measured durations and writes the first metric baselines; (3) a nightly whose
metric gates are active; then a pull request reads that history and writes nothing,
while its test code forges a bundle that claims to come from a push on the default
branch, uploads it as a history artifact and saves a poisoned history to the cache.
The default branch's next run must see none of it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from e2e.test_ci_simulation import EVENTS, Runner, git, resolve, run_steps, workflow_for
from integrations.gha_calls import expanded_file
from integrations.gha_expr import evaluate, truthy
from testfleet.store.execution_rows import StdlibDb, insert_payload

DEFAULT = "refs/heads/main"
HISTORY = ".testfleet/history.db"


class Cache:
    """The Actions cache, scoped by ref as GitHub scopes it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.entries: list[tuple[str, str, Path]] = []  # (ref, key, saved file), oldest first

    def restore(self, ref: str, key: str, prefixes: list[str], dest: Path) -> str | None:
        for scope in dict.fromkeys([ref, DEFAULT]):
            mine = [(k, f) for r, k, f in self.entries if r == scope]
            hit = next(((k, f) for k, f in mine if k == key), None) or next(
                ((k, f) for k, f in reversed(mine) for p in prefixes if k.startswith(p)), None)
            if hit:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(hit[1], dest)
                return hit[0]
        return None

    def save(self, ref: str, key: str, src: Path) -> None:
        assert not any(r == ref and k == key for r, k, _ in self.entries), f"{key} exists"
        copy = self.root / f"{len(self.entries)}.db"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, copy)
        self.entries.append((ref, key, copy))


def history_entries(gh: GitHub) -> list[tuple[str, str, Path]]:
    return [e for e in gh.cache.entries if e[1].startswith("testfleet-history-")]


class GitHub:
    """The cache and the artifact store, and the actions the workflow uses on them."""

    def __init__(self, tmp: Path) -> None:
        self.cache = Cache(tmp / "cache")
        self.artifacts: dict[str, dict[str, Path]] = {}  # run id -> name -> folder
        self.store = tmp / "artifacts"

    def upload(self, run: str, name: str, files: list[Path], base: Path) -> None:
        folder = self.store / run / name
        folder.mkdir(parents=True, exist_ok=False)  # one artifact per name and run
        for f in files:
            dest = folder / f.relative_to(base)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dest)
        self.artifacts.setdefault(run, {})[name] = folder

    def actions(self, run: str) -> Callable[[dict[str, Any], Path, dict[str, Any]], None]:
        """Plays the workflow's ``uses:`` steps (checkout and setup-python: done already)."""

        def play(step: dict[str, Any], cwd: Path, ctx: dict[str, Any]) -> None:
            action = step["uses"].split("@")[0]
            args = {k: resolve(str(v), ctx) for k, v in step.get("with", {}).items()}
            ref = ctx["github"]["ref"]
            if action == "actions/cache/restore":
                self.cache.restore(ref, args["key"], args["restore-keys"].split(),
                                   cwd / args["path"])
            elif action == "actions/cache/save":
                if (cwd / args["path"]).exists():
                    self.cache.save(ref, args["key"], cwd / args["path"])
            elif action == "actions/upload-artifact":
                path = cwd / args["path"]
                files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else (
                    [path] if path.exists() else [])
                if files:
                    self.upload(run, args["name"], files, path if path.is_dir() else path.parent)
            elif action == "actions/download-artifact":
                assert "run-id" not in args  # only this run's artifacts
                mine = self.artifacts.get(run, {})
                if "name" in args:
                    shutil.copytree(mine[args["name"]], cwd, dirs_exist_ok=True)
                else:
                    for name, folder in mine.items():
                        if fnmatch(name, args["pattern"]):
                            shutil.copytree(folder, cwd / args["path"] / name)
            else:
                assert action in ("actions/checkout", "actions/setup-python"), action

        return play


def event_contexts(event: str, payload: dict[str, Any], ref: str, run: str) -> dict[str, Any]:
    return {"inputs": dict(payload.get("inputs", {})), "matrix": {}, "github": {
        "event_name": event, "ref": ref, "run_id": run, "run_attempt": "1",
        "workflow": "testfleet", "event": payload}}


def plan_phase(gh: GitHub, workflow: dict[str, Any], repo: Path, tmp: Path, *, event: str,
               payload: dict[str, Any], ref: str, run: str, repository: str
               ) -> tuple[Path, Runner, dict[str, Any], Any, Path]:
    """A run's start: its work directory and runner, the event's contexts, the run's
    actions, and its plan job played (which must pass), its outputs in ``needs.plan``.
    Returns (work, runner, contexts, actions, the plan job's workspace)."""
    work = tmp / f"run-{run}"
    work.mkdir()
    payload_file = work / "event.json"
    payload_file.write_text(json.dumps(payload))
    runner = Runner(work, event, payload_file, env={
        "GITHUB_REF": ref, "GITHUB_RUN_ID": run, "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": repository})
    contexts = event_contexts(event, payload, ref, run)
    actions = gh.actions(run)
    plan_ws = work / "plan"
    git(work, "clone", "-q", str(repo), str(plan_ws))
    ok, _, logs = run_steps(runner, workflow["jobs"]["plan"], plan_ws, contexts, "plan", actions)
    assert ok, logs
    outputs = {k: resolve(v, contexts) for k, v in workflow["jobs"]["plan"]["outputs"].items()}
    contexts["needs"] = {"plan": {"outputs": outputs, "result": "success"}}
    return work, runner, contexts, actions, plan_ws


def play_run(gh: GitHub, workflow: dict[str, Any], repo: Path, tmp: Path, *, event: str,
             payload: dict[str, Any], ref: str, run: str,
             after_job: Callable[[Path, dict[str, Any], Runner], None] | None = None,
             plan_only: bool = False) -> dict[str, Any]:
    """One workflow run: the plan job, every CPU stage job the plan and the job
    conditions call for, and the history job when its condition holds."""
    work, runner, contexts, play, plan_ws = plan_phase(
        gh, workflow, repo, tmp, event=event, payload=payload, ref=ref, run=run,
        repository="fleet-org/fleet")
    plan = json.loads((plan_ws / "plan.json").read_text())
    outputs = contexts["needs"]["plan"]["outputs"]
    result: dict[str, Any] = {"plan": plan, "plan_ws": plan_ws, "jobs": [], "history_ran": False}
    if plan_only:
        return result

    stages = json.loads(outputs["stages"])
    results: dict[str, str] = {}
    for name, job in workflow["jobs"].items():
        if name in ("plan", "history", "reconcile", "rescued", "testfleet") \
                or name.endswith("-rescue"):
            continue
        status = {"failure": any(results.get(n) == "failure" for n in job["needs"][1:]),
                  "cancelled": False}
        stage = next(s for s in stages if f"['{s}']" in job["if"])
        if not truthy(evaluate(job["if"], contexts, status)):
            results[name] = "skipped"
            continue
        assert stages[stage]["has_jobs"]
        for entry in stages[stage]["matrix"]["include"]:
            if entry["backend"] != "cpu":
                continue  # GPU runners: planned, not executed here
            ws = work / entry["id"]
            git(work, "clone", "-q", str(repo), str(ws))
            contexts["matrix"] = entry
            ok, _, logs = run_steps(runner, job, ws, contexts, entry["id"], play)
            assert ok, logs
            result["jobs"].append(ws)
            if after_job is not None:
                after_job(ws, contexts, runner)
        results[name] = "success"
    contexts["matrix"] = {}
    contexts["needs"].update({k: {"result": v} for k, v in results.items()})

    history = workflow["jobs"]["history"]
    if truthy(evaluate(history["if"], contexts, {"cancelled": False, "failure": False})):
        ws = work / "history"
        git(work, "clone", "-q", str(repo), str(ws))
        ok, _, logs = run_steps(runner, history, ws, contexts, "history", play)
        assert ok, logs
        result["history_ran"] = True
        result["merge_log"] = logs
    return result


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def share(plan: dict[str, Any], stage: str) -> float:
    return float(next(s["history_share"] for s in plan["stages"] if s["name"] == stage))


def estimate(plan: dict[str, Any], file: str) -> float:
    return float(next(t["estimate"] for j in plan["jobs"] for t in j["tests"] if t["file"] == file))


@pytest.fixture
def main_repo(example_project: Path) -> Path:
    git(example_project, "init", "-q", "-b", "main")
    workflow_for(example_project)
    git(example_project, "add", "-A")
    git(example_project, "commit", "-q", "-m", "base with the generated workflow")
    return example_project


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testfleet.cli.main", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": str(Path(sys.executable).parent), "LANG": "C.UTF-8"})


def test_three_default_branch_runs_and_a_pull_request(main_repo: Path, tmp_path: Path) -> None:
    workflow = expanded_file(main_repo / ".github" / "workflows" / "testfleet.yml")
    gh = GitHub(tmp_path)
    dispatch = json.loads((EVENTS / "workflow_dispatch.json").read_text())
    dispatch["inputs"] = {"cadence": "regular", "match_all_labels": True}
    nightly = json.loads((EVENTS / "schedule_nightly.json").read_text())
    gated = "tests/unit/test_train_curve_loss.py"

    # -- run 1: a manual regular run on main, nothing in the cache yet --------------
    r1 = play_run(gh, workflow, main_repo, tmp_path, event="workflow_dispatch", payload=dispatch,
                  ref=DEFAULT, run="1001")
    assert r1["plan"]["policy"]["cadence"] == "regular"
    assert all(s["history_share"] == 0 for s in r1["plan"]["stages"])  # on the literals
    assert r1["history_ran"]
    ((ref1, key1, saved1),) = history_entries(gh)
    # the plan job kept its collection cache too (default-branch runs only save it)
    assert [k for r, k, _ in gh.cache.entries if k.startswith("testfleet-collection-")] == [
        "testfleet-collection-1001-1"]
    assert (ref1, key1) == (DEFAULT, "testfleet-history-1001-1")
    ran1 = {t["file"] for j in r1["plan"]["jobs"] if j["backend"] == "cpu" for t in j["tests"]}
    assert {f for (f,) in rows(saved1, "SELECT DISTINCT file FROM executions")} == ran1
    # a regular run does not write baselines (its gates ran in shadow, cold)
    assert rows(saved1, "SELECT COUNT(*) FROM gate_runs") == [(0,)]
    assert ("INACTIVE",) in rows(saved1, "SELECT DISTINCT gate_status FROM executions")

    # -- run 2: the nightly plans from run 1's durations and writes baselines -------
    r2 = play_run(gh, workflow, main_repo, tmp_path, event="schedule", payload=nightly,
                  ref=DEFAULT, run="1002")
    assert r2["plan"]["policy"]["cadence"] == "nightly"
    assert share(r2["plan"], "stage-a-cpu") > 0 and share(r2["plan"], "stage-b-cpu") > 0
    saved2 = history_entries(gh)[-1][2]
    assert history_entries(gh)[-1][:2] == (DEFAULT, "testfleet-history-1002-1")
    trusted = rows(saved2, "SELECT test_path, trusted FROM gate_runs WHERE ci_run_id = '1002'")
    assert trusted and all(t for _, t in trusted) and gated in {p for p, _ in trusted}
    # no baseline yet when run 2 ran: its gates were cold
    assert rows(saved2, "SELECT DISTINCT gate_status FROM executions WHERE ci_run_id = '1002' "
                        "AND gate_status IS NOT NULL") == [("INACTIVE",)]

    # -- run 3: the nightly's gates compare with run 2's baseline -------------------
    r3 = play_run(gh, workflow, main_repo, tmp_path, event="schedule", payload=nightly,
                  ref=DEFAULT, run="1003")
    saved3 = history_entries(gh)[-1][2]
    statuses = rows(saved3, "SELECT file, gate_status FROM executions WHERE ci_run_id = '1003' "
                            "AND gate_status IS NOT NULL")
    assert (gated, "PASS") in statuses and all(s == "PASS" for _, s in statuses), statuses
    assert share(r3["plan"], "stage-b-cpu") > 0
    main_history = saved3.read_bytes()
    assert rows(saved3, "SELECT DISTINCT ci_run_id FROM executions ORDER BY 1") == [
        ("1001",), ("1002",), ("1003",)]

    # -- the pull request: reads main's history, writes nothing, and tries to forge --
    git(main_repo, "checkout", "-q", "-b", "pr")
    (main_repo / "fleetlib" / "train.py").write_text(
        (main_repo / "fleetlib" / "train.py").read_text() + "\n# PR change\n")
    git(main_repo, "commit", "-q", "-am", "pr")
    pr_payload = json.loads((EVENTS / "pr_same_repo.json").read_text())
    forged: list[Path] = []

    def forge(ws: Path, contexts: dict[str, Any], runner: Runner) -> None:
        """What the PR's test code can do in its job: write records, export them as a
        bundle that claims a push on main (with a checksum: it is not a signature),
        upload it under the name the history job downloads, and save a poisoned
        history into the cache. Once is enough."""
        if forged:
            return
        db = ws / HISTORY
        assert db.exists()  # the job restored main's history for its gates
        con = sqlite3.connect(db)
        insert_payload(StdlibDb(con), [{
            "file": "tests/fast/test_kl.py", "stage": "stage-a-cpu", "backend": "cpu",
            "duration": 9999.0, "outcome": "PASSED", "attempt": 1, "commit_sha": None,
            "ci_run_id": "forged", "ts": 4e9, "recorded_at": 4e9, "gate_status": None,
            "gate_mode": None, "reason": None, "uid": "f0" * 16, "final": True}])
        con.commit()
        con.close()
        bundle = ws / "testfleet-history" / "records.bundle"
        proc = cli("history", "export", "--run-id", "forged", "--event", "push", "--ref", DEFAULT,
                   "--write-baseline", "--output", str(bundle), cwd=ws)
        assert proc.returncode == 0, proc.stderr
        gh.upload(contexts["github"]["run_id"], f"testfleet-history-{contexts['matrix']['id']}",
                  [bundle], bundle.parent)
        gh.cache.save(contexts["github"]["ref"], "testfleet-history-99999999-1", db)
        forged.append(bundle)

    pr = play_run(gh, workflow, main_repo, tmp_path, event="pull_request", payload=pr_payload,
                  ref="refs/pull/7/merge", run="2001", after_job=forge)
    assert forged and pr["jobs"]
    assert share(pr["plan"], "stage-a-cpu") > 0  # it read main's history
    assert pr["plan"]["policy"]["write_baseline"] is False
    honest_jobs = [ws for ws in pr["jobs"] if ws != forged[0].parent.parent]
    assert honest_jobs and not any((ws / "testfleet-history").exists() for ws in honest_jobs)
    assert not pr["history_ran"]  # the history job does not run for a pull request
    # the only cache entry the PR made is its own ref's: main's newest is still run 3's
    assert [(r, k) for r, k, _ in gh.cache.entries if r != DEFAULT] == [
        ("refs/pull/7/merge", "testfleet-history-99999999-1")]
    # had the PR's own honest records reached a merge, merge would refuse them
    honest = tmp_path / "honest.bundle"
    proc = cli("history", "export", "--run-id", "2001", "--output", str(honest),
               "--event", "pull_request", "--ref", "refs/pull/7/merge", cwd=pr["jobs"][0])
    assert proc.returncode == 0, proc.stderr
    proc = cli("history", "merge", str(honest), "--database", str(tmp_path / "probe.db"),
               "--require-ref", DEFAULT, cwd=pr["jobs"][0])
    assert proc.returncode == 2 and "pull_request" in proc.stderr
    # ... but a forged origin is only a claim: what keeps it out is that no run of the
    # default branch ever sees a PR's artifacts or its cache entries
    proc = cli("history", "merge", str(forged[0]), "--database", str(tmp_path / "probe.db"),
               "--require-ref", DEFAULT, cwd=pr["jobs"][0])
    assert proc.returncode == 0, proc.stderr

    # -- the default branch's next run: none of the PR's doing reaches it ------------
    git(main_repo, "checkout", "-q", "main")
    r4 = play_run(gh, workflow, main_repo, tmp_path, event="schedule", payload=nightly,
                  ref=DEFAULT, run="1004", plan_only=True)
    restored = r4["plan_ws"] / HISTORY
    assert restored.read_bytes() == main_history
    assert estimate(r4["plan"], "tests/fast/test_kl.py") < 9999
    assert rows(restored, "SELECT COUNT(*) FROM executions WHERE ci_run_id = 'forged'") == [(0,)]
