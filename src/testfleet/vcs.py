"""Which commit the tree is at, for records and for the key of a frozen plan.

Its own module so that planning (``app/inprocess.py``) and the pytest plugin can ask
without importing the runner's process machinery (psutil is the runner extra's).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path


def current_commit(root: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """``GITHUB_SHA`` when set, else ``git rev-parse HEAD`` when git and a repo exist."""
    env = os.environ if environ is None else environ
    sha = env.get("GITHUB_SHA", "").strip()
    if sha:
        return sha
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value else None


def merge_head(root: Path) -> str | None:
    """The second parent of the checkout's HEAD: a pull request's head commit when HEAD is
    GitHub's merge commit (``refs/pull/<n>/merge``). None when HEAD has no second parent,
    or without git or a repository."""
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD^2^{commit}"],
                             cwd=root, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return value if out.returncode == 0 and value else None
