"""Issue #26, item 3: under pytest-xdist a file's outcome is one execution per session
(aggregated in the controller), a file that fails every time is broken and never
quarantined, and the plugin applies quarantine exactly as ``testfleet run`` does."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from .helpers import clean_env, run_pytest, run_testfleet

CONFIG = """\
roots = ["tests"]

[stages.s]
backend = "cpu"
command = "pytest"

[flaky]
quarantine = true
"""

HALF_FAILING = """\
from testfleet import register_cpu_ci
register_cpu_ci(est_time=5, suite="s")


def test_one():
    pass


def test_two():
    pass


def test_three():
    pass


def test_broken():
    assert False, "always fails"
"""

PASSING = 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="s")\n' \
          "def test_ok():\n    pass\n"


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG, encoding="utf-8")
    for name, text in files.items():
        (root / "tests" / name).write_text(text, encoding="utf-8")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-C", str(root)]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return root


def _rows(root: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(root / ".testfleet" / "history.db") as db:
        return db.execute("select file, outcome from executions order by id").fetchall()


def test_xdist_session_is_one_execution_and_always_failing_is_broken(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {"test_half.py": HALF_FAILING})
    for run in range(4):  # four CI runs of one commit, each a two-worker session
        res = run_pytest(root, "-n", "2", "--testfleet-stage", "s",
                         env=clean_env(GITHUB_RUN_ID=str(100 + run), GITHUB_SHA="c0ffee"))
        assert res.returncode == 1, res.stdout + res.stderr
        assert "3 passed" in res.stdout and "1 failed" in res.stdout
    assert _rows(root) == [("tests/test_half.py", "FAILED")] * 4
    flaky = json.loads(run_testfleet(root, "flaky", "--all", "--format", "json").stdout)
    [verdict] = flaky["files"]
    assert verdict["state"] == "broken" and not verdict["quarantined"]
    res = run_testfleet(root, "run", "--stage", "s", "--display", "plain")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "quarantined" not in res.stdout


def _seed_flaky(root: Path, file: str) -> None:
    """Six CI runs of one commit, alternately passing and failing: flaky evidence."""
    from testfleet.config import load_project
    from testfleet.store import open_store
    from testfleet.store.durations import Execution

    project = load_project(root, root / "testfleet.toml")
    with open_store(project, None) as store:
        store.record_executions([
            Execution(file=file, stage="s", backend="cpu", duration=1.0,
                      outcome="FAILED" if i % 2 else "PASSED", commit="abc", ci_run_id=str(i),
                      timestamp=1_700_000_000.0 + i) for i in range(6)])


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "xdist"])
def test_plugin_and_run_apply_quarantine_identically(tmp_path: Path, xdist: bool) -> None:
    root = _project(tmp_path / "p", {"test_q.py": HALF_FAILING, "test_ok.py": PASSING})
    _seed_flaky(root, "tests/test_q.py")
    workers = ["-n", "2"] if xdist else []
    run = run_testfleet(root, "run", "--stage", "s", "--display", "plain", "--continue-on-error")
    plugin = run_pytest(root, *workers, "--testfleet-stage", "s")
    assert run.returncode == 0, run.stdout + run.stderr
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr
    assert "quarantined, does not fail the job: tests/test_q.py failed" in plugin.stdout
    plain = run_pytest(root, *workers, "tests/test_q.py")  # no job: pytest's own verdict
    assert plain.returncode == 1
    # a failure that is not quarantined fails both, the same way
    (root / "tests" / "test_bad.py").write_text(HALF_FAILING, encoding="utf-8")
    run = run_testfleet(root, "run", "--stage", "s", "--display", "plain", "--continue-on-error")
    plugin = run_pytest(root, *workers, "--testfleet-stage", "s")
    assert (run.returncode, plugin.returncode) == (1, 1), run.stdout + plugin.stdout


def test_a_job_file_that_runs_no_test_fails_the_session(tmp_path: Path) -> None:
    """Never a silent green on a shard that had files planned: a job file pytest did not
    collect (run from elsewhere, or narrowed away) is NOT_RUN, and the session fails."""
    root = _project(tmp_path / "p", {"test_a.py": PASSING, "test_b.py": PASSING})
    res = run_pytest(root, "--testfleet-stage", "s", "tests/test_a.py",
                     "--testfleet-status-file", "st.json")
    assert res.returncode == 1, res.stdout
    assert "1 file(s) of job s-1-of-1 ran no test" in res.stdout
    status = json.loads((root / "st.json").read_text())
    assert status["complete"] is False
    assert {f["file"]: f["outcome"] for f in status["files"]} == {
        "tests/test_a.py": "PASSED", "tests/test_b.py": "NOT_RUN"}


def test_selecting_part_of_a_file_records_no_verdict(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {"test_half.py": HALF_FAILING})
    res = run_pytest(root, "--testfleet-stage", "s", "-k", "one")
    assert res.returncode == 0, res.stdout
    assert "nothing recorded in the history: -k selects some tests" in res.stdout
    assert not (root / ".testfleet" / "history.db").exists() or _rows(root) == []
