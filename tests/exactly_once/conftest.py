"""A project whose test files append their own name to ``ran.log`` when they run, under
``testfleet run`` (``python FILE``) and under pytest alike: what ran, and how often, is
read back from the log instead of trusted from testfleet's own account."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

CONFIG = """\
roots = ["tests"]

[stages.s]
backend = "cpu"
command = "python"
shards = {shards}
"""

BODY = """\
import os
from testfleet import register_cpu_ci
register_cpu_ci(est_time={est}, suite="s")


def test_logs():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "ran.log"), "a", encoding="utf-8") as fh:
        fh.write("tests/{name}\\n")


if __name__ == "__main__":
    test_logs()
"""

#: Literals far from what the files measure (milliseconds): once a shard has recorded its
#: files, a re-plan from history splits the stage differently.
ESTIMATES = (60, 10, 45, 25, 5, 35, 15, 50, 20, 30)


@pytest.fixture
def log_project(tmp_path: Path) -> Callable[..., Path]:
    """``make(files=N, shards=K)``: a git repository with N logging test files on stage
    ``s`` split into K shards."""

    def make(files: int = 7, shards: int = 3, name: str = "proj") -> Path:
        root = tmp_path / name
        (root / "tests").mkdir(parents=True)
        (root / "testfleet.toml").write_text(CONFIG.format(shards=shards), encoding="utf-8")
        for i in range(files):
            fname = f"test_f{i}.py"
            (root / "tests" / fname).write_text(
                BODY.format(est=ESTIMATES[i % len(ESTIMATES)], name=fname), encoding="utf-8")
        git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
        subprocess.run([*git, "init", "-q", str(root)], check=True)
        subprocess.run([*git, "-C", str(root), "add", "-A"], check=True)
        subprocess.run([*git, "-C", str(root), "commit", "-qm", "init"], check=True)
        return root

    return make
