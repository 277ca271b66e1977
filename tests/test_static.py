"""Static checks as tests, so CI fails on a lint or typing regression like on any other.

Both tools read their settings from pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``);
they run through ``sys.executable -m`` so the interpreter under test is the one checked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=240)


def test_ruff_is_clean() -> None:
    r = _run("ruff", "check", "--no-cache", "src", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean() -> None:
    # files, strictness and per-module exceptions come from [tool.mypy] in pyproject.toml
    r = _run("mypy")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout, r.stdout
