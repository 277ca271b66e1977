"""The pytest plugin, driven through pytest itself (pytester, in subprocesses so that each
run loads the plugin the way a user's pytest does)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

CONFIG = """
[tool.testfleet]
roots = ["tests"]
pattern = "test_*.py"

[tool.testfleet.stages.stage-cpu]
backend = "cpu"
command = "pytest"
shards = 2

[tool.testfleet.stages.stage-other]
backend = "cpu"
command = "pytest"
"""

FILES = {
    "tests/test_a.py": 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=30, suite="stage-cpu")\n'
                       "def test_a1():\n    pass\ndef test_a2():\n    pass\n",
    "tests/test_b.py": 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=20, suite="stage-cpu")\n'
                       "def test_b():\n    assert 1 + 1 == 3\n",
    "tests/test_c.py": 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=10, suite="stage-cpu")\n'
                       "def test_c():\n    pass\n",
    "tests/test_d.py": 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="stage-cpu")\n'
                       "def test_d():\n    pass\n",
    "tests/test_off.py": 'from testfleet import register_cpu_ci\n'
                         'register_cpu_ci(est_time=5, suite="stage-cpu", disabled="flaky NCCL init, see #12")\n'
                         "def test_off():\n    pass\n",
    "tests/test_elsewhere.py": 'from testfleet import register_cpu_ci\n'
                               'register_cpu_ci(est_time=5, suite="stage-other")\n'
                               "raise RuntimeError('this file must never be imported for stage-cpu')\n",
}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=CONFIG)
    for rel, text in FILES.items():
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return pytester


def _plan_files(root: Path, stage: str) -> dict[int, set[str]]:
    proc = subprocess.run([sys.executable, "-m", "testfleet", "plan", "--stage", stage,
                           "--format", "json"], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    return {job["shard"]: {t["file"] for t in job["tests"]} for job in plan["jobs"]
            if job["stage"] == stage}


def _ran_files(result: pytest.RunResult) -> set[str]:
    return {line.split("::")[0] for line in result.outlines
            if line.startswith("tests/") and "::" in line}


def test_shards_equal_testfleet_plan(project: pytest.Pytester) -> None:
    planned = _plan_files(project.path, "stage-cpu")
    assert len(planned) == 2
    seen: set[str] = set()
    for shard, files in planned.items():
        result = project.runpytest_subprocess("--testfleet-stage", "stage-cpu", "--testfleet-shard",
                                              f"{shard}/2", "--testfleet-no-history", "-v")
        ran = _ran_files(result) - {"tests/test_off.py"}
        assert ran == files, result.stdout.str()
        seen |= ran
        assert "must never be imported" not in result.stdout.str()
    assert seen == {"tests/test_a.py", "tests/test_b.py", "tests/test_c.py", "tests/test_d.py"}


def test_disabled_registration_is_a_skip_with_its_reason(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--testfleet-stage", "stage-cpu", "--testfleet-no-history",
                                          "-rs")
    out = result.stdout.str()
    assert "testfleet: disabled: flaky NCCL init, see #12" in out
    result.assert_outcomes(passed=4, failed=1, skipped=1)


def test_plain_pytest_skips_a_file_disabled_everywhere(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-rs", "tests/test_off.py", "tests/test_c.py")
    assert "testfleet: disabled: flaky NCCL init, see #12" in result.stdout.str()
    result.assert_outcomes(passed=1, skipped=1)


def test_explicit_p_option_without_autoload(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    without = project.runpytest_subprocess("--testfleet-stage", "stage-cpu")
    assert without.ret == pytest.ExitCode.USAGE_ERROR  # option unknown: plugin not loaded
    with_p = project.runpytest_subprocess("-p", "testfleet", "--testfleet-stage", "stage-cpu",
                                          "--testfleet-no-history")
    with_p.assert_outcomes(passed=4, failed=1, skipped=1)


def test_history_rows_are_written_like_testfleet_run(project: pytest.Pytester) -> None:
    planned = _plan_files(project.path, "stage-cpu")[1]  # before history changes the split
    result = project.runpytest_subprocess("--testfleet-stage", "stage-cpu", "--testfleet-shard", "1/2")
    assert "recorded" in result.stdout.str()
    db = project.path / ".testfleet" / "history.db"
    assert db.is_file()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select file, stage, outcome from executions").fetchall()
    assert {r[0] for r in rows} == planned
    assert {r[1] for r in rows} == {"stage-cpu"}
    expected = {f: ("FAILED" if f == "tests/test_b.py" else "PASSED") for f in planned}
    assert {r[0]: r[2] for r in rows} == expected


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--testfleet-stage", "nosuch"], "nosuch"),
        (["--testfleet-stage", "stage-cpu", "--testfleet-shard", "3/2"], "--shard"),
        (["--testfleet-shard", "1/2"], "need --testfleet-stage"),
        (["--testfleet-plan", "plan.json"], "go together"),
        (["--testfleet-plan", "missing.json", "--testfleet-job", "x"], "missing.json"),
    ],
)
def test_bad_options_are_usage_errors(project: pytest.Pytester, args: list[str], fragment: str) -> None:
    result = project.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert fragment in text and "Traceback" not in text


def test_plan_job_selection(project: pytest.Pytester) -> None:
    proc = subprocess.run([sys.executable, "-m", "testfleet", "plan", "--stage", "stage-cpu",
                           "--format", "json", "--output", "plan.json"], cwd=project.path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((project.path / "plan.json").read_text(encoding="utf-8"))
    job = plan["jobs"][1]
    result = project.runpytest_subprocess("--testfleet-plan", "plan.json", "--testfleet-job", job["id"],
                                          "--testfleet-no-history", "-v")
    assert _ran_files(result) - {"tests/test_off.py"} == {t["file"] for t in job["tests"]}


def test_inert_without_a_testfleet_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert "testfleet: job" not in result.stdout.str()
    bad = pytester.runpytest_subprocess("--testfleet-stage", "s")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "no testfleet configuration" in bad.stdout.str() + bad.stderr.str()


def test_plain_pytest_survives_a_broken_testfleet_config(project: pytest.Pytester) -> None:
    (project.path / "pyproject.toml").write_text(CONFIG + "\nbogus_key = 1\n", encoding="utf-8")
    result = project.runpytest_subprocess("tests/test_c.py", "-W", "default")
    result.assert_outcomes(passed=1)
    assert "bogus_key" in result.stdout.str()
