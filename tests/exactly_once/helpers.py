"""Running testfleet and pytest on a logging project, and reading back what ran."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "TESTFLEET_", "BUILDKITE", "PYTEST_"))}
    env.update(extra)
    return env


def ran(root: Path) -> Counter[str]:
    log = root / "ran.log"
    return Counter(log.read_text(encoding="utf-8").split()) if log.exists() else Counter()


def run_testfleet(root: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env())


def run_pytest(root: Path, *args: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=root, capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env())
