"""Truth first: a file's recorded outcome is its final verdict, gate included.

Real processes on a copy of the example project: the loss test runs three times
(cold start, baseline, drifted); with enforcement on, the drifted run's enforced gate
fails, and the file is FAILED in history, JUnit and the step summary, with the gate's
own verdict (FAIL, enforced) recorded beside it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

LOSS = "tests/unit/test_train_curve_loss.py"
GRAD = "tests/unit/test_train_curve_grad_norm.py"


def run(root: Path, file: str, tmp: Path, name: str, *, drift: float = 0.0,
        enforce: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TESTFLEET_", "GITHUB_"))}
    env.update({"FLEET_DRIFT": str(drift), "TESTFLEET_GATE_ENFORCE": "1" if enforce else "0",
                "GITHUB_STEP_SUMMARY": str(tmp / f"{name}.md"), "GITHUB_RUN_ID": name,
                "GITHUB_SHA": name.ljust(40, "0")})
    return subprocess.run(
        [sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run", "--file", file,
         "--cadence", "nightly", "--junit", str(tmp / f"{name}.xml"), "--output", "plain"],
        env=env, capture_output=True, text=True, timeout=300)


def rows(root: Path) -> list[tuple[str, str, str | None, str | None, str | None]]:
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    try:
        return db.execute("select file, outcome, gate_status, gate_mode, reason "
                          "from executions order by id").fetchall()
    finally:
        db.close()


def test_failed_enforced_gate_is_failed_everywhere(example_project: Path, tmp_path: Path) -> None:
    assert run(example_project, LOSS, tmp_path, "r1").returncode == 0  # cold start
    assert run(example_project, LOSS, tmp_path, "r2").returncode == 0  # baseline
    drifted = run(example_project, LOSS, tmp_path, "r3", drift=0.05)
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    got = rows(example_project)
    assert [(f, o, s, m) for f, o, s, m, _ in got] == [
        (LOSS, "PASSED", "INACTIVE", "enforced"),
        (LOSS, "PASSED", "PASS", "enforced"),
        (LOSS, "FAILED", "FAIL", "enforced"),
    ]
    assert (got[2][4] or "").startswith("metric gate failed: FAIL")
    junit = (tmp_path / "r3.xml").read_text()
    assert 'type="gate"' in junit and "<failure" in junit and 'failures="1"' in junit
    summary = (tmp_path / "r3.md").read_text()
    assert "FAILED" in summary and "metric gate failed" in summary


def test_shadow_gate_fail_keeps_the_pass_and_records_the_gate(example_project: Path,
                                                              tmp_path: Path) -> None:
    """grad_norm's gate is not enforce=True: FAIL is recorded beside a PASSED file, as shadow."""
    assert run(example_project, GRAD, tmp_path, "g1").returncode == 0
    drifted = run(example_project, GRAD, tmp_path, "g2", drift=0.05)
    assert drifted.returncode == 0, drifted.stdout + drifted.stderr
    assert [(o, s, m) for _, o, s, m, _ in rows(example_project)] == [
        ("PASSED", "INACTIVE", "shadow"), ("PASSED", "FAIL", "shadow")]


@pytest.mark.parametrize("enforce", [False])
def test_enforcement_off_is_shadow(example_project: Path, tmp_path: Path, enforce: bool) -> None:
    assert run(example_project, LOSS, tmp_path, "s1", enforce=enforce).returncode == 0
    assert run(example_project, LOSS, tmp_path, "s2", drift=0.05, enforce=enforce).returncode == 0
    assert [(o, s, m) for _, o, s, m, _ in rows(example_project)][-1] == ("PASSED", "FAIL", "shadow")


def test_file_without_gate_records_no_gate_verdict(example_project: Path, tmp_path: Path) -> None:
    assert run(example_project, "tests/unit/test_weight_sync.py", tmp_path, "w1").returncode == 0
    assert [(o, s, m) for _, o, s, m, _ in rows(example_project)] == [("PASSED", None, None)]
