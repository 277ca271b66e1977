"""Per-stage runner settings (#12): fixed per-file timeout, retries with a wait and a raised
timeout, extra arguments after the file, command templates and ``command = "auto"``."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from testfleet.commands import (
    command_argv,
    command_problem,
    file_style,
    is_pytest,
    resolve,
    with_pytest_plugin,
)
from testfleet.config import validate_config
from testfleet.errors import ConfigError, UsageError
from testfleet.planning.model import content_digest, load_plan
from testfleet.runner.loop import execute
from testfleet.runner.model import Outcome, RunItem, StageSettings
from testfleet.runner.reporting import NullReporter
from testfleet.runner.settings import run_options, stage_settings

# -- templates --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["pytest", "python", "auto", "python3 {file} -f",
                                     "{python} -m pytest -x {file}", "torchrun --nproc 8 {file}",
                                     "python3 run.py --path={file}"])
def test_usable_commands(command: str) -> None:
    assert command_problem(command) == ""


@pytest.mark.parametrize(("command", "fragment"), [
    ("bash", "never names the file"),
    ("", "empty command"),
    ("python3 '{file}", "cannot be split"),
    ("python3 {file} {stage}", "unknown placeholder(s) {stage}"),
    ("{file} --x", "the program itself"),
    ("python3 {file}\nrm -rf /", "control characters"),
])
def test_unusable_commands(command: str, fragment: str) -> None:
    assert fragment in command_problem(command)


def test_template_substitutes_the_file_as_one_argument_without_a_shell() -> None:
    hostile = "tests/a b;rm -rf ~ $(id).py"
    argv = command_argv("python3 {file} -f", hostile, ("--fast",))
    assert argv == ["python3", hostile, "-f", "--fast"]
    argv = command_argv("{python} run.py --path={file}", hostile, python="/py")
    assert argv == ["/py", "run.py", "--path=" + hostile]
    assert command_argv("python", "t.py", ("-f",), python="/py") == ["/py", "t.py", "-f"]
    assert command_argv("pytest", "t.py", python="/py") == ["/py", "-m", "pytest", "t.py"]
    with pytest.raises(ValueError):
        command_argv("auto", "t.py")


def test_is_pytest() -> None:
    assert is_pytest("pytest") and is_pytest("{python} -m pytest {file}")
    assert is_pytest("/usr/bin/pytest -x {file}")
    assert not is_pytest("python") and not is_pytest("python3 {file} -f")
    assert not is_pytest("auto")
    # templates run without a shell, so variables are set through env
    assert is_pytest("env CUDA_VISIBLE_DEVICES=0 pytest {file}")
    assert is_pytest("/usr/bin/env -u HOME X=1 {python} -m pytest {file} -x")
    assert not is_pytest("env X=1 python3 {file}") and not is_pytest("env")


def test_the_plugin_goes_right_after_pytest_behind_env() -> None:
    assert with_pytest_plugin(["env", "X=1", "pytest", "t.py"], "P") == \
        ["env", "X=1", "pytest", "-p", "P", "t.py"]
    assert with_pytest_plugin(["env", "-C", "sub", "py", "-m", "pytest", "t.py"], "P") == \
        ["env", "-C", "sub", "py", "-m", "pytest", "-p", "P", "t.py"]
    # env -i empties the environment, PYTHONPATH included: the plugin could not load
    assert with_pytest_plugin(["env", "-i", "PATH=/bin", "pytest", "t.py"], "P") is None
    assert with_pytest_plugin(["env", "X=1", "python3", "t.py"], "P") is None


def test_config_reports_a_bad_template_with_its_key() -> None:
    with pytest.raises(ConfigError) as info:
        validate_config({"stages": {"s": {"backend": "cpu", "command": "python3 {fil}"}}})
    [f] = info.value.findings
    assert f.key == "stages.s.command" and "{fil}" in f.message


# -- auto: script-style vs pytest-style, from the syntax tree ---------------------------

SCRIPT = 'import sys\n\ndef main():\n    assert 1\n\nif __name__ == "__main__":\n    main()\n'


@pytest.mark.parametrize(("source", "style"), [
    (SCRIPT, "python"),
    ("def test_a():\n    assert 1\n", "pytest"),
    ("async def test_a():\n    pass\n", "pytest"),
    ("class TestA:\n    def test_x(self):\n        pass\n", "pytest"),
    ("import unittest\nclass Foo(unittest.TestCase):\n    def test_x(self):\n        pass\n"
     "if __name__ == '__main__':\n    unittest.main()\n", "pytest"),
    ("from base import CustomTestCase\nclass Foo(CustomTestCase):\n    pass\n", "pytest"),
    ("from helpers import test_shared\n", "pytest"),
    ("class Helper:\n    def test_x(self):\n        pass\n" + SCRIPT, "python"),
    ("x = 1\n", "none"),
    ("class TestNothing:\n    x = 1\n", "none"),
    ("def test(:\n", None),
])
def test_file_style(source: str, style: str | None) -> None:
    assert file_style(source) == style


def test_resolve_auto() -> None:
    assert resolve("auto", "python") == "python"
    assert resolve("auto", "pytest") == "pytest"
    assert resolve("auto", "none") == "pytest"  # collected nothing: a loud failure
    assert resolve("auto", None) == "pytest"
    assert resolve("python3 {file} -f", "pytest") == "python3 {file} -f"


# -- settings ------------------------------------------------------------------------------


def test_fixed_file_timeout_and_raised_retry_timeout() -> None:
    s = StageSettings("s", "cpu", "python", 300, 3.0, 30)
    assert s.timeout_for(10) == 300 and s.timeout_for(1000) == 3000
    fixed = dataclasses.replace(s, file_timeout=1800, retry_timeout_factor=1.5)
    assert fixed.timeout_for(10) == 1800 and fixed.timeout_for(5000) == 1800
    assert fixed.timeout_for(10, attempt=2) == 2700
    assert dataclasses.replace(s, retry_timeout_factor=2).timeout_for(1000, attempt=3) == 6000


def test_stage_settings_override_runner_defaults() -> None:
    config = validate_config({
        "runner": {"retry_wait": 5, "retry_timeout_factor": 1.2, "max_attempts": 1},
        "stages": {
            "a": {"backend": "cpu", "file_timeout": 1800, "retry_wait": 60, "max_attempts": 2,
                  "retry_timeout_factor": 1.5, "extra_args": ["-f"],
                  "command": "python3 {file}"},
            "b": {"backend": "cpu"},
        }})
    a, b = stage_settings(config, "a"), stage_settings(config, "b")
    assert (a.file_timeout, a.retry_wait, a.retry_timeout_factor, a.extra_args, a.command) == (
        1800, 60, 1.5, ("-f",), "python3 {file}")
    assert (b.file_timeout, b.retry_wait, b.retry_timeout_factor, b.extra_args) == (
        None, 5, 1.2, ())
    assert run_options(config, stage="a").max_attempts == 2
    assert run_options(config, stage="b").max_attempts == 1
    assert run_options(config, stage="a", max_attempts=3).max_attempts == 3  # the flag wins


@pytest.mark.parametrize(("key", "value"), [("file_timeout", 0), ("max_attempts", 0),
                                            ("retry_wait", -1), ("retry_timeout_factor", 0.5),
                                            ("extra_args", ["a\x00b"])])
def test_bad_runner_settings_name_their_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config({"stages": {"s": {"backend": "cpu", key: value}}})
    assert info.value.findings[0].key == f"stages.s.{key}"


# -- execution -----------------------------------------------------------------------------

FLAKY = """
import os, sys
marker = sys.argv[0] + ".ran"
if not os.path.exists(marker):
    open(marker, "w").close()
    raise AssertionError("accuracy 0.71 below threshold 0.75")
"""


def test_retry_waits_and_gets_the_raised_timeout(make_spec) -> None:
    spec = make_spec({"test_flaky.py": FLAKY}, max_attempts=2, floor=5.0)
    spec = dataclasses.replace(spec, settings=dataclasses.replace(
        spec.settings, retry_wait=0.6, retry_timeout_factor=2.0))
    started = time.monotonic()
    job = execute(spec, reporter=NullReporter())
    [res] = job.results
    assert res.outcome is Outcome.FLAKY
    assert time.monotonic() - started >= 0.6
    assert "retrying after 0.6s" in res.attempts[0].retry_reason
    assert res.timeout == 5.0  # the first attempt's; the retry ran with 10 s


def test_without_a_wait_the_retry_follows_at_once(make_spec) -> None:
    spec = make_spec({"test_flaky.py": FLAKY}, max_attempts=2)
    job = execute(spec, reporter=NullReporter())
    assert job.results[0].outcome is Outcome.FLAKY
    assert "retrying after" not in job.results[0].attempts[0].retry_reason


def test_extra_args_and_template_reach_the_file(make_spec) -> None:
    body = "import sys\nassert sys.argv[1:] == ['-f', '--fast'], sys.argv\n"
    spec = make_spec({"test_args.py": body})
    settings = dataclasses.replace(spec.settings, command=f"{sys.executable} {{file}} -f",
                                   extra_args=("--fast",))
    job = execute(dataclasses.replace(spec, settings=settings), reporter=NullReporter())
    assert job.results[0].outcome is Outcome.PASSED, job.results[0].tail
    wrong = dataclasses.replace(settings, extra_args=())
    job = execute(dataclasses.replace(spec, settings=wrong), reporter=NullReporter())
    assert job.results[0].outcome is Outcome.FAILED


def test_per_file_command_wins_over_the_stage(make_spec) -> None:
    spec = make_spec({"test_script.py": SCRIPT}, command="pytest", floor=120.0)
    job = execute(spec, reporter=NullReporter())
    assert job.results[0].outcome is Outcome.FAILED  # pytest collects nothing: exit 5
    assert "collected no tests" in job.results[0].message
    items = tuple(RunItem(i.file, i.estimate, i.source, "python") for i in spec.items)
    job = execute(dataclasses.replace(spec, items=items), reporter=NullReporter())
    assert job.results[0].outcome is Outcome.PASSED


# -- planning and plan files -------------------------------------------------------------

AUTO_TOML = """\
roots = ["tests"]

[stages.mixed]
backend = "cpu"
command = "auto"
extra_args = []
"""


def _auto_project(tmp_path: Path) -> Any:
    from testfleet.config import load_project

    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(AUTO_TOML)
    (root / "tests" / "test_script.py").write_text(SCRIPT)
    (root / "tests" / "test_unit.py").write_text("def test_a():\n    assert 1\n")
    return load_project(root)


def _auto_plan(tmp_path: Path) -> Any:
    from testfleet.planning import make_plan
    from testfleet.planning.request import PlanRequest
    from testfleet.registry.model import Registration

    project = _auto_project(tmp_path)
    regs = [Registration("tests/test_script.py", "cpu", "mixed", 10),
            Registration("tests/test_unit.py", "cpu", "mixed", 5)]
    return project, make_plan(project, regs, PlanRequest())


def test_auto_stage_plans_a_command_per_file(tmp_path: Path) -> None:
    _project, plan = _auto_plan(tmp_path)
    [job] = plan.jobs
    assert job.command == "auto"
    assert {t.file: t.command for t in job.tests} == {
        "tests/test_script.py": "python", "tests/test_unit.py": "pytest"}
    doc = plan.to_json()
    assert doc["jobs"][0]["tests"][0]["command"] in ("python", "pytest")


def test_auto_plan_runs_each_file_with_its_command(tmp_path: Path) -> None:
    from testfleet.runner.jobs import build_spec, select_plan_job

    project, plan = _auto_plan(tmp_path)
    sel = select_plan_job(plan, plan.jobs[0].id)
    spec = build_spec(project, sel, run_options(project.config), records=tmp_path / "rec")
    job = execute(spec, reporter=NullReporter())
    assert [r.outcome for r in job.results] == [Outcome.PASSED, Outcome.PASSED], [
        r.tail for r in job.results]


def _tampered(tmp_path: Path, plan: Any, edit: Any) -> Path:
    doc = plan.to_json()
    edit(doc)
    doc["digest"] = content_digest(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda d: d["jobs"][0]["tests"][0].__setitem__("command", "python3 {file}\nrm -rf /"),
     "jobs[0].tests[0].command"),
    (lambda d: d["jobs"][0]["tests"][0].__setitem__("command", "auto"), "cannot be 'auto'"),
    (lambda d: d["jobs"][0]["tests"][0].pop("command"), "names each file's command"),
    (lambda d: d["jobs"][0].__setitem__("command", "bash"), "never names the file"),
])
def test_plan_loading_checks_commands(tmp_path: Path, edit: Any, fragment: str) -> None:
    _project, plan = _auto_plan(tmp_path)
    path = _tampered(tmp_path, plan, edit)
    with pytest.raises(UsageError) as info:
        load_plan(path)
    assert fragment in str(info.value)


def test_a_semicolon_in_a_plan_template_stays_an_argument(tmp_path: Path) -> None:
    """A plan's template is data: even a ';' reaches the program as a plain argument."""
    _project, plan = _auto_plan(tmp_path)
    path = _tampered(tmp_path, plan, lambda d: d["jobs"][0]["tests"][0].__setitem__(
        "command", "echo {file} ; touch pwned"))
    loaded = load_plan(path)
    cmd = loaded.jobs[0].tests[0].command
    assert command_argv(cmd, "t.py") == ["echo", "t.py", ";", "touch", "pwned"]


# -- check -------------------------------------------------------------------------------

CHECK_TOML = """\
roots = ["tests"]

[stages.unit]
backend = "cpu"

[stages.mixed]
backend = "cpu"
command = "auto"
"""


def test_check_flags_files_that_would_collect_nothing(tmp_path: Path) -> None:
    from testfleet.cli.check import run_check
    from testfleet.config import load_project

    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(CHECK_TOML)
    mark = 'from testfleet import register_cpu_ci\nregister_cpu_ci(est_time=5, suite="{}")\n'
    files = {
        "test_script_on_pytest.py": mark.format("unit") + SCRIPT,
        "test_ok_on_pytest.py": mark.format("unit") + "def test_a():\n    pass\n",
        "test_empty_on_auto.py": mark.format("mixed") + "x = 1\n",
        "test_script_on_auto.py": mark.format("mixed") + SCRIPT,
    }
    for name, body in files.items():
        (root / "tests" / name).write_text(textwrap.dedent(body))
    _registry, findings = run_check(load_project(root), use_cache=False)
    flagged = {f.file: f.message for f in findings if f.code == "no-tests-collected"}
    assert set(flagged) == {"tests/test_script_on_pytest.py", "tests/test_empty_on_auto.py"}
    assert "only an `if __name__" in flagged["tests/test_script_on_pytest.py"]
    assert "'auto'" in flagged["tests/test_empty_on_auto.py"]
    assert all(f.severity == "warning" for f in findings if f.code == "no-tests-collected")
