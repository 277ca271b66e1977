"""A scratch project whose files pass, flake, break and split, and a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

CONFIG = """\
roots = ["tests"]

[stages.s-py]
backend = "cpu"
command = "python"
timeout_floor = 60

[runner]
max_attempts = 2

[flaky]
min_runs = 3
threshold = 0.2
quarantine = true
restore_after = 2

[results]
github_repository = "octo/fleet"
"""

HEAD = "from testfleet import register_cpu_ci\nregister_cpu_ci(1, 's-py')\nimport os, sys\n"
FILES = {
    "test_ok.py": HEAD + "print('fine')\n",
    # fails on every first attempt with a retriable message, passes on the retry
    "test_flip.py": HEAD + textwrap.dedent("""\
        if os.environ["TESTFLEET_ATTEMPT"] == "1":
            print("Connection reset by peer")
            sys.exit(1)
        """),
    "test_broken.py": HEAD + "print('wrong answer')\nsys.exit(1)\n",
    # fails only in the runs named in SPLIT_RUNS (same commit as the runs it passes in)
    "test_split.py": HEAD + textwrap.dedent("""\
        if os.environ.get("GITHUB_RUN_ID") in os.environ.get("SPLIT_RUNS", "").split(","):
            print("wrong answer")
            sys.exit(1)
        """),
}


def cli(root: Path, *args: str, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_",
                                                                     "BUILDKITE"))}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=timeout, env=full)


@pytest.fixture
def fleet(tmp_path: Path) -> Callable[..., Path]:
    """``fleet(runs=N, split="102")``: the project after N real `testfleet run`s."""

    def build(runs: int = 4, split: str = "102", files: dict[str, str] | None = None) -> Path:
        root = tmp_path / "proj"
        (root / "tests").mkdir(parents=True)
        (root / "testfleet.toml").write_text(CONFIG)
        for name, body in (files or FILES).items():
            (root / "tests" / name).write_text(body)
        for i in range(runs):
            run_id = str(101 + i)
            proc = cli(root, "run", "--stage", "s-py", "--continue-on-error", "--display", "plain",
                       env={"GITHUB_RUN_ID": run_id, "GITHUB_SHA": "c" * 40, "SPLIT_RUNS": split})
            assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        return root

    return build


def as_json(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)
