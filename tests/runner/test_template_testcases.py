"""A stage whose ``command`` template runs pytest gets per-testcase results like the
``pytest`` shorthand (#14); a template that is not pytest keeps file-level results.
Real ``testfleet run`` processes, real history."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_testcase_run import FIVE_ONE_FAILING, OS_EXIT, cases

from testfleet.runner.executor import PLUGIN_SHIM, command_argv, reports_tests

CONFIG = """\
roots = ["tests"]

[[implicit]]
path = "tests"
backend = "cpu"
suite = "s-tpl"
est_time = 5

[stages.s-tpl]
backend = "cpu"
command = {command!r}
{env}
[runner]
max_attempts = 1
"""


def run(tmp_path: Path, command: str, files: dict[str, str], env: str = "",
        outer: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CONFIG.format(command=command, env=env))
    for name, body in files.items():
        (root / "tests" / name).write_text(body)
    junit = tmp_path / "junit.xml"
    child = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    child.update({"GITHUB_RUN_ID": "77", "GITHUB_SHA": "b" * 40, **(outer or {})})
    proc = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                           "--stage", "s-tpl", "--junit", str(junit), "--continue-on-error",
                           "--display", "plain"],
                          capture_output=True, text=True, timeout=300, env=child)
    return proc, root, junit


def history(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    try:
        tests = db.execute("select name, outcome from testcases order by id").fetchall()
        files = db.execute("select file, outcome, reason from executions").fetchall()
    finally:
        db.close()
    return tests, files


def test_pytest_template_with_extra_args_reports_each_test(tmp_path: Path) -> None:
    proc, root, junit = run(tmp_path, "{python} -m pytest {file} -q -p no:cacheprovider",
                            {"test_five.py": FIVE_ONE_FAILING})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [(n, k) for n, _, k, _ in cases(junit)] == [
        ("test_a", "passed"), ("test_b", "passed"), ("test_c", "failure"),
        ("test_p[1]", "passed"), ("test_p[2]", "passed")]
    tests, files = history(root)
    assert tests == [("test_a", "PASSED"), ("test_b", "PASSED"), ("test_c", "FAILED"),
                     ("test_p[1]", "PASSED"), ("test_p[2]", "PASSED")]
    assert [(f, o) for f, o, _ in files] == [("tests/test_five.py", "FAILED")]


def test_pytest_template_without_testfleet_importable_still_proves_every_test(tmp_path: Path) -> None:
    """The child cannot import testfleet (a broken package shadows it on PYTHONPATH; plugin
    autoload is off, as in many CI images), and the template stops at the first failure
    (-x): the plugin still loads, as its own module, so an ``os._exit(0)`` halfway is
    FAILED, not a pass."""
    fake = tmp_path / "shadow" / "testfleet"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not this testfleet')\n")
    env = f'env = {{ PYTHONPATH = "{fake.parent}", PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }}\n'
    proc, root, junit = run(tmp_path, "{python} -m pytest {file} -x", {"test_exit.py": OS_EXIT},
                            env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [(n, k) for n, _, k, _ in cases(junit)] == [("test_ok", "passed"),
                                                      ("tests/test_exit.py", "failure")]
    tests, files = history(root)
    assert tests == [("test_ok", "PASSED")]
    [(file, outcome, reason)] = files
    assert file == "tests/test_exit.py"
    assert outcome == "FAILED" and "collected 2 test(s) but reported 1" in reason


def test_pytest_behind_env_reports_each_test(tmp_path: Path) -> None:
    """Templates run without a shell, so a variable is set with ``env VAR=value``."""
    proc, root, _ = run(tmp_path, "env TESTFLEET_DEMO_FLAG=1 {python} -m pytest {file}",
                        {"test_five.py": FIVE_ONE_FAILING})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tests, files = history(root)
    assert [t for t, _ in tests] == ["test_a", "test_b", "test_c", "test_p[1]", "test_p[2]"]
    assert [(f, o) for f, o, _ in files] == [("tests/test_five.py", "FAILED")]


def test_pytest_xdist_reports_each_test_once(tmp_path: Path) -> None:
    """Under ``-n 2`` the workers run the tests and the controller receives every report
    again: each test is one testcase, and the collected count is the tests' (it was
    twice each, which doubled every pass and failure in the history)."""
    proc, root, junit = run(tmp_path, "{python} -m pytest {file} -n 2 -p no:cacheprovider",
                            {"test_five.py": FIVE_ONE_FAILING})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tests, files = history(root)
    assert sorted(tests) == [("test_a", "PASSED"), ("test_b", "PASSED"), ("test_c", "FAILED"),
                             ("test_p[1]", "PASSED"), ("test_p[2]", "PASSED")]
    assert sorted(n for n, _, _, _ in cases(junit)) == ["test_a", "test_b", "test_c",
                                                        "test_p[1]", "test_p[2]"]
    assert [(f, o) for f, o, _ in files] == [("tests/test_five.py", "FAILED")]
    log = next(root.rglob("*.testcases.jsonl")).read_text().splitlines()
    assert sum('"event": "collected"' in line for line in log) == 1
    assert '"count": 5' in next(line for line in log if '"event": "collected"' in line)


def test_a_run_started_inside_an_xdist_worker_still_reports(tmp_path: Path) -> None:
    """testfleet started by a test that runs in a pytest-xdist worker inherits
    PYTEST_XDIST_WORKER; its own pytest (no -n) is not a worker and must report every
    test (it reported none: the variable alone decided)."""
    proc, root, _ = run(tmp_path, "{python} -m pytest {file} -p no:cacheprovider",
                        {"test_five.py": FIVE_ONE_FAILING},
                        outer={"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tests, _ = history(root)
    assert sorted(tests) == [("test_a", "PASSED"), ("test_b", "PASSED"), ("test_c", "FAILED"),
                             ("test_p[1]", "PASSED"), ("test_p[2]", "PASSED")]


def test_a_template_that_is_not_pytest_keeps_file_level_results(tmp_path: Path) -> None:
    script = "import sys\nprint('checked 3 things')\nsys.exit(0)\n"
    proc, root, junit = run(tmp_path, "{python} {file} --fast", {"test_script.py": script})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(n, k) for n, _, k, _ in cases(junit)] == [("tests/test_script.py", "passed")]
    tests, files = history(root)
    assert tests == [] and [(f, o) for f, o, _ in files] == [("tests/test_script.py", "PASSED")]
    assert not list(root.rglob(f"{PLUGIN_SHIM}.py"))  # no plugin for a non-pytest child


@pytest.mark.parametrize(("command", "per_test", "plugin_at"), [
    ("pytest", True, 3),
    ("pytest {file} -x", True, 1),
    ("/usr/bin/py.test {file}", True, 1),
    ("python3 -m pytest {file} -k fast", True, 3),
    ("{python} -m pytest {file}", True, 3),
    ("env CUDA_VISIBLE_DEVICES=0 pytest {file}", True, 3),
    ("env -u HOME X=1 {python} -m pytest {file}", True, 7),
    ("env -i PATH=/bin pytest {file}", False, None),  # no PYTHONPATH: the plugin cannot load
    ("env X=1 python3 {file}", False, None),
    ("python", False, None),
    ("python3 {file} -m pytest", False, None),
    ("bash run.sh {file} pytest", False, None),
])
def test_which_commands_report_tests(command: str, per_test: bool, plugin_at: int | None) -> None:
    assert reports_tests(command) is per_test
    argv = command_argv(command, "tests/t.py")
    if plugin_at is None:
        assert "-p" not in argv
    else:
        assert argv[plugin_at] == "-p" and argv[plugin_at + 1].endswith("pytest_report")
