"""`testfleet init`: what it writes, what it refuses to overwrite, and that nothing is
half-written when it refuses."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from support import run_cli
from testfleet.cli.init import strip_testfleet_section
from testfleet.config import load_project
from testfleet.integrations.github_options import STAGES_WORKFLOW_PATH
from testfleet.integrations.github_workflow import WORKFLOW_PATH

from .gha_calls import expanded_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = """\
# my project
[project]
name = "plain"
version = "1.0"

[tool.ruff]
line-length = 88
"""


def plain_tree(root: Path, pyproject: bool = True) -> Path:
    (root / "tests" / "sub").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    (root / "tests" / "sub" / "test_b.py").write_text("def test_b():\n    pass\n")
    if pyproject:
        (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def test_scaffold_into_pyproject_keeps_everything_else(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, out, _ = run_cli(capsys, "-C", str(root), "init", "--github")
    assert code == 0
    assert "wrote [tool.testfleet] in pyproject.toml" in out
    assert f"wrote {WORKFLOW_PATH}" in out
    text = (root / "pyproject.toml").read_text()
    assert text.startswith(PYPROJECT)
    assert tomllib.loads(text)["tool"]["ruff"] == {"line-length": 88}
    assert (root / WORKFLOW_PATH).is_file()
    code, out, err = run_cli(capsys, "-C", str(root), "check")
    assert code == 0, out + err
    code, out, err = run_cli(capsys, "-C", str(root), "list", "--format", "json")
    assert code == 0 and "tests/sub/test_b.py" in out


def test_without_pyproject_or_with_toml_flag_writes_testfleet_toml(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = plain_tree(tmp_path / "bare", pyproject=False)
    assert run_cli(capsys, "-C", str(bare), "init")[0] == 0
    assert load_project(bare).config_path.name == "testfleet.toml"
    flagged = plain_tree(tmp_path / "flagged")
    assert run_cli(capsys, "-C", str(flagged), "init", "--toml")[0] == 0
    assert (flagged / "pyproject.toml").read_text() == PYPROJECT
    assert load_project(flagged).config_path.name == "testfleet.toml"


def test_a_tree_with_markers_is_adopted_without_the_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    (root / "tests" / "test_gpu.py").write_text(
        "from testfleet import register_cuda_ci\n"
        "register_cuda_ci(est_time=60, suite='gpu-a100', labels=['llm'])\n")
    code, out, _ = run_cli(capsys, "-C", str(root), "init")
    assert code == 0
    assert "derived the configuration from them" in out
    assert "gpu-a100" in load_project(root).config.stages


def test_existing_config_is_kept_and_drives_the_workflow(
        example_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (example_project / "pyproject.toml").read_text()
    code, out, _ = run_cli(capsys, "-C", str(example_project), "init", "--github")
    assert code == 0
    assert "kept the existing configuration in pyproject.toml" in out
    assert (example_project / "pyproject.toml").read_text() == before
    workflow = (example_project / WORKFLOW_PATH).read_text()
    stages = (example_project / STAGES_WORKFLOW_PATH).read_text()
    assert "0 15 * * 6" in workflow and "\n  stage-c-4-gpu-mi300x:\n" in stages


def test_refusals_write_nothing(example_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (example_project / "pyproject.toml").read_text()
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--from-existing")
    assert code == 2 and "already has a testfleet configuration" in err
    wf = example_project / WORKFLOW_PATH
    wf.parent.mkdir(parents=True)
    wf.write_text("name: mine\n")
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github")
    assert code == 2 and "already exists; use --force" in err
    assert wf.read_text() == "name: mine\n"
    assert (example_project / "pyproject.toml").read_text() == before


def test_refused_workflow_also_stops_the_config(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    wf = root / WORKFLOW_PATH
    wf.parent.mkdir(parents=True)
    wf.write_text("name: mine\n")
    code, _, _ = run_cli(capsys, "-C", str(root), "init", "--github")
    assert code == 2
    assert (root / "pyproject.toml").read_text() == PYPROJECT


def test_force_regenerates_only_the_workflow(example_project: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The README's regeneration command keeps the maintainer's configuration byte for
    byte: the dormant stage's reason, the implicit directory, needs, containers,
    runs_on, gate defaults and every comment."""
    pyproject = example_project / "pyproject.toml"
    before = pyproject.read_text()
    for flag in ("--github", "--buildkite"):
        code, out, err = run_cli(capsys, "-C", str(example_project), "init", flag)
        assert code == 0, out + err
    wf = example_project / WORKFLOW_PATH
    wf.write_text("name: stale\n")
    (example_project / STAGES_WORKFLOW_PATH).write_text("name: stale\n")
    for flag in ("--github", "--buildkite"):
        code, out, err = run_cli(capsys, "-C", str(example_project), "init", flag, "--force")
        assert code == 0, out + err
        assert "kept the existing configuration in pyproject.toml" in out
    assert pyproject.read_text() == before
    assert "stale" not in wf.read_text()
    # regenerated: one job per stage
    assert "\n  stage-b-cpu:\n" in (example_project / STAGES_WORKFLOW_PATH).read_text()
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force",
                           "--from-existing")
    assert code == 2 and "--rederive-config" in err
    assert pyproject.read_text() == before


def test_rederive_config_replaces_only_the_section(example_project: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = example_project / "pyproject.toml"
    original = pyproject.read_text()
    pyproject.write_text(original.replace("[tool.testfleet]\n", "[tool.other]  # mine\nx = [1,\n  2]\n\n"
                                          "[tool.testfleet]\n", 1) + "\n[tool.zzz]  # trailing remark\ny = 1\n")
    head = pyproject.read_text().split("[tool.testfleet]")[0]
    args = ["-C", str(example_project), "init", "--github", "--rederive-config"]
    code, _, err = run_cli(capsys, *args)
    assert code == 1 and "--allow-findings" in err  # the grad_norm gate needs a config default
    assert pyproject.read_text().split("[tool.testfleet]")[0] == head  # nothing written
    assert not (example_project / WORKFLOW_PATH).exists()
    code, out, err = run_cli(capsys, *args, "--allow-findings")
    assert code == 0, out + err
    text = pyproject.read_text()
    assert text.startswith(head.rstrip("\n"))  # comments, order and formatting kept
    assert "[tool.other]  # mine\nx = [1,\n  2]" in text and "[tool.zzz]  # trailing remark\ny = 1" in text
    assert text.count("[tool.testfleet]") == 1
    assert "stage-a-cpu" not in tomllib.loads(text)["tool"]["testfleet"]["stages"]
    first = (example_project / WORKFLOW_PATH).read_text()
    code, _, _ = run_cli(capsys, *args, "--allow-findings", "--force")
    assert code == 0
    assert pyproject.read_text() == text  # idempotent
    assert (example_project / WORKFLOW_PATH).read_text() == first


def test_dry_run_prints_and_writes_nothing(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, out, _ = run_cli(capsys, "-C", str(root), "init", "--github", "--dry-run")
    assert code == 0
    assert "--- pyproject.toml" in out and f"--- {WORKFLOW_PATH}" in out
    assert (root / "pyproject.toml").read_text() == PYPROJECT
    assert not (root / ".github").exists()


def test_workflow_options_reach_the_workflow(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--github", "--install",
                           "pip install -e .", "--push-branch", "main", "--no-diff-pruning",
                           "--database-secret", "FLEET_DB", "--python", "3.11")
    assert code == 0, err
    text = (root / WORKFLOW_PATH).read_text()
    assert "pip install -e ." in text and "secrets.FLEET_DB" in text
    assert "diff-base" not in text and "python-version: '3.11'" in text and "branches:" in text


@pytest.mark.parametrize(("args", "message"), [
    (["--database-secret", "X; rm"], "not a valid secret name"),
    (["--push-branch", "a\nb"], "not a valid branch name"),
    (["--root", "../elsewhere"], "not a directory inside"),
    (["--root", "nope"], "not a directory inside"),
    (["--python", "abc"], "--python 'abc': not a Python version"),
    (["--python", "3.12\nrun: x"], "--python '3.12\\nrun: x': not a Python version"),
    (["--python", ""], "--python '': not a Python version"),
])
def test_bad_arguments_are_usage_errors(args: list[str], message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--github", *args)
    assert code == 2 and message in err
    assert (root / "pyproject.toml").read_text() == PYPROJECT


@pytest.mark.parametrize("version", ["3", "3.12", "3.12.1", "3.x", "3.12.x", "3.13-dev", "pypy3.10"])
def test_python_versions_setup_python_accepts(version: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--github", "--python", version)
    assert code == 0, err
    data = expanded_file(root / WORKFLOW_PATH)
    versions = {s["with"]["python-version"] for job in data["jobs"].values()
                for s in job.get("steps", []) if "python-version" in s.get("with", {})}
    assert versions == {version}


def test_from_existing_without_markers_is_an_error(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--from-existing")
    assert code == 2 and "no register_<backend>_ci(...) calls under tests and no central suite list" in err


def test_strip_section_keeps_other_tables_comments_and_dotted_keys() -> None:
    text = (PYPROJECT + "\n[tool.testfleet]\nroots = [\"t\"]\n\n"
            "[[tool.testfleet.implicit]]\npath = \"t\"\n\n[ tool . testfleet . stages . a ]\n"
            "backend = \"cpu\"\n\n[tool.other]  # kept\nx = 1\n")
    out = strip_testfleet_section(text)
    data = tomllib.loads(out)
    assert "testfleet" not in data["tool"] and data["tool"]["other"] == {"x": 1}
    assert out.startswith(PYPROJECT) and "[tool.other]  # kept" in out
    dotted = strip_testfleet_section('[tool]\ntestfleet.roots = ["t"]\nother = 1  # mine\n')
    assert dotted == "[tool]\nother = 1  # mine\n"


def test_buildkite_bootstrap_is_written_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = plain_tree(tmp_path)
    code, out, _ = run_cli(capsys, "-C", str(root), "init", "--buildkite", "--install", "uv pip install testfleet")
    assert code == 0 and "wrote .buildkite/pipeline.yml" in out
    assert "uv pip install testfleet" in (root / ".buildkite" / "pipeline.yml").read_text()
    code, _, err = run_cli(capsys, "-C", str(root), "init", "--buildkite")
    assert code == 2 and "already exists" in err
    assert run_cli(capsys, "-C", str(root), "init", "--buildkite", "--force")[0] == 0


def test_config_outside_the_root_is_passed_to_every_command(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    plain_tree(root / "sub", pyproject=False)
    code, _, err = run_cli(capsys, "-C", str(root), "--config", str(root / "sub" / "testfleet.toml"),
                           "init", "--github")
    assert code == 0, err
    assert load_project(root / "sub").config_path == (root / "sub" / "testfleet.toml").resolve()
    text = (root / WORKFLOW_PATH).read_text()
    stages_text = (root / STAGES_WORKFLOW_PATH).read_text()
    import yaml

    from testfleet.integrations.github_job_action import JOB_ACTION, JOB_ACTION_PATH

    jobs = expanded_file(root / WORKFLOW_PATH)["jobs"].values()
    action = yaml.safe_load((root / JOB_ACTION_PATH).read_text())["runs"]["steps"]
    steps = [s for s in [*(s for job in jobs for s in job.get("steps", [])), *action]
             if s.get("uses", "") == "./.github/actions/testfleet"]
    commands = Counter(s["with"]["command"] for s in steps)
    stage_jobs = len(load_project(root / "sub").config.stages)
    # each stage job runs its plan job through the job action, whose Run step has the config
    assert stage_jobs >= 1 and commands["plan"] == 1 and commands["run"] == 1
    assert stages_text.count(f"uses: {JOB_ACTION} ") == stage_jobs
    assert all(s["with"]["config"] == "sub/testfleet.toml" for s in steps)
    # the history lives next to that config, where testfleet opens it
    assert "path: sub/.testfleet/history.db" in text
    code, out, err = run_cli(capsys, "--config", str(root / "sub" / "testfleet.toml"), "check")
    assert code == 0, out + err


def test_unwritable_target_is_a_clear_error(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A workflow directory that cannot be created (a file is in the way, a read-only
    checkout) is exit 2 naming the file, and the configuration is not written either."""
    root = plain_tree(tmp_path)
    (root / ".github").mkdir()
    (root / ".github" / "workflows").write_text("not a directory\n")
    code, out, err = run_cli(capsys, "-C", str(root), "init", "--github")
    assert code == 2
    assert "Traceback" not in out + err
    assert "cannot write" in err and "nothing was written" in err
    assert (root / "pyproject.toml").read_text() == PYPROJECT  # a command that fails writes nothing


def test_ci_flags_are_kept_in_the_config_and_survive_regeneration(
        example_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--install / --database-secret land in [tool.testfleet.ci] (the rest of the file as
    it was), so 'init --github --force' without them regenerates the same workflow."""
    import yaml

    from testfleet.integrations.action import ACTION_PATH, render_action

    pyproject = example_project / "pyproject.toml"
    before = pyproject.read_text()
    code, out, err = run_cli(capsys, "-C", str(example_project), "init", "--github",
                             "--install", "pip install -e '.[dev]'", "--database-secret", "DB_URL")
    assert code == 0, out + err
    after = pyproject.read_text()
    assert after.startswith(before.rstrip("\n"))  # appended, nothing else rewritten
    ci = load_project(example_project).config.ci
    assert (ci.install, ci.database_secret, ci.history) == ("pip install -e '.[dev]'", "DB_URL", True)
    first = (example_project / WORKFLOW_PATH).read_text()
    data = yaml.safe_load(first)
    plan = next(s for s in data["jobs"]["plan"]["steps"] if s.get("id") == "plan")
    assert plan["with"]["install"] == "pip install -e '.[dev]'"
    assert "secrets.DB_URL" in first
    assert (example_project / ACTION_PATH).read_text() == render_action(vendored=True)
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force")
    assert code == 0, err
    assert (example_project / WORKFLOW_PATH).read_text() == first
    assert pyproject.read_text() == after


def test_default_install_is_pinned_and_bad_ci_flags_are_refused(
        example_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from testfleet import __version__
    from testfleet.integrations.action import ACTION_PATH

    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github")
    assert code == 0, err
    assert "pip install testfleet\n" not in (example_project / WORKFLOW_PATH).read_text()
    import yaml

    action = yaml.safe_load((example_project / ACTION_PATH).read_text())
    assert action["inputs"]["version"]["default"] == __version__
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force",
                           "--database-read-secret", "READ")
    assert code == 2 and "needs --database-secret" in err
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force",
                           "--install", "pip install ${{ github.head_ref }}")
    assert code == 2 and "expression" in err
    assert "[tool.testfleet.ci]" not in (example_project / "pyproject.toml").read_text()


def test_github_writes_the_trusted_workflow_and_says_what_github_must_be_told(
        example_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#27: self-hosted stages get testfleet-trusted.yml, actionlint learns their labels,
    and init prints the GitHub settings with the repository's name; #28: it says how CI
    installs testfleet, and warns when that cannot be reproduced."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(example_project)], check=True)
    subprocess.run(["git", "-C", str(example_project), "remote", "add", "origin",
                    "git@github.com:fleet-org/fleet.git"], check=True)
    code, out, err = run_cli(capsys, "-C", str(example_project), "init", "--github")
    assert code == 0, err
    github = example_project / ".github"
    assert (github / "workflows" / "testfleet-trusted.yml").is_file()
    labels = yaml.safe_load((github / "actionlint.yaml").read_text())
    assert {"h200", "mi300x", "nvidia"} <= set(labels["self-hosted-runner"]["labels"])
    # the runner group admits the workflow that defines the stage jobs, at the base branch
    assert ("fleet-org/fleet/.github/workflows/testfleet-stages.yml@refs/heads/main" in out
            and "Require approval for all external contributors" in out)
    assert "testfleet-trusted.yml@" not in out and "testfleet.yml@" not in out
    assert "'testfleet (trusted)'" in out and "ephemeral" in out
    # this checkout is an editable install, which CI cannot reach: the jobs install this
    # version's release from the index, init says why, and no local path is in any file
    from testfleet import __version__
    from testfleet.integrations.install import this_install

    if this_install().note:
        assert "editable checkout" in out and "from the package index" in out
    pinned = f"python3 -m pip install 'testfleet[runner]=={__version__}'"
    assert f"CI jobs install testfleet from testfleet {__version__} from the package index: " \
           f"{pinned}" in out
    for path in github.rglob("*"):
        if path.is_file():
            assert "file://" not in path.read_text() and str(Path.cwd()) not in path.read_text(), path
    # an install the project names is used as it is, and no warning
    code, out, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force",
                             "--install", "pip install -r requirements-ci.txt")
    assert code == 0 and "editable" not in err
    assert ("CI jobs install testfleet from [tool.testfleet.ci] install: pip install -r "
            "requirements-ci.txt") in out
    # one that names a path of this machine is refused, nothing written
    code, _, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force",
                           "--install", f"pip install -e {example_project}")
    assert code == 2 and "a path of this machine" in err
    # a project's own actionlint config is left alone; init names the labels it needs
    (github / "actionlint.yaml").write_text("self-hosted-runner:\n  labels: [mine]\n")
    code, out, _ = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force")
    assert code == 0 and "is yours and was left as it is" in out
    assert (github / "actionlint.yaml").read_text() == "self-hosted-runner:\n  labels: [mine]\n"


def test_setup_items_are_script_files_and_a_dropped_one_is_named(
        example_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#39: each setup item is written as its own shellcheck-checked script, run by its own
    step; regenerating after an item was dropped says which file no stage runs any more."""
    pyproject = example_project / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text.replace('[tool.testfleet.stages.stage-a-cpu]\n',
                                      '[tool.testfleet.stages.stage-a-cpu]\n'
                                      'setup = ["echo one", "cd $HOME"]\n', 1))
    code, out, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force")
    assert code == 0, out + err
    scripts = example_project / ".github" / "testfleet" / "stage-a-cpu"
    assert sorted(p.name for p in scripts.iterdir()) == ["setup-1.sh", "setup-2.sh"]
    assert (scripts / "setup-1.sh").read_text().endswith("set -eo pipefail\necho one\n")
    workflow = (example_project / STAGES_WORKFLOW_PATH).read_text()
    assert workflow.count("bash .github/testfleet/stage-a-cpu/setup-") == 2
    pyproject.write_text(text.replace('[tool.testfleet.stages.stage-a-cpu]\n',
                                      '[tool.testfleet.stages.stage-a-cpu]\n'
                                      'setup = ["echo one"]\n', 1))
    code, out, err = run_cli(capsys, "-C", str(example_project), "init", "--github", "--force")
    assert code == 0, out + err
    assert "no stage runs these setup scripts any more; delete them: " \
           ".github/testfleet/stage-a-cpu/setup-2.sh" in err
    assert "setup-2.sh" not in (example_project / STAGES_WORKFLOW_PATH).read_text()


def test_plan_refuses_a_plan_the_workflow_was_not_written_for(
        example_project: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan job's check (was an inline Python script in every plan job): testfleet plan
    --fits-workflow reads the runners and the CI settings digest from the workflow file."""
    code, out, err = run_cli(capsys, "-C", str(example_project), "init", "--github")
    assert code == 0, out + err
    fits = ["plan", "--event", "push", "--plan-file", "plan.json", "--fits-workflow", WORKFLOW_PATH]
    code, out, err = run_cli(capsys, "-C", str(example_project), *fits)
    assert code == 0, out + err
    pyproject = example_project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        '[tool.testfleet.stages.stage-a-cpu]\nbackend = "cpu"\nruns_on = ["ubuntu-latest"]\n',
        '[tool.testfleet.stages.stage-a-cpu]\nbackend = "cpu"\nruns_on = ["ubuntu-22.04"]\n'
        'env = { A = "1" }\n', 1))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, err = run_cli(capsys, "-C", str(example_project), *fits)
    assert code == 2
    assert "::error title=testfleet::the runs_on of stage stage-a-cpu changed" in out
    assert "::error title=testfleet::the CI settings of stage stage-a-cpu" in out
    assert "testfleet init --github --force" in err
    assert (example_project / "plan.json").is_file()  # written first, as the step summary needs
