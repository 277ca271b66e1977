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
