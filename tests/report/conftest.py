"""Fixtures for report tests: a git repository with dated commits, a small config."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest


def _git_env(date: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
                "GIT_CONFIG_NOSYSTEM": "1", "HOME": os.environ.get("HOME", "/tmp")})
    if date:
        env["GIT_AUTHOR_DATE"] = date
        env["GIT_COMMITTER_DATE"] = date
    return env


@pytest.fixture
def git_repo(tmp_path: Path) -> Callable[..., Path]:
    """``commit(files: dict[path, text], date)`` writes files and commits them at ``date``."""
    if shutil.which("git") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("git is not installed; .ci/run must install it")
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True, env=_git_env(None))

    def commit(files: dict[str, str], date: str, message: str = "change") -> Path:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        env = _git_env(date)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "-m", message], cwd=root, check=True, env=env)
        return root

    commit.root = root  # type: ignore[attr-defined]
    return commit
