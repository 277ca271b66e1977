"""The pre-commit hook: its manifest is valid for pre-commit itself, and its entry, given
the file names pre-commit passes, judges those files (plus the project-wide findings)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / ".pre-commit-hooks.yaml"
EXAMPLE = REPO / "examples" / "fleet"


def _hook() -> dict[str, object]:
    hooks = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    (hook,) = [h for h in hooks if h["id"] == "testfleet-check"]
    return hook


def test_manifest_is_valid_for_pre_commit() -> None:
    clientlib = pytest.importorskip("pre_commit.clientlib")
    (hook,) = clientlib.load_manifest(str(MANIFEST))
    assert hook["id"] == "testfleet-check"
    assert hook["pass_filenames"] is True


def _run_entry(project: Path, *files: str) -> subprocess.CompletedProcess[str]:
    entry = shlex.split(str(_hook()["entry"]))
    exe = shutil.which(entry[0], path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert exe, "the testfleet console script must be installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env["NO_COLOR"] = "1"
    return subprocess.run([exe, *entry[1:], *files], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dest = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    bad = dest / "tests" / "unit" / "test_rollout_buffer.py"
    text = bad.read_text(encoding="utf-8")
    bad.write_text(text.replace('suite="stage-b-cpu"', 'suite="stage-b-cpuu"'), encoding="utf-8")
    return dest


def test_hook_fails_on_the_broken_file_it_is_given(project: Path) -> None:
    proc = _run_entry(project, "tests/unit/test_rollout_buffer.py", "README.md")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "tests/unit/test_rollout_buffer.py" in out and "stage-b-cpuu" in out
    assert "Traceback" not in out


def test_hook_passes_on_a_good_file_while_another_is_broken(project: Path) -> None:
    proc = _run_entry(project, "tests/unit/test_weight_sync.py")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "test_rollout_buffer.py" not in out
    # without file arguments the whole tree is judged, and the broken file fails it
    whole = _run_entry(project)
    assert whole.returncode == 1 and "test_rollout_buffer.py" in whole.stdout


@pytest.mark.timeout(900)  # pre-commit builds the hook's environment: a pip install from source
def test_pre_commit_try_repo_runs_the_hook_on_a_scratch_repository(project: Path,
                                                                  tmp_path: Path) -> None:
    """The whole way a user meets the hook: pre-commit builds its own environment from this
    repository (``language: python``, so the package must install cleanly from source)
    and passes the staged file names; a broken registration fails the commit, a good
    file passes."""
    pytest.importorskip("pre_commit")
    if not (REPO / ".git").exists():
        pytest.skip("pre-commit try-repo needs this checkout to be a git repository")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), NO_COLOR="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True, timeout=60)

    def try_repo(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "testfleet-check",
             "--color", "never", "--files", *files],
            cwd=project, env=env, capture_output=True, text=True, timeout=900,
            stdin=subprocess.DEVNULL)

    broken = try_repo("tests/unit/test_rollout_buffer.py")
    out = broken.stdout + broken.stderr
    assert broken.returncode == 1, out
    assert "testfleet check" in out and "Failed" in out
    assert "stage-b-cpuu" in out and "unknown-suite" in out
    assert "Traceback" not in out
    good = try_repo("tests/unit/test_weight_sync.py")
    out = good.stdout + good.stderr
    assert good.returncode == 0, out
    assert "Passed" in out and "stage-b-cpuu" not in out


def test_a_changed_configuration_runs_the_whole_check(tmp_path: Path) -> None:
    """Renaming a stage in the configuration alone breaks every file registered in it: the
    hook, given only ``pyproject.toml``, must judge the whole tree as a full check does
    (before, it passed with 'no test registers' warnings on the renamed stage)."""
    dest = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".testfleet", "__pycache__"))
    config = dest / "pyproject.toml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "[tool.testfleet.stages.stage-b-cpu]", "[tool.testfleet.stages.stage-b-cpu-renamed]"),
        encoding="utf-8")
    whole = _run_entry(dest)
    hook = _run_entry(dest, "pyproject.toml")
    assert whole.returncode == 1, whole.stdout + whole.stderr
    assert hook.returncode == 1, hook.stdout + hook.stderr
    assert "stage-b-cpu" in hook.stdout and "unknown-suite" in hook.stdout
    assert hook.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1]


def test_a_pyproject_that_is_not_the_configuration_keeps_the_hook_narrow(tmp_path: Path) -> None:
    """With the configuration in testfleet.toml, a changed pyproject.toml says nothing about
    the tests: the hook stays as narrow (and fast) as for any other non-test file."""
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text('roots = ["tests"]\n\n[stages.a]\nbackend = "cpu"\n',
                                         encoding="utf-8")
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n', encoding="utf-8")
    good = 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="a")\n'
    (root / "tests" / "test_ok.py").write_text(good, encoding="utf-8")
    (root / "tests" / "test_bad.py").write_text(good.replace('"a"', '"b"'), encoding="utf-8")
    narrow = _run_entry(root, "pyproject.toml")
    assert narrow.returncode == 0, narrow.stdout + narrow.stderr
    assert "test_bad.py" not in narrow.stdout
    assert _run_entry(root, "testfleet.toml").returncode == 1
