"""``testfleet history export|merge|show``: exit statuses, messages, no tracebacks."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from support import run_cli
from testfleet.config import Project

CI_ENV = ("GITHUB_EVENT_NAME", "GITHUB_REF", "GITHUB_RUN_ID", "GITHUB_REPOSITORY", "BUILDKITE")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], project: Project,
        monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    for name in CI_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(project.root)  # relative FILE arguments are relative to the cwd

    def go(*args: str) -> tuple[int, str, str]:
        return run_cli(capsys, "-C", str(project.root), *args)

    return go


def test_export_show_merge_and_merge_again(cli: Callable[..., tuple[int, str, str]],
                                           project: Project, seed: Callable[..., None],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seed(project, None, ci_run_id="100")
    seed(project, None, ci_run_id="200", t0=5000.0)
    monkeypatch.setenv("GITHUB_EVENT_NAME", "schedule")
    monkeypatch.setenv("GITHUB_REF", "refs/heads/main")
    code, out, _ = cli("history", "export", "--run-id", "200", "--cadence", "nightly",
                       "--write-baseline", "--output", "job.tfb")
    assert code == 0, out
    assert "exported 3 execution(s) (6 testcase result(s)), 2 gate run(s) (6 value(s)) of run 200" in out
    code, out, _ = cli("history", "show", "job.tfb", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["format"] == "testfleet.bundle/3"
    assert doc["schema"] == "testfleet.history-show/1"
    assert doc["source"]["event"] == "schedule" and doc["source"]["write_baseline"] is True
    assert doc["counts"] == {"executions": 3, "gate_runs": 2, "gate_values": 6, "testcases": 6,
                             "signatures": 2}
    code, out, err = cli("history", "merge", str(project.root / "job.tfb"), "--database", "cache.db",
                         "--require-ref", "refs/heads/main")
    assert code == 0, err
    assert "+3 execution(s) (0 already present), +2 gate run(s) (0 already present)" in out
    assert "history: " in out and "3 executions, 2 gate runs, 3 gate series, 6 gate values" in out
    code, out, _ = cli("history", "merge", "job.tfb", "--database", "cache.db", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["added"] == {"executions": 0, "gate_runs": 0, "gate_values": 0,
                                      "testcases": 0, "signatures": 0}
    assert doc["rows"]["executions"] == 3 and doc["size_bytes"] > 0
    assert (project.root / "cache.db").stat().st_size == doc["size_bytes"]  # checkpointed


def test_a_directory_stands_for_the_bundles_under_it(cli: Callable[..., tuple[int, str, str]],
                                                     project: Project,
                                                     seed: Callable[..., None],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Downloaded artifacts are one folder per job: merge reads every file under a directory
    (this was the composite action's shell loop); none at all is an error unless
    --skip-empty makes it a notice (a run whose jobs exported nothing)."""
    seed(project, None, ci_run_id="100")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "schedule")
    monkeypatch.setenv("GITHUB_REF", "refs/heads/main")
    for job in ("b", "a"):
        code, out, _ = cli("history", "export", "--run-id", "100", "--output",
                           f"in/testfleet-history-{job}/records.bundle")
        assert code == 0, out
    code, out, err = cli("history", "merge", "in", "--database", "cache.db", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["bundles"] == 2
    (project.root / "empty").mkdir()
    code, out, err = cli("history", "merge", "empty", "--database", "cache.db")
    assert code == 2 and "no history bundle in empty" in err
    code, out, err = cli("history", "merge", "--skip-empty", "empty", "--database", "cache.db")
    assert code == 0 and "no history bundles to merge" in out + err


def test_bad_bundles_exit_2_naming_file_and_problem(cli: Callable[..., tuple[int, str, str]],
                                                    project: Project,
                                                    seed: Callable[..., None]) -> None:
    seed(project, None)
    assert cli("history", "export", "--output", "good.tfb")[0] == 0
    good = (project.root / "good.tfb").read_bytes()
    (project.root / "cut.tfb").write_bytes(good[:-20])
    (project.root / "text.tfb").write_text("hello", encoding="utf-8")
    for name, problem in (("cut.tfb", "truncated"), ("text.tfb", "not gzip-compressed"),
                          ("missing.tfb", "no such file")):
        code, _, err = cli("history", "merge", "good.tfb", name, "--database", "cache.db")
        assert code == 2 and f"testfleet: error: {name}: {problem}" in err, err
        assert not (project.root / "cache.db").exists()  # nothing written, not even created
    code, _, err = cli("history", "show", "cut.tfb")
    assert code == 2 and "cut.tfb: truncated" in err


def test_pull_request_bundle_is_refused_by_merge(cli: Callable[..., tuple[int, str, str]],
                                                 project: Project, seed: Callable[..., None],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    seed(project, None)
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_REF", "refs/pull/9/merge")
    assert cli("history", "export", "--output", "pr.tfb")[0] == 0
    code, out, _ = cli("history", "show", "pr.tfb")
    assert code == 0 and "merge: refused without --allow-untrusted" in out
    code, _, err = cli("history", "merge", "pr.tfb", "--database", "cache.db")
    assert code == 2 and "pr.tfb: refused: exported by a 'pull_request' run" in err
    code, out, err = cli("history", "merge", "pr.tfb", "--database", "cache.db", "--allow-untrusted")
    assert code == 0 and "warning: " in err and "merged as untrusted" in err


def test_export_records_the_plans_policy(cli: Callable[..., tuple[int, str, str]],
                                         project: Project, seed: Callable[..., None]) -> None:
    seed(project, None)
    code, out, err = cli("plan", "--event", "push", "--format", "json", "--plan-file", "plan.json")
    assert code == 0, err
    code, out, err = cli("history", "export", "--plan", "plan.json", "--output", "b.tfb")
    assert code == 0, err
    code, out, _ = cli("history", "show", "b.tfb", "--format", "json")
    source = json.loads(out)["source"]
    assert (source["event"], source["cadence"], source["write_baseline"]) == ("push", "regular", False)
    code, out, err = cli("history", "merge", "b.tfb", "--database", "cache.db")
    assert code == 0 and "cadence regular does not write metric baselines" in err


def test_export_without_a_history_writes_an_empty_bundle(
        cli: Callable[..., tuple[int, str, str]], project: Project) -> None:
    code, out, err = cli("history", "export", "--output", "empty.tfb")
    assert code == 0 and "writing an empty bundle" in err
    assert "exported 0 execution(s)" in out
    assert not (project.root / ".testfleet" / "history.db").exists()
    code, out, _ = cli("history", "merge", "empty.tfb", "--database", "cache.db")
    assert code == 0 and "+0 execution(s)" in out


def test_usage_errors(cli: Callable[..., tuple[int, str, str]], project: Project) -> None:
    code, _, err = cli("history", "merge")
    assert code == 2 and "Missing argument" in err
    code, _, err = cli("history", "export")
    assert code == 2 and "--output" in err
    code, _, err = cli("history", "export", "--run-id", "a\nb", "--output", "x.tfb")
    assert code == 2 and "control character" in err
    # the bundle's folder (the artifact a CI job uploads) is created; a file in its way is not
    code, _, err = cli("history", "export", "--output", str(project.root / "new" / "x.tfb"))
    assert code == 0 and (project.root / "new" / "x.tfb").is_file(), err
    (project.root / "taken").write_text("")
    code, _, err = cli("history", "export", "--output", str(project.root / "taken" / "x.tfb"))
    assert code == 2 and "--output" in err and "cannot create its directory" in err
