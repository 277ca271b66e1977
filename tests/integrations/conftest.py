"""Helpers for the CI-engine tests: recorded GitHub payloads and the linters the workflow
must pass (the in-process CLI and GitHub's reading of ``$GITHUB_OUTPUT`` are in
``tests/support.py``, shared with the planning and e2e tests)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import commit_tree, with_base_sha

EVENTS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "github_events"
CASES: dict[str, dict[str, Any]] = json.loads((EVENTS_DIR / "cases.json").read_text())
MI300X = "stage-c-4-gpu-mi300x"


def tool(name: str) -> str:
    """A linter the tests need; missing is a failure (the test extra installs it), never a skip."""
    path = shutil.which(name)
    assert path, f"{name} is not installed: pip install -e '.[test]'"
    return path


@pytest.fixture
def github_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], dict[str, Path]]:
    """Point the GITHUB_* variables at a recorded payload, as a runner would."""

    def use(case: str, project: Path | None = None) -> dict[str, Path]:
        """``project``: commit it and point the payload's base.sha at that commit, as
        GitHub does (a fork's trust settings are read from the base commit)."""
        meta = CASES[case]
        event_path = EVENTS_DIR / case
        if project is not None and meta["event_name"].startswith("pull_request"):
            event_path = with_base_sha(event_path, tmp_path / f"base-{case}",
                                       commit_tree(project))
        files = {"output": tmp_path / f"{case}.output", "summary": tmp_path / f"{case}.summary"}
        for p in files.values():
            p.write_text("")
        for key in list(os.environ):
            if key.startswith("GITHUB_"):
                monkeypatch.delenv(key)
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
        monkeypatch.setenv("GITHUB_EVENT_NAME", meta["event_name"])
        monkeypatch.setenv("GITHUB_EVENT_PATH", str(event_path))
        monkeypatch.setenv("GITHUB_OUTPUT", str(files["output"]))
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(files["summary"]))
        return files

    return use


@pytest.fixture
def trusted_fleet(example_project: Path) -> Path:
    """The example project with its ``trusted_only`` MI300X stage switched back on,
    so that authorization (not dormancy) decides what a fork PR gets."""
    pyproject = example_project / "pyproject.toml"
    text = pyproject.read_text()
    new = re.sub(r'(?m)^disabled = "MI300X[^\n]*\n', "", text)
    assert new != text
    pyproject.write_text(new)
    return example_project


def run_tool(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)
