"""The composite action (action.yml): current, schema-valid, lint-clean, and its script
passes every input to testfleet as data (one argument per line, never evaluated)."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testfleet import __version__
from testfleet.integrations.action import (
    COMMANDS,
    OLD_COMMANDS,
    PLAN_OUTPUTS,
    RECONCILE_OUTPUTS,
    render_action,
)

from .conftest import run_tool, tool

REPO = Path(__file__).resolve().parents[2]
PWNED = Path("/tmp/testfleet-pwned")


def action() -> dict[str, Any]:
    return yaml.safe_load(render_action())


def test_the_repository_action_is_the_rendered_one() -> None:
    assert (REPO / "action.yml").read_text(encoding="utf-8") == render_action(), (
        "action.yml is stale; regenerate it: python -c 'from testfleet.integrations.action "
        "import render_action; print(render_action(), end=\"\")' > action.yml")


def test_action_passes_its_schema_and_zizmor(tmp_path: Path) -> None:
    path = tmp_path / "action.yml"
    path.write_text(render_action())
    schema = run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(path))
    assert schema.returncode == 0, schema.stdout + schema.stderr
    zizmor = run_tool(tool("zizmor"), "--offline", "--persona", "auditor", "--no-progress", str(path))
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr
    # the schema check is not vacuous
    broken = yaml.safe_load(render_action())
    del broken["runs"]["using"]
    path.write_text(yaml.safe_dump(broken))
    bad = run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(path))
    assert bad.returncode != 0


def test_inputs_reach_scripts_only_through_env() -> None:
    data = action()
    assert data["runs"]["using"] == "composite"
    for step in data["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"]
            assert step["shell"] == "bash"
        if "uses" in step:
            assert "@" in step["uses"] and " # v" in render_action()
    assert data["inputs"]["version"]["default"] == __version__  # the install is pinned
    assert set(data["outputs"]) == set(PLAN_OUTPUTS) | set(RECONCILE_OUTPUTS)
    for name, out in data["outputs"].items():
        assert out["value"] == f"${{{{ steps.testfleet.outputs.{name} }}}}"


def _fake_bin(tmp_path: Path) -> Path:
    """``testfleet`` and ``python3`` stand-ins that log their argv (NUL-separated)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("testfleet", "python3"):
        path = bin_dir / name
        # the action's step is 'testfleet action': the real one, which calls the stand-in
        real = f'if [ "$1" = action ]; then exec {sys.executable} -m testfleet action; fi\n' \
            if name == "testfleet" else ""
        path.write_text(f'#!/bin/bash\n{real}printf "%s\\0" {name} "$@" >> "$ARGV_LOG"\n'
                        'printf "\\n" >> "$ARGV_LOG"\nexit "${FAKE_EXIT:-0}"\n')
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _step(name: str) -> str:
    return next(s["run"] for s in action()["runs"]["steps"] if s["name"] == name)


def run_action(tmp_path: Path, inputs: dict[str, str], event: str = "pull_request",
               step: str = "testfleet", fake_exit: int = 0) -> tuple[int, str, list[list[str]]]:
    bin_dir = tmp_path / "bin" if (tmp_path / "bin").exists() else _fake_bin(tmp_path)
    log = tmp_path / "argv.log"
    log.write_text("")
    data = action()
    spec = next(s for s in data["runs"]["steps"] if s["name"] == step)
    values = {k: str(v.get("default", "")) for k, v in data["inputs"].items()} | inputs
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log), "GITHUB_EVENT_NAME": event,
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "GITHUB_OUTPUT": str(tmp_path / "github_output"), "FAKE_EXIT": str(fake_exit)}
    for key, expr in spec["env"].items():
        env[key] = values[expr.removeprefix("${{ inputs.").removesuffix(" }}")]
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", spec["run"]],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    calls = [line.split("\0") for line in log.read_text().split("\0\n") if line]
    return proc.returncode, proc.stdout + proc.stderr, calls


def test_args_are_one_argument_per_line_and_never_evaluated(tmp_path: Path) -> None:
    PWNED.unlink(missing_ok=True)
    hostile = "$(touch /tmp/testfleet-pwned)"
    code, out, calls = run_action(tmp_path, {
        "command": "run", "job": "stage-a-cpu-1-of-2", "plan-file": "plan.json",
        "args": f"--label\nwith spaces and 'quotes'\n{hostile}\n`id`\n\n"})
    assert code == 0, out
    assert calls == [["testfleet", "run", "--plan", "plan.json", "--job", "stage-a-cpu-1-of-2",
                      "--junit", "testfleet-junit/stage-a-cpu-1-of-2.xml",
                      "--status-file", "testfleet-status/stage-a-cpu-1-of-2.json", "--label",
                      "with spaces and 'quotes'", hostile, "`id`"]]
    assert not PWNED.exists()


def test_run_passes_the_plan_digest_and_needs_a_job(tmp_path: Path) -> None:
    """The digest check is testfleet run's own (--plan-digest: the plan file's content must
    have it; tests/exactly_once/test_frozen.py), not a shell pre-check in the action."""
    (tmp_path / "plan.json").write_text('{"digest":"sha256:aaaa","jobs":[]}\n')
    code, out, calls = run_action(tmp_path, {"command": "run", "job": "j",
                                             "plan-digest": "sha256:bbbb"})
    assert code == 0, out
    assert calls == [["testfleet", "run", "--plan", "plan.json", "--job", "j",
                      "--junit", "testfleet-junit/j.xml", "--status-file", "testfleet-status/j.json",
                      "--plan-digest", "sha256:bbbb"]]
    code, out, calls = run_action(tmp_path, {"command": "run"})
    assert code == 2 and "needs the 'job' input" in out and calls == []
    code, out, calls = run_action(tmp_path, {"command": "run", "job": "j"})
    assert code == 0 and "--plan-digest" not in calls[0]


@pytest.mark.parametrize(("event", "inputs", "expect"), [
    ("pull_request", {"diff-base": "HEAD^1"}, ["--github", "--diff-base", "HEAD^1"]),
    ("push", {"diff-base": "HEAD^1"}, ["--github"]),  # the diff only prunes PRs
    ("release", {"cadence": "weekly"}, ["--event", "workflow_call", "--cadence", "weekly"]),
])
def test_plan_derives_the_trigger_from_the_event(tmp_path: Path, event: str,
                                                 inputs: dict[str, str], expect: list[str]) -> None:
    code, out, calls = run_action(tmp_path, {"command": "plan", "config": "sub/testfleet.toml",
                                             **inputs}, event=event)
    assert code == 0, out
    base = ["testfleet", "--config", "sub/testfleet.toml", "plan", *expect]
    assert calls == [[*base, "--format", "github", "--plan-file", "plan.json"],
                     [*base, "--format", "markdown"]]


def test_each_command_is_the_clis_with_its_words_hyphenated() -> None:
    """``history-export`` runs ``testfleet history export``, as ``history-merge`` runs
    ``history merge``: one name for one thing in the action and the CLI (#30)."""
    from testfleet.cli.main import COMMANDS as CLI_COMMANDS

    for name, command in COMMANDS.items():
        assert name == command.replace(" ", "-")
        assert command.split()[0] in CLI_COMMANDS
    assert "record" not in COMMANDS


@pytest.mark.parametrize("old", sorted(OLD_COMMANDS))
def test_an_old_command_name_still_runs_and_says_it_is_deprecated(tmp_path: Path, old: str) -> None:
    new = OLD_COMMANDS[old]
    code, out, calls = run_action(tmp_path, {"command": old, "args": "--output\nb.bundle"})
    assert code == 0, out
    assert calls == [["testfleet", *COMMANDS[new].split(), "--output", "b.bundle"]]
    assert f"::notice title=testfleet::the action's command '{old}' is now '{new}'" in out
    code, out, calls = run_action(tmp_path, {"command": new, "args": "--output\nb.bundle"})
    assert code == 0 and "::notice" not in out
    assert calls == [["testfleet", *COMMANDS[new].split(), "--output", "b.bundle"]]


def test_export_and_merge_map_to_history_commands(tmp_path: Path) -> None:
    code, _, calls = run_action(tmp_path, {"command": "history-export", "args": "--output\nb.bundle"})
    assert code == 0 and calls == [["testfleet", "history", "export", "--output", "b.bundle"]]
    # a directory stands for the bundles under it, and none is a notice: testfleet's own
    # code (tests/history/test_cli.py), not a loop in the action's script
    code, _, calls = run_action(tmp_path, {"command": "history-merge",
                                           "args": "in\n--require-ref\nrefs/heads/main"})
    assert code == 0
    assert calls == [["testfleet", "history", "merge", "--skip-empty", "in", "--require-ref",
                      "refs/heads/main"]]


def test_reconcile_reads_the_status_locations_or_the_status_dir(tmp_path: Path) -> None:
    """#26: the final job's step; the plan digest reaches testfleet through the environment
    ($TESTFLEET_PLAN_DIGEST, which `reconcile --expect-digest` reads)."""
    code, _, calls = run_action(tmp_path, {"command": "reconcile", "plan-file": "p.json",
                                           "args": "statuses/\nextra.json"})
    assert code == 0 and calls == [["testfleet", "reconcile", "--plan", "p.json", "statuses/",
                                    "extra.json"]]
    code, _, calls = run_action(tmp_path, {"command": "reconcile", "status-dir": "st"})
    assert code == 0 and calls == [["testfleet", "reconcile", "--plan", "plan.json", "st"]]
    code, _, _ = run_action(tmp_path, {"command": "reconcile"}, fake_exit=1)
    assert code == 1  # a failed reconciliation fails the step


def test_an_unknown_command_is_refused(tmp_path: Path) -> None:
    code, out, calls = run_action(tmp_path, {"command": "rm -rf /"})
    assert code == 2 and calls == [] and "valid: " + ", ".join(COMMANDS) in out


def test_install_defaults_to_the_pinned_version(tmp_path: Path) -> None:
    code, out, calls = run_action(tmp_path, {}, step="Install testfleet")
    assert code == 0, out
    assert calls == [["python3", "-m", "pip", "install", f"testfleet[runner]=={__version__}"],
                     ["testfleet", "--version"]]
    marker = tmp_path / "installed"
    code, out, calls = run_action(tmp_path, {"install": f"touch {marker}"}, step="Install testfleet")
    assert code == 0 and marker.exists() and calls == [["testfleet", "--version"]]


def test_generated_workflow_steps_use_only_declared_inputs() -> None:
    from testfleet.config import load_project
    from testfleet.integrations.github_workflow import WorkflowOptions, render_workflow

    declared = set(action()["inputs"])
    config = load_project(REPO / "examples" / "fleet").config
    for opts in (WorkflowOptions(), WorkflowOptions(database_secret="DB", install="pip install -r ci.txt")):
        from testfleet.integrations.github_job_action import JOB_ACTION, render_job_action

        data = yaml.safe_load(render_workflow(config, opts))
        job_action = yaml.safe_load(render_job_action(config, opts))
        job_inputs = set(job_action["inputs"])
        steps = [s for job in data["jobs"].values() for s in job.get("steps", [])]
        for step in steps:  # the stage jobs give the job action exactly its inputs
            if step.get("uses") == JOB_ACTION:
                assert set(step["with"]) == job_inputs
        steps = [s for s in [*steps, *job_action["runs"]["steps"]]
                 if s.get("uses", "") == "./.github/actions/testfleet"]
        assert steps
        for step in steps:
            assert set(step["with"]) <= declared, step
            assert step["with"]["command"] in COMMANDS


@pytest.mark.parametrize(("status", "step_code"), [(0, 0), (1, 0), (2, 2)])
def test_plan_with_rejected_registrations_still_runs_the_valid_tests(
        tmp_path: Path, status: int, step_code: int) -> None:
    """plan exits 1 when registrations were rejected but the plan was made (its outputs say
    tree_errors=true): the step must pass so the valid tests run; a usage error (2) fails."""
    code, out, calls = run_action(tmp_path, {"command": "plan"}, fake_exit=status)
    assert code == step_code, out
    assert len(calls) == (1 if status == 2 else 2)  # the summary is written unless it failed


def test_used_as_owner_repo_at_sha_it_installs_its_own_source(tmp_path: Path) -> None:
    """#28 item 5: `uses: owner/testfleet@<sha>` checks the action out with testfleet's own
    source beside it; the default install takes that source, not a version from the index."""
    source = tmp_path / "action-checkout"
    source.mkdir()
    (source / "pyproject.toml").write_text('[project]\nname = "testfleet"\nversion = "0.1.0"\n')
    bin_dir = _fake_bin(tmp_path)
    log = tmp_path / "argv.log"
    log.write_text("")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log), "TESTFLEET_INSTALL": "",
           "TESTFLEET_VERSION": __version__, "GITHUB_ACTION_PATH": str(source)}
    proc = subprocess.run(["bash", "-e", "-c", _step("Install testfleet")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    calls = [line.split("\0") for line in log.read_text().split("\0\n") if line]
    assert calls[0] == ["python3", "-m", "pip", "install", f"{source}[runner]"]
    # vendored in a project (no testfleet source beside it): the pinned version
    (source / "pyproject.toml").write_text('[project]\nname = "fleet"\n')
    log.write_text("")
    subprocess.run(["bash", "-e", "-c", _step("Install testfleet")], cwd=tmp_path, env=env,
                   capture_output=True, text=True, timeout=60, check=True)
    calls = [line.split("\0") for line in log.read_text().split("\0\n") if line]
    assert calls[0] == ["python3", "-m", "pip", "install", f"testfleet[runner]=={__version__}"]


def test_plan_takes_a_stage_list_and_diffs_on_pull_request_target(tmp_path: Path) -> None:
    code, out, calls = run_action(tmp_path, {"command": "plan", "stages": "unit,lint",
                                             "diff-base": "HEAD^1"},
                                  event="pull_request_target")
    assert code == 0, out
    assert calls[0][:9] == ["testfleet", "plan", "--github", "--diff-base", "HEAD^1",
                            "--stage", "unit", "--stage", "lint"]
