"""Per-testcase results: the plugin's log in a real pytest child, and the rules on it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testfleet.runner.testcases import CaseResult, parse_log, read_log, unreported

FIVE_ONE_FAILING = """
import pytest

def test_a(): pass
def test_b(): pass
def test_c(): assert 1 == 2, "c is wrong"
@pytest.mark.parametrize("n", [1, 2])
def test_p(n): pass
"""


def child(tmp_path: Path, body: str) -> tuple[int, Path]:
    test = tmp_path / "test_x.py"
    test.write_text(textwrap.dedent(body))
    log = tmp_path / "log.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, "TESTFLEET_TESTCASES": str(log)}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "testfleet.runner.pytest_report",
                           "-p", "no:cacheprovider", "test_x.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, log


def test_five_tests_one_failing(tmp_path: Path) -> None:
    rc, log_file = child(tmp_path, FIVE_ONE_FAILING)
    log = read_log(log_file)
    assert rc == 1 and log.started and log.collected == 5 and log.exitstatus == 1
    assert [(c.name, c.outcome) for c in log.cases] == [
        ("test_a", "passed"), ("test_b", "passed"), ("test_c", "failed"),
        ("test_p[1]", "passed"), ("test_p[2]", "passed")]
    failing = log.cases[2]
    assert failing.phase == "call" and "c is wrong" in failing.message
    assert failing.nodeid == "test_x.py::test_c"


def test_os_exit_0_is_caught(tmp_path: Path) -> None:
    rc, log_file = child(tmp_path, """
        import os
        def test_quits():
            os._exit(0)
        """)
    log = read_log(log_file)
    assert rc == 0 and log.collected == 1 and log.reported == 0
    assert "collected 1 test(s) but reported 0" in unreported(log)


def test_setup_error_skip_xfail_and_collection_error(tmp_path: Path) -> None:
    rc, log_file = child(tmp_path, """
        import pytest
        @pytest.fixture
        def broken():
            raise RuntimeError("fixture boom")
        def test_err(broken): pass
        @pytest.mark.skip(reason="not today")
        def test_skip(): pass
        @pytest.mark.xfail(reason="known")
        def test_xf(): assert False
        """)
    outcomes = {c.name: (c.outcome, c.phase) for c in read_log(log_file).cases}
    assert outcomes == {"test_err": ("error", "setup"), "test_skip": ("skipped", ""),
                        "test_xf": ("xfailed", "")}
    rc, log_file = child(tmp_path, "import no_such_module_here\n")
    log = read_log(log_file)
    assert rc == 2 and log.collected == 0
    assert [(c.nodeid, c.outcome, c.phase) for c in log.cases] == [("test_x.py", "error", "collect")]
    assert "no_such_module_here" in log.cases[0].message


def test_without_the_variable_the_plugin_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_a(): pass\n")
    env = {k: v for k, v in os.environ.items() if k != "TESTFLEET_TESTCASES"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "testfleet.runner.pytest_report",
                           "-p", "no:cacheprovider", "-q", "test_x.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and list(tmp_path.glob("*.jsonl")) == []


@pytest.mark.parametrize(("text", "reason"), [
    ("", "never started"),
    ('{"event": "start"}\n', "before collection finished"),
    ('{"event": "start"}\n{"event": "collected", "count": 2}\n'
     '{"event": "case", "nodeid": "t.py::a", "outcome": "passed"}\n', "collected 2 test(s) but reported 1"),
    ('{"event": "start"}\n{"event": "collected", "count": 0}\n', "without finishing"),
    ('{"event": "start"}\n{"event": "collected", "count": 1}\n'
     '{"event": "case", "nodeid": "t.py::a", "outcome": "passed"}\n{"event": "finish", "exitstatus": 0}\n', ""),
])
def test_unreported_rules(text: str, reason: str) -> None:
    got = unreported(parse_log(text))
    assert (reason in got) if reason else got == ""


def test_malformed_lines_are_problems_not_exceptions() -> None:
    log = parse_log('garbage\n[1]\n{"event": "case", "nodeid": 3, "outcome": "passed"}\n'
                    '{"event": "collected", "count": true}\n{"event": "start"}\n')
    assert log.started and log.collected is None and log.cases == []
    assert len(log.problems) == 4


def test_name_drops_the_file_part() -> None:
    assert CaseResult("a/b.py::TestX::test_y[1]", "passed").name == "TestX::test_y[1]"
    assert CaseResult("a/b.py", "error").name == "a/b.py"
