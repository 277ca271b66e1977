"""A fork's pull request is planned with the BASE commit's trust settings (issue #17).

Each test builds a real git repository: the base commit holds the maintainers'
configuration, the work tree holds a fork's edits to it (as the PR checkout
would), and the event payload names the base commit as GitHub does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import commit_tree, run_cli

BASE_CONFIG = """\
[tool.testfleet]
roots = ["tests"]

[tool.testfleet.labels]
gpu = "GPU tests"

[tool.testfleet.stages.cpu]
backend = "cpu"
runs_on = ["ubuntu-latest"]

[tool.testfleet.stages.gpu]
backend = "cuda"
runs_on = ["self-hosted", "h100"]
container = "nvcr.io/base:1"
trusted_only = true

[tool.testfleet.policy]
authorize_labels = ["ok-to-test"]
"""

CPU_TEST = ('from testfleet import register_cpu_ci\n'
            'register_cpu_ci(est_time=5, suite="cpu")\n')
GPU_TEST = ('from testfleet import register_cuda_ci\n'
            'register_cuda_ci(est_time=5, suite="gpu", labels=["gpu"])\n')


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """(project root, base commit): a repository whose HEAD is the base branch."""
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text(BASE_CONFIG)
    (root / "tests" / "test_cpu.py").write_text(CPU_TEST)
    (root / "tests" / "test_gpu.py").write_text(GPU_TEST)
    return root, commit_tree(root)


def fork_edit(root: Path, old: str, new: str) -> None:
    """The fork's change to the configuration (in the PR checkout, not committed at base)."""
    path = root / "pyproject.toml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def plan_fork(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
              root: Path, labels: list[str], base_sha: str | None,
              fmt: str = "json") -> tuple[int, str, str]:
    pr: dict[str, object] = {
        "labels": [{"name": name} for name in labels],
        "head": {"repo": {"full_name": "mallory/fork"}, "sha": "0" * 40},
        "base": {"repo": {"full_name": "org/repo"}},
    }
    if base_sha is not None:
        pr["base"] = {"repo": {"full_name": "org/repo"}, "sha": base_sha}
    event = root.parent / "event.json"
    event.write_text(json.dumps({"pull_request": pr, "repository": {"full_name": "org/repo"}}))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    return run_cli(capsys, "-C", str(root), "plan", "--github", "--format", fmt)


def stage(plan: dict, name: str) -> dict:
    return next(s for s in plan["stages"] if s["name"] == name)


def test_fork_that_turns_trusted_only_off_stays_unauthorized(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, sha = repo
    fork_edit(root, "trusted_only = true", "trusted_only = false")
    code, out, err = plan_fork(capsys, monkeypatch, root, ["run-ci-gpu"], sha)
    assert code == 0, err
    plan = json.loads(out)
    assert stage(plan, "gpu")["status"] == "unauthorized"
    assert not [j for j in plan["jobs"] if j["stage"] == "gpu"]
    assert plan["trust"]["source"] == "base" and plan["trust"]["commit"] == sha
    assert plan["trust"]["config"] == "pyproject.toml"
    assert "trusted_only" in plan["trust"]["settings"]


def test_fork_that_adds_its_own_authorize_label_is_not_authorized(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, sha = repo
    fork_edit(root, 'authorize_labels = ["ok-to-test"]', 'authorize_labels = ["run-ci-gpu"]')
    code, out, err = plan_fork(capsys, monkeypatch, root, ["run-ci-gpu"], sha)
    assert code == 0, err
    plan = json.loads(out)
    assert not plan["policy"]["authorized"]
    assert stage(plan, "gpu")["status"] == "unauthorized"
    assert "ok-to-test" in stage(plan, "gpu")["reason"]  # the base's rule is the one quoted


def test_base_label_authorizes_and_runs_on_comes_from_the_base(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, sha = repo
    fork_edit(root, 'runs_on = ["self-hosted", "h100"]', 'runs_on = ["self-hosted", "prod-db"]')
    fork_edit(root, 'container = "nvcr.io/base:1"', 'container = "mallory/evil:latest"')
    fork_edit(root, 'runs_on = ["ubuntu-latest"]', 'runs_on = ["self-hosted", "deploy"]')
    code, out, err = plan_fork(capsys, monkeypatch, root, ["ok-to-test", "run-ci-gpu"], sha)
    assert code == 0, err
    plan = json.loads(out)
    jobs = {j["stage"]: j for j in plan["jobs"]}
    assert plan["policy"]["authorized_by"] == "ok-to-test"
    assert jobs["gpu"]["runs_on"] == ["self-hosted", "h100"]
    assert jobs["gpu"]["container"] == "nvcr.io/base:1"
    assert jobs["cpu"]["runs_on"] == ["ubuntu-latest"]


def test_same_repository_pr_uses_the_checkout_config(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root, sha = repo
    fork_edit(root, 'runs_on = ["ubuntu-latest"]', 'runs_on = ["ubuntu-24.04"]')
    event = tmp_path / "same.json"
    event.write_text(json.dumps({"pull_request": {
        "labels": [], "head": {"repo": {"full_name": "org/repo"}},
        "base": {"repo": {"full_name": "org/repo"}, "sha": sha}}}))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    code, out, err = run_cli(capsys, "-C", str(root), "plan", "--github", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert "trust" not in plan
    assert plan["jobs"][0]["runs_on"] == ["ubuntu-24.04"]


def test_stage_the_base_does_not_have_is_denied(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, sha = repo
    (root / "pyproject.toml").write_text(
        (root / "pyproject.toml").read_text()
        + '\n[tool.testfleet.stages.gpu2]\nbackend = "cuda"\nruns_on = ["self-hosted"]\n')
    (root / "tests" / "test_gpu2.py").write_text(GPU_TEST.replace('"gpu"', '"gpu2"', 1))
    code, out, err = plan_fork(capsys, monkeypatch, root, ["ok-to-test", "run-ci-gpu"], sha)
    assert code == 0, err
    plan = json.loads(out)
    assert stage(plan, "gpu2")["status"] == "unauthorized"
    assert "not in the base commit" in stage(plan, "gpu2")["reason"]
    assert stage(plan, "gpu")["status"] == "scheduled"


@pytest.mark.parametrize("case", ["missing-commit", "no-sha", "moved-config", "invalid-at-base",
                                  "not-a-repo"])
def test_unreadable_base_config_fails_closed(
        case: str, repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, sha = repo
    fork_edit(root, "trusted_only = true", "trusted_only = false")
    base: str | None = sha
    if case == "missing-commit":
        base = "1234567" * 5 + "89abc"
    elif case == "no-sha":
        base = None
    elif case == "moved-config":
        # the fork moves its configuration to a file the base does not have
        text = (root / "pyproject.toml").read_text().replace("[tool.testfleet", "[")
        text = text.replace("[]\n", "", 1).replace("[.", "[")
        (root / "testfleet.toml").write_text(text)
    elif case == "invalid-at-base":
        (root / "pyproject.toml").write_text("[tool.testfleet]\nroots = 3\n")
        base = commit_tree(root)
        (root / "pyproject.toml").write_text(BASE_CONFIG.replace("trusted_only = true",
                                                                 "trusted_only = false"))
    elif case == "not-a-repo":
        subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
    code, out, err = plan_fork(capsys, monkeypatch, root, ["ok-to-test", "run-ci-gpu"], base)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["jobs"] == []
    assert {s["status"] for s in plan["stages"]} == {"unauthorized"}
    assert plan["trust"]["source"] == "unavailable" and plan["trust"]["problem"]
    assert any("could not be read" in w for w in plan["warnings"])
    assert {s["reason"] for s in plan["skipped"]} == {"unauthorized"}


def test_table_and_markdown_say_where_trust_came_from(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root, sha = repo
    for fmt in ("table", "markdown"):
        code, out, err = plan_fork(capsys, monkeypatch, root, [], sha, fmt=fmt)
        assert code == 0, err
        assert f"from the base commit {sha[:12]}" in out
    code, out, err = plan_fork(capsys, monkeypatch, root, [], "f" * 40, fmt="table")
    assert code == 0 and "fail closed" in out


def test_manual_fork_with_trust_base(repo: tuple[Path, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    root, _sha = repo
    fork_edit(root, "trusted_only = true", "trusted_only = false")
    code, out, err = run_cli(capsys, "-C", str(root), "plan", "--fork", "--labels", "run-ci-gpu",
                             "--trust-base", "HEAD", "--format", "json")
    assert code == 0, err
    assert stage(json.loads(out), "gpu")["status"] == "unauthorized"
    code, _, err = run_cli(capsys, "-C", str(root), "plan", "--trust-base", "HEAD")
    assert code == 2 and "--fork" in err
    code, _, err = run_cli(capsys, "-C", str(root), "plan", "--fork", "--trust-base", "--x")
    assert code == 2 and "not a usable git revision" in err


def test_github_with_trust_base_reads_that_revision_not_the_payload(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The trusted workflow plans with --github --trust-base HEAD^1 (the merge commit's
    first parent): the payload's base.sha, which can be older or absent, is not used."""
    root, _sha = repo
    fork_edit(root, "trusted_only = true", "trusted_only = false")
    subprocess.run(["git", "-C", str(root), "-c", "user.name=x", "-c", "user.email=x@x",
                    "commit", "-qam", "fork"], check=True)
    plan_fork(capsys, monkeypatch, root, ["run-ci-gpu", "ok-to-test"], "f" * 40)  # the payload
    code, out, err = run_cli(capsys, "-C", str(root), "plan", "--github", "--trust-base",
                             "HEAD^1", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["trust"]["source"] == "base" and plan["trust"]["commit"] == "HEAD^1"
    assert stage(plan, "gpu")["status"] == "scheduled"  # ok-to-test authorizes (pull_request)
    # on pull_request_target only the label this event added authorizes the fork
    event = root.parent / "event.json"
    payload = json.loads(event.read_text())
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request_target")
    for action, added, status in (("synchronize", None, "unauthorized"),
                                  ("labeled", "documentation", "unauthorized"),
                                  ("labeled", "ok-to-test", "scheduled")):
        event.write_text(json.dumps({**payload, "action": action,
                                     **({"label": {"name": added}} if added else {})}))
        code, out, err = run_cli(capsys, "-C", str(root), "plan", "--github", "--trust-base",
                                 "HEAD^1", "--format", "json")
        assert code == 0, err
        plan = json.loads(out)
        assert stage(plan, "gpu")["status"] == status, (action, added)
        if status == "unauthorized":
            assert any("only a label added by this very event" in n
                       for n in plan["policy"]["notes"]), plan["policy"]["notes"]


def test_the_trusted_workflow_plans_a_same_repo_pr_with_the_base_settings(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A same-repository pull request that bumps a self-hosted stage's image: the trusted
    workflow's jobs run with the base branch's definition, so its plan (made with
    --trust-base) carries the base's image, and the plan job's guard agrees with the file."""
    root, _sha = repo
    fork_edit(root, 'container = "nvcr.io/base:1"', 'container = "nvcr.io/pr:2"')
    subprocess.run(["git", "-C", str(root), "-c", "user.name=x", "-c", "user.email=x@x",
                    "commit", "-qam", "bump"], check=True)
    event = root.parent / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "pull_request": {
        "labels": [{"name": "run-ci-gpu"}], "head": {"repo": {"full_name": "org/repo"}},
        "base": {"repo": {"full_name": "org/repo"}, "sha": "f" * 40}}}))
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    images = {}
    for event_name, extra in (("pull_request", []), ("pull_request_target",
                                                     ["--trust-base", "HEAD^1"])):
        monkeypatch.setenv("GITHUB_EVENT_NAME", event_name)
        code, out, err = run_cli(capsys, "-C", str(root), "plan", "--github", *extra,
                                 "--format", "json")
        assert code == 0, err
        plan = json.loads(out)
        assert plan["policy"]["authorized"] and not plan["policy"]["fork"]
        images[event_name] = {j["container"] for j in plan["jobs"] if j["stage"] == "gpu"}
    assert images == {"pull_request": {"nvcr.io/pr:2"}, "pull_request_target": {"nvcr.io/base:1"}}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=x", "-c", "user.email=x@x",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


def test_pr_head_binds_the_plan_to_the_labelled_commit(
        repo: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """#36 item 2: the trusted workflow passes --pr-head <the event's head.sha>; the plan is
    made only when the checkout is the merge commit of that head (its second parent).
    A push after the label moves refs/pull/<n>/merge: refused, asking for the label again."""
    root, base = repo
    _git(root, "checkout", "-qb", "fork")
    (root / "tests" / "test_cpu.py").write_text(CPU_TEST + "# the labelled change\n")
    _git(root, "commit", "-qam", "labelled")
    labelled = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", base)
    _git(root, "merge", "-q", "--no-ff", "-m", "merge", "fork")
    plan_fork(capsys, monkeypatch, root, ["run-ci-gpu", "ok-to-test"], base)  # the payload
    event = root.parent / "event.json"
    payload = json.loads(event.read_text())
    payload["pull_request"]["head"]["sha"] = labelled
    event.write_text(json.dumps({**payload, "action": "labeled", "label": {"name": "ok-to-test"}}))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request_target")
    argv = ("-C", str(root), "plan", "--github", "--trust-base", "HEAD^1", "--format", "json",
            "--pr-head")
    code, out, err = run_cli(capsys, *argv, labelled)
    assert code == 0, err
    assert stage(json.loads(out), "gpu")["status"] == "scheduled"
    code, out, err = run_cli(capsys, *argv, labelled.upper())  # any case of the same id
    assert code == 0, err
    # the fork pushes again and GitHub recomputes the merge commit
    _git(root, "checkout", "-q", "fork")
    (root / "tests" / "test_gpu.py").write_text(GPU_TEST + "# pushed after the label\n")
    _git(root, "commit", "-qam", "after the label")
    pushed = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", base)
    _git(root, "merge", "-q", "--no-ff", "-m", "merge", "fork")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, err = run_cli(capsys, *argv, labelled)
    message = (f"the pull request moved after it was labelled (labelled {labelled}, now "
               f"{pushed}): a maintainer must label it again")
    assert code == 2 and message in err and not out.lstrip().startswith("{")
    assert f"::error title=testfleet plan::{message}" in out
    # a push's own event is no label: its run is told why, not asked for a label
    event.write_text(json.dumps({**payload, "action": "synchronize"}))
    code, _, err = run_cli(capsys, *argv, labelled)
    assert code == 2 and "moved after this event" in err and "label it again" not in err
    # not a merge commit at all (the checkout is the head itself): nothing shows what it merges
    _git(root, "checkout", "-q", pushed)
    code, _, err = run_cli(capsys, *argv, pushed)
    assert code == 2 and "not a pull request's merge commit" in err
    code, _, err = run_cli(capsys, *argv, "HEAD")
    assert code == 2 and "not a full commit id" in err
    code, _, err = run_cli(capsys, "-C", str(root), "plan", "--event", "push", "--pr-head", pushed)
    assert code == 2 and "only to a pull request" in err
