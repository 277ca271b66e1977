"""`testfleet plan` end to end on the example project, including hostile input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support import commit_tree, github_output_dict, run_cli
from testfleet.planning.model import load_plan

MI300X = "stage-c-4-gpu-mi300x"


def test_fork_pr_without_labels_shows_dormant_mi300x(example_project: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--event", "pull_request",
                       "--fork", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    stage = next(s for s in plan["stages"] if s["name"] == MI300X)
    assert stage["status"] == "dormant"
    assert stage["reason"].startswith("MI300X runners fail at start-up")
    assert stage["hole"] is True
    assert not [j for j in plan["jobs"] if j["stage"] == MI300X]
    mi = [s for s in plan["skipped"] if s["suite"] == MI300X]
    assert mi and {s["reason"] for s in mi} == {"disabled", "stage-dormant"}
    assert any("coverage hole" in w and MI300X in w for w in plan["warnings"])
    # table and markdown say it too
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--fork")
    assert code == 0 and "dormant" in out and "MI300X runners fail at start-up" in out
    assert "coverage hole" in out
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--fork", "--format", "markdown")
    assert "Coverage holes" in out and MI300X in out


def test_every_registration_accounted(example_project: Path, capsys) -> None:
    from testfleet.config import load_project
    from testfleet.registry import collect

    registry = collect(load_project(example_project))
    _code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--labels", "run-ci-all",
                       "--format", "json")
    plan = json.loads(out)
    seen = [(t["file"], j["stage"]) for j in plan["jobs"] for t in j["tests"]]
    seen += [(s["file"], s["suite"]) for s in plan["skipped"]]
    assert sorted(seen) == sorted((r.file, r.suite) for r in registry.registrations)


def test_github_format_outputs(example_project: Path, capsys, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    out_file = tmp_path / "gh_output"
    out_file.write_text("earlier=1\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out_file))
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--labels",
                       "run-ci-megatron,nightly", "--labels", "run-ci-x\nhas_jobs=false",
                       "--labels", "run-ci-${{ secrets.TOKEN }}", "--format", "github",
                       "--plan-file", str(tmp_path / "plan.json"))
    assert code == 0
    assert "::warning title=testfleet plan::" in out
    outputs = github_output_dict(out_file.read_text())
    assert outputs["earlier"] == "1"  # appended, not overwritten
    assert outputs["has_jobs"] == "true"
    assert outputs["cadence"] == "nightly"
    assert outputs["bypass_fastfail"] == "true"
    assert outputs["write_baseline"] == "false"
    assert set(outputs) == {"earlier", "matrix", "has_jobs", "cadence", "bypass_fastfail",
                            "write_baseline", "coverage_holes", "coverage_hole_stages", "digest", "waves",
                            "matrix_0", "has_jobs_0", "matrix_1", "has_jobs_1", "stages",
                            "tree_errors", "authorized"}
    assert outputs["tree_errors"] == "false"
    assert outputs["authorized"] == "true"  # not a fork's pull request
    matrix = json.loads(outputs["matrix"])["include"]
    plan = load_plan(tmp_path / "plan.json")
    assert [m["id"] for m in matrix] == [j.id for j in plan.jobs]
    assert outputs["digest"] == plan.digest
    assert plan.trigger["labels"] == ["run-ci-megatron", "nightly", "run-ci-${{ secrets.TOKEN }}"]
    assert int(outputs["waves"]) == 2
    assert json.loads(outputs["coverage_hole_stages"]) == ["stage-c-4-gpu-mi300x"]
    wave1 = json.loads(outputs["matrix_1"])["include"]
    assert wave1 and all(m["wave"] == 1 for m in wave1)
    assert {"id", "stage", "runs_on", "container", "command", "shard", "shards"} <= set(matrix[0])


def test_output_file_and_byte_identity(example_project: Path, capsys, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for target in (a, b):
        code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--schedule",
                           "0 15 * * 6", "--format", "json", "--output", str(target))
        assert code == 0 and out == ""
    assert a.read_bytes() == b.read_bytes()
    assert load_plan(a).policy["cadence"] == "weekly"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


@pytest.mark.parametrize(("args", "message"), [
    (["--file", "../../etc/passwd"], "escapes the repository"),
    (["--file", "/etc/passwd"], "escapes the repository"),
    (["--file", "pyproject.toml"], "outside the test roots"),
    (["--file", "tests/manual/test_profile_by_hand.py"], "not a registered test file"),
    (["--file", "tests/fast/test_nope.py"], "no such file"),
    (["--file", "tests/e2e/megatron/amd/test_amd_r3_mtp.py"], "--include-disabled"),
    (["--file", "tests/fast/test_kl.py", "--labels", "run-ci-all"], "conflicting flags"),
    (["--changed-files", "x", "--diff-base", "main"], "conflicting flags"),
    (["--github", "--labels", "run-ci-all"], "conflicting flags"),
    (["--schedule", "1 2 3 4 5"], "maps to no cadence"),
    (["--cadence", "hourly"], "unknown cadence"),
    (["--event", "push", "--labels", "run-ci-all"], "labels come only with pull_request"),
    (["--event", "push", "--fork"], "--fork applies only"),
    (["--diff-base", "--output=/tmp/x"], "not a usable git revision"),
    (["--stage", "stage-c-4-gpu-h20"], "did you mean"),
    (["--include-disabled"], "--include-disabled applies only"),
    (["--file", "tests/fast/test_kl.py\n"], "not a usable path"),
    (["--plan-file", "/nonexistent-dir/plan.json"], "--plan-file /nonexistent-dir/plan.json: "
                                                    "directory"),
    (["--output", "/nonexistent-dir/out.json"], "--output /nonexistent-dir/out.json: directory"),
    (["--output", "tests"], "is a directory"),
])
def test_bad_input_is_a_clear_error(example_project: Path, capsys, args: list[str],
                                    message: str) -> None:
    code, _out, err = run_cli(capsys, "-C", str(example_project), "plan", *args)
    assert code == 2
    assert message in err
    assert err.startswith("testfleet: error:") or "Error: Invalid value" in err


def test_symlinked_file_is_refused(example_project: Path, capsys) -> None:
    link = example_project / "tests" / "fast" / "test_link.py"
    os.symlink(example_project / "tests" / "fast" / "test_kl.py", link)
    code, _, err = run_cli(capsys, "-C", str(example_project), "plan", "--file",
                       "tests/fast/test_link.py")
    assert code == 2 and "is a symlink" in err


def test_file_request(example_project: Path, capsys) -> None:
    code, out, _ = run_cli(capsys, "-C", str(example_project / "tests"), "plan", "--file",
                       "e2e/megatron/amd/test_amd_r3_mtp.py", "--include-disabled",
                       "--format", "json")
    # the file's only registration is on the dormant stage: nothing can run -> clear error
    assert code == 2
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--file",
                       "tests/unit/test_long_horizon_cpu.py", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert [t["file"] for j in plan["jobs"] for t in j["tests"]] == [
        "tests/unit/test_long_horizon_cpu.py"]


@pytest.mark.parametrize("diff", ["missing", ".", "garbage"])
def test_unreadable_diff_falls_back(example_project: Path, capsys, tmp_path: Path,
                                    diff: str) -> None:
    (tmp_path / "garbage").write_bytes(b"\x00\xff not a diff")
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--labels",
                         "run-ci-megatron", "--changed-files", str(tmp_path / diff),
                         "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert any("no stage pruned" in w for w in plan["warnings"])
    assert "no stage pruned" in err
    assert any(j["stage"] == "stage-c-4-gpu-h200" for j in plan["jobs"])


def test_docs_only_change_prunes_a_prunable_stage(example_project: Path, capsys,
                                                  tmp_path: Path) -> None:
    config = example_project / "pyproject.toml"
    text = config.read_text()
    config.write_text(text.replace('command = "python"\nshards = 2\n',
                                   'command = "python"\nshards = 2\nprune = true\n'))
    diff = tmp_path / "diff"
    diff.write_bytes(b"M\0docs/guide.md\0M\0README.md\0")
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--labels", "bypass-fastfail",
                       "--changed-files", str(diff), "--format", "json")
    plan = json.loads(out)
    assert code == 0
    assert {j["stage"] for j in plan["jobs"]} == {"stage-a-cpu"}  # CPU stage-a: no pruning
    b = next(s for s in plan["stages"] if s["name"] == "stage-b-cpu")
    assert b["status"] == "unaffected" and b["counts"]["stage-unaffected"] >= 1
    # a requested label keeps its stage even when nothing it holds changed
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--labels", "run-ci-rollout",
                       "--changed-files", str(diff), "--format", "json")
    assert "stage-b-cpu" in {j["stage"] for j in json.loads(out)["jobs"]}


def test_github_event_payload(example_project: Path, capsys, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    event = tmp_path / "event.json"
    payload = {"action": "labeled", "label": {"name": "run-ci-fsdp"}, "pull_request": {
        "labels": [{"name": "run-ci-fsdp"}],
        "head": {"repo": {"full_name": "someone/fork"}},
        "base": {"repo": {"full_name": "org/repo"}, "sha": commit_tree(example_project)}}}
    event.write_text(json.dumps(payload))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request_target")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--github", "--format", "json")
    assert code == 0
    plan = json.loads(out)
    assert plan["policy"]["fork"] and plan["policy"]["authorized"]
    assert plan["policy"]["include_labels"] == ["fsdp"]
    # pull_request_target: a label from before this event (a push since) does not authorize
    event.write_text(json.dumps({**payload, "action": "synchronize"}))
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--github", "--format", "json")
    plan = json.loads(out)
    assert code == 0 and not plan["policy"]["authorized"]
    assert plan["policy"]["include_labels"] == ["fsdp"]  # the label still selects its tests
    event.write_text("{broken")
    code, _, err = run_cli(capsys, "-C", str(example_project), "plan", "--github")
    assert code == 2 and "not valid JSON" in err


def test_registry_errors_block_planning(example_project: Path, capsys) -> None:
    bad = example_project / "tests" / "unit" / "test_bad_reg.py"
    bad.write_text('from testfleet import register_cuda_ci\n'
                   'register_cuda_ci(est_time=10, suite="no-such-stage", labels=["megatron"])\n')
    code, _, err = run_cli(capsys, "-C", str(example_project), "plan")
    assert code == 1
    assert "registration error" in err and "test_bad_reg.py" in err


def test_project_below_the_git_top_level(example_project: Path, capsys, tmp_path: Path) -> None:
    import shutil
    import subprocess

    top = tmp_path / "mono"
    top.mkdir()
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    project = top / "services" / "fleet"
    shutil.copytree(example_project, project)
    # let stage-b-cpu (which has unlabelled tests) be pruned, to see pruning happen
    config = project / "pyproject.toml"
    text = config.read_text()
    assert 'command = "python"\nshards = 2\n' in text
    config.write_text(text.replace('command = "python"\nshards = 2\n',
                                   'command = "python"\nshards = 2\nprune = true\n'))
    diff = tmp_path / "diff"
    cases = [
        (b"M\0services/fleet/docs/guide.md\0M\0README.md\0", {"stage-a-cpu"}),
        (b"M\0services/fleet/tests/unit/test_weight_sync.py\0", {"stage-a-cpu", "stage-b-cpu"}),
        (b"M\0services/fleet/docs/guide.md\0M\0libs/core/model.py\0",
         {"stage-a-cpu", "stage-b-cpu"}),  # outside the project: prunes nothing
        (b"M\0tests/unit/test_weight_sync.py\0", {"stage-a-cpu", "stage-b-cpu"}),
    ]
    for data, want in cases:
        diff.write_bytes(data)
        code, out, _ = run_cli(capsys, "-C", str(project), "plan", "--labels", "bypass-fastfail",
                           "--changed-files", str(diff), "--format", "json")
        assert code == 0
        assert {j["stage"] for j in json.loads(out)["jobs"]} == want, data


@pytest.mark.parametrize("option", ["--plan-file", "--output"])
def test_unwritable_output_directory_is_a_clear_error(example_project: Path, capsys,
                                                      tmp_path: Path, monkeypatch,
                                                      option: str) -> None:
    """A directory the plan cannot be written into (read-only, /proc) is exit 2 with the
    path named, not a traceback from creating the temporary file."""
    import tempfile

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    target = tmp_path / "plan.json"
    code, _out, err = run_cli(capsys, "-C", str(example_project), "plan", option, str(target))
    assert code == 2
    assert f"{option} {target}: cannot write it: Permission denied" in err
    assert not target.exists()


def test_output_files_are_readable_per_umask(example_project: Path, capsys,
                                             tmp_path: Path) -> None:
    """--output and --plan-file are files the user asked for: 0o666 minus the umask (here
    0o644), not the private 0o600 of the temporary file they are renamed from."""
    import stat

    old = os.umask(0o022)
    try:
        code, _out, _err = run_cli(capsys, "-C", str(example_project), "plan", "--format", "json",
                                   "--output", str(tmp_path / "out.json"),
                                   "--plan-file", str(tmp_path / "plan.json"))
    finally:
        os.umask(old)
    assert code == 0
    for name in ("out.json", "plan.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


def test_header_says_the_pr_is_from_a_fork(example_project: Path, capsys) -> None:
    """A fork's PR skips trusted_only stages; the table and markdown headers must say the
    plan is for a fork, not read like any other pull request."""
    for fmt, needle in (("table", "event pull_request from a fork ·"),
                        ("markdown", "**pull\\_request** from a fork ·")):
        code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--event",
                               "pull_request", "--fork", "--format", fmt)
        assert code == 0 and needle in out, out[:300]
        code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--event",
                               "pull_request", "--format", fmt)
        assert code == 0 and "from a fork" not in out


def test_cache_dir_that_is_a_file_is_named_not_called_missing_history(
        example_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``.testfleet`` as a regular file: the plan says the file is in the way, not that
    the history database does not exist "yet"."""
    monkeypatch.delenv("TESTFLEET_DATABASE_URL", raising=False)
    cache = example_project / ".testfleet"
    if cache.is_dir():
        import shutil

        shutil.rmtree(cache)
    cache.write_text("not a directory\n")
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--format", "json")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert not any("yet" in w for w in warnings), warnings
    assert any(".testfleet (the config's cache_dir) is a file, not a directory" in w
               and "est_time literals" in w for w in warnings), warnings
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--format", "json",
                           "--database", ".testfleet/sub/history.db")
    assert any("history database .testfleet/sub/history.db cannot exist: .testfleet is a file" in w
               for w in json.loads(out)["warnings"])


def test_missing_history_database_still_says_so(example_project: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTFLEET_DATABASE_URL", raising=False)
    code, out, _ = run_cli(capsys, "-C", str(example_project), "plan", "--format", "json",
                           "--database", "nowhere/history.db")
    assert code == 0 and any("no history database at nowhere/history.db yet" in w
                             for w in json.loads(out)["warnings"])


def test_a_tree_whose_stages_never_run_on_push_is_told_which_event_to_pass(
        tmp_path: Path, capsys) -> None:
    """An adopted tree's CI often never runs on push, the event assumed without --event:
    plan and run say which event to pass instead of leaving an empty plan unexplained (#39)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_a.py").write_text(
        'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="a")\n')
    config = 'roots = ["tests"]\n[stages.a]\nbackend = "cpu"\nevents = ["pull_request", "schedule"]\n'
    (tmp_path / "testfleet.toml").write_text(config)
    hint = ("no stage runs on push, the event assumed without --event; pass --event "
            "pull_request (this configuration's stages run on pull_request, schedule)")
    code, _, err = run_cli(capsys, "-C", str(tmp_path), "plan")
    assert code == 0 and hint in err
    code, _, err = run_cli(capsys, "-C", str(tmp_path), "run", "--stage", "a", "--dry-run")
    assert hint in err
    code, out, err = run_cli(capsys, "-C", str(tmp_path), "plan", "--event", "pull_request")
    assert code == 0 and hint not in err and "1 job(s)" in out
    # a stage that runs on push (or on every event) needs no hint
    (tmp_path / "testfleet.toml").write_text(config.replace('"schedule"]', '"schedule", "push"]'))
    assert hint.split(";")[0] not in run_cli(capsys, "-C", str(tmp_path), "plan")[2]
