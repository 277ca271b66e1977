"""Per-testcase results through `testfleet run` on a pytest stage: real processes, real history."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

FIVE_ONE_FAILING = """
import pytest
def test_a(): pass
def test_b(): pass
def test_c(): assert 1 == 2, "c is wrong"
@pytest.mark.parametrize("n", [1, 2])
def test_p(n): pass
"""
OS_EXIT = "import os\ndef test_ok(): pass\ndef test_quits():\n    os._exit(0)\n"
NO_IMPORT = "import no_such_module_anywhere\ndef test_never(): pass\n"


def run(cli_project, files: dict[str, str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    root, plan, jobs = cli_project(files, stage="s-pytest")
    junit = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    env.update({"GITHUB_RUN_ID": "4242", "GITHUB_SHA": "a" * 40})
    procs = [subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                             "--plan", str(plan), "--job", job, "--junit", str(junit.with_suffix(f".{i}.xml")),
                             "--continue-on-error"],
                            capture_output=True, text=True, timeout=300, env=env)
             for i, job in enumerate(jobs)]
    return procs[0], root, junit


def cases(path: Path) -> list[tuple[str, str, str, dict[str, str]]]:
    out = []
    for case in ET.parse(path).iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        out.append((case.get("name") or "", case.get("classname") or "",
                    kinds[0] if kinds else "passed", props))
    return out


def test_five_tests_one_failing_give_five_junit_testcases_and_history(cli_project, tmp_path: Path) -> None:
    proc, root, junit = run(cli_project, {"test_five.py": FIVE_ONE_FAILING}, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = cases(junit.with_suffix(".0.xml"))
    assert [(n, k) for n, _, k, _ in got] == [("test_a", "passed"), ("test_b", "passed"),
                                              ("test_c", "failure"), ("test_p[1]", "passed"),
                                              ("test_p[2]", "passed")]
    assert all(c == "tests.test_five" and p == {"file": "tests/test_five.py", "stage": "s-pytest"}
               for _, c, _, p in got)
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    rows = db.execute("select name, outcome, final, ci_run_id from testcases order by id").fetchall()
    execs = db.execute("select file, outcome, final from executions").fetchall()
    db.close()
    assert rows == [("test_a", "PASSED", 1, "4242"), ("test_b", "PASSED", 1, "4242"),
                    ("test_c", "FAILED", 1, "4242"), ("test_p[1]", "PASSED", 1, "4242"),
                    ("test_p[2]", "PASSED", 1, "4242")]
    assert execs == [("tests/test_five.py", "FAILED", 1)]  # durations stay per file


def test_os_exit_0_is_failed_not_passed(cli_project, tmp_path: Path) -> None:
    proc, root, junit = run(cli_project, {"test_exit.py": OS_EXIT}, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = cases(junit.with_suffix(".0.xml"))
    assert [(n, k) for n, _, k, _ in got] == [("test_ok", "passed"), ("tests/test_exit.py", "failure")]
    text = junit.with_suffix(".0.xml").read_text()
    assert "collected 2 test(s) but reported 1" in text
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    (outcome, reason), = db.execute("select outcome, reason from executions").fetchall()
    db.close()
    assert outcome == "FAILED" and "collected 2 test(s) but reported 1" in reason


def test_crash_before_collection_is_one_failing_testcase(cli_project, tmp_path: Path) -> None:
    proc, _, junit = run(cli_project, {"test_broken.py": NO_IMPORT}, tmp_path)
    assert proc.returncode == 1
    got = cases(junit.with_suffix(".0.xml"))
    assert len(got) == 1 and got[0][0] == "tests/test_broken.py" and got[0][2] == "error"
    assert "no_such_module_anywhere" in junit.with_suffix(".0.xml").read_text()
