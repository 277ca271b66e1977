"""Session mode (#15, ``batch = true``): several pytest files in one pytest process, with the
runner's guarantees per session: per-file verdicts and testcases, per-file durations and
record directories, timeouts with a process-tree kill, retries of the failed files only,
NOT RUN for what never ran."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from testfleet.config import validate_config
from testfleet.errors import ConfigError
from testfleet.runner.loop import execute
from testfleet.runner.model import JobSpec, Outcome, RunItem, StageSettings
from testfleet.runner.reporting import NullReporter
from testfleet.runner.session import next_group, plan_groups, session_verdicts
from testfleet.runner.settings import stage_settings
from testfleet.runner.testcases import parse_log

PID = "import os\ndef test_pid():\n    open(os.environ['PIDS'], 'a').write(str(os.getpid()) + '\\n')\n"


def batched(spec: JobSpec, **limits: object) -> JobSpec:
    return dataclasses.replace(spec, settings=dataclasses.replace(spec.settings, batch=True,
                                                                  **limits))


# -- grouping (pure) ----------------------------------------------------------------------


def _settings(**kw: object) -> StageSettings:
    return StageSettings("s", "cpu", "pytest", 5.0, 1.0, 1.0, batch=True, **kw)  # type: ignore[arg-type]


def test_groups_follow_plan_order_and_size_limits() -> None:
    items = [RunItem(f"t{i}.py", 10.0) for i in range(7)]
    assert plan_groups(items, _settings()) == [[0, 1, 2, 3, 4, 5, 6]]
    assert plan_groups(items, _settings(batch_max_files=3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert plan_groups(items, _settings(batch_max_seconds=25)) == [[0, 1], [2, 3], [4, 5], [6]]
    big = [RunItem("a.py", 100.0), RunItem("b.py", 1.0), RunItem("c.py", 1.0)]
    assert plan_groups(big, _settings(batch_max_seconds=10)) == [[0], [1, 2]]


def test_python_files_and_repeats_cut_a_session() -> None:
    items = [RunItem("a.py", 1), RunItem("b.py", 1), RunItem("s.py", 1, command="python"),
             RunItem("c.py", 1), RunItem("c.py", 1), RunItem("d.py", 1)]
    assert plan_groups(items, _settings()) == [[0, 1], [2], [3], [4, 5]]
    assert next_group([3, 4, 5], items, _settings()) == [3]
    off = dataclasses.replace(_settings(), batch=False)
    assert plan_groups(items[:2], off) == [[0], [1]]


# -- verdicts from the log (pure) ---------------------------------------------------------

FILES = ["tests/a.py", "tests/b.py", "tests/c.py"]


def _log(*lines: str) -> str:
    return "\n".join(lines) + "\n"


START = '{"event": "start", "rootdir": "/r"}'
COLLECTED = '{"event": "collected", "count": 4, "files": {"tests/a.py": 2, "tests/b.py": 1, "tests/c.py": 1}}'


def _case(nodeid: str, outcome: str = "passed", phase: str = "") -> str:
    return json.dumps({"event": "case", "nodeid": nodeid, "outcome": outcome, "duration": 0.1,
                       "message": "boom", "phase": phase})


def _file(name: str, t: float) -> str:
    return json.dumps({"event": "file", "file": name, "t": t})


def _verdicts(text: str, outcome: Outcome, reason: str = "", end: float = 110.0):
    return session_verdicts(FILES, parse_log(text), lambda p: p if p in FILES else None,
                            outcome, reason, 100.0, end)


def test_complete_session_gives_each_file_its_tests_and_its_time() -> None:
    text = _log(START, COLLECTED, _file("tests/a.py", 102), _case("tests/a.py::t1"),
                _case("tests/a.py::t2", "failed", "call"), _file("tests/b.py", 105),
                _case("tests/b.py::t"), _file("tests/c.py", 106), _case("tests/c.py::t"),
                '{"event": "finish", "exitstatus": 1}')
    a, b, c = _verdicts(text, Outcome.FAILED, "exit status 1")
    assert (a.outcome, b.outcome, c.outcome) == (Outcome.FAILED, Outcome.PASSED, Outcome.PASSED)
    assert a.reason == "1 of 2 test(s) failed, first t2" and not a.from_session
    assert [x.nodeid for x in a.cases] == ["tests/a.py::t1", "tests/a.py::t2"]
    # 2 s of start-up shared by three files; spans up to the next file's start
    assert (a.duration, b.duration, c.duration) == pytest.approx((3 + 2 / 3, 1 + 2 / 3, 4 + 2 / 3))
    assert sum(v.duration for v in (a, b, c)) == pytest.approx(10.0)


def test_timeout_charges_the_running_file_and_never_runs_the_rest() -> None:
    text = _log(START, COLLECTED, _file("tests/a.py", 101), _case("tests/a.py::t1"),
                _case("tests/a.py::t2"), _file("tests/b.py", 103))
    a, b, c = _verdicts(text, Outcome.TIMEOUT, "timed out after 15s")
    assert a.outcome is Outcome.PASSED
    assert b.outcome is Outcome.TIMEOUT and b.from_session
    assert b.reason == "timed out after 15s while this file ran; 0 of 1 test(s) reported"
    assert c.outcome is None and "before this file started" in c.reason and c.duration == 0


def test_exit_zero_with_tests_missing_is_a_failure_of_the_running_file() -> None:
    text = _log(START, COLLECTED, _file("tests/a.py", 101), _case("tests/a.py::t1"))
    a, b, c = _verdicts(text, Outcome.PASSED, "exit status 0")
    assert a.outcome is Outcome.FAILED and "collected 2 test(s) from this file but reported 1" in a.reason
    assert b.outcome is None and c.outcome is None


def test_collection_error_and_empty_file_are_failures_others_still_count() -> None:
    collected = '{"event": "collected", "count": 1, "files": {"tests/c.py": 1}}'
    text = _log(START, _case("tests/a.py", "error", "collect"), collected,
                _file("tests/c.py", 101), _case("tests/c.py::t"),
                '{"event": "finish", "exitstatus": 1}')
    a, b, c = _verdicts(text, Outcome.FAILED, "exit status 1")
    assert a.outcome is Outcome.FAILED and a.reason == "collection error: boom"
    assert b.outcome is Outcome.FAILED and b.reason == "pytest collected no tests from this file"
    assert c.outcome is Outcome.PASSED


def test_session_dying_before_collection_fails_every_file() -> None:
    verdicts = _verdicts(_log(START), Outcome.FAILED, "killed by SIGSEGV")
    assert {v.outcome for v in verdicts} == {Outcome.FAILED}
    assert all("before its tests started (killed by SIGSEGV)" in v.reason for v in verdicts)
    nothing = _verdicts("", Outcome.FAILED, "exit status 4")
    assert all(v.outcome is Outcome.FAILED for v in nothing)


def test_a_session_that_ran_nothing_fails_every_file_so_the_job_moves_on() -> None:
    text = _log(START, COLLECTED, '{"event": "finish", "exitstatus": 2}')
    verdicts = _verdicts(text, Outcome.FAILED, "exit status 2")
    assert [v.outcome for v in verdicts] == [Outcome.FAILED] * 3
    assert "ran none of its files (exit status 2)" in verdicts[0].reason


def test_a_failed_session_whose_files_all_passed_is_never_green() -> None:
    text = _log(START, COLLECTED, *[line for f in FILES for line in
                                    (_file(f, 101), _case(f + "::t1"), _case(f + "::t2"))])
    one_each = text.replace('"tests/a.py": 2', '"tests/a.py": 2').replace(
        '"tests/b.py": 1', '"tests/b.py": 2').replace('"tests/c.py": 1', '"tests/c.py": 2')
    verdicts = _verdicts(one_each, Outcome.FAILED, "exit status 3")  # no finish event either
    assert [v.outcome for v in verdicts] == [Outcome.PASSED, Outcome.PASSED, Outcome.FAILED]
    assert "session failed after this file's tests (exit status 3)" in verdicts[2].reason


# -- real sessions ------------------------------------------------------------------------


def test_ten_files_run_in_one_process_with_per_file_results(make_spec, tmp_path: Path) -> None:
    files = {f"test_{i}.py": PID for i in range(10)}
    files["test_3.py"] = PID + "def test_bad():\n    assert 1 == 2\n"
    files["test_6.py"] = "import no_such_module_here\n" + PID
    spec = batched(make_spec(files, command="pytest", env={"PIDS": str(tmp_path / "pids")}))
    job = execute(spec, reporter=NullReporter())
    outcomes = {r.item.file: r.outcome for r in job.results}
    assert outcomes.pop("test_3.py") is Outcome.FAILED
    assert outcomes.pop("test_6.py") is Outcome.FAILED
    assert set(outcomes.values()) == {Outcome.PASSED}
    pids = (tmp_path / "pids").read_text().split()
    assert len(pids) == 9 and len(set(pids)) == 1  # nine files' tests, one process
    by = {r.item.file: r for r in job.results}
    assert [c.name for c in by["test_3.py"].cases or []] == ["test_pid", "test_bad"]
    assert "collection error" in by["test_6.py"].message
    assert all(r.duration > 0 for r in job.results if r.item.file != "test_6.py")
    assert sum(r.duration for r in job.results) <= job.duration
    assert all(len(r.attempts) == 1 for r in job.results)
    assert job.exit_code == 1


def test_each_file_writes_metrics_into_its_own_record_dir(make_spec) -> None:
    body = ("import os, json\nfrom testfleet import metrics\n"
            "def test_m():\n    metrics.log('loss', 1.0, step=1)\n")
    spec = batched(make_spec({"test_a.py": body, "test_b.py": body}, command="pytest"))
    job = execute(spec, reporter=NullReporter())
    assert [r.outcome for r in job.results] == [Outcome.PASSED, Outcome.PASSED]
    dirs = [r.attempts[0].record_dir for r in job.results]
    assert dirs[0] != dirs[1]
    for d in dirs:
        assert d is not None and any(d.glob("*.jsonl")), d


HANG = """
import subprocess, sys, os
def test_hang():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(os.environ["CHILD"], "w").write(str(child.pid))
    import time; time.sleep(600)
"""


def test_timeout_kills_the_session_tree_and_the_rest_is_not_run(make_spec, tmp_path: Path) -> None:
    child = tmp_path / "child"
    spec = batched(make_spec({"test_a.py": "def test_ok(): pass\n", "test_b.py": HANG,
                              "test_c.py": "def test_ok(): pass\n"},
                             command="pytest", floor=5.0, env={"CHILD": str(child)}))
    job = execute(spec, reporter=NullReporter())
    a, b, c = job.results
    assert a.outcome is Outcome.PASSED
    assert b.outcome is Outcome.TIMEOUT and "timed out after 15s while this file ran" in b.message
    assert c.outcome is Outcome.NOT_RUN and "before this file started" in c.message
    pid = int(child.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


CRASH = "import os, signal\ndef test_crash():\n    os.kill(os.getpid(), signal.SIGKILL)\n"


@pytest.mark.parametrize("fast_fail", [True, False])
def test_a_crash_leaves_unstarted_files_not_run_or_runs_them_next(make_spec, fast_fail: bool) -> None:
    ok = "def test_ok(): pass\n"
    spec = batched(make_spec({"test_a.py": ok, "test_b.py": CRASH, "test_c.py": ok,
                              "test_d.py": ok}, command="pytest", fast_fail=fast_fail))
    job = execute(spec, reporter=NullReporter())
    a, b, c, d = job.results
    assert a.outcome is Outcome.PASSED
    assert b.outcome is Outcome.FAILED and "killed by SIGKILL" in b.message
    if fast_fail:
        assert (c.outcome, d.outcome) == (Outcome.NOT_RUN, Outcome.NOT_RUN)
        assert "killed by SIGKILL" in c.message and not c.attempts
    else:
        assert (c.outcome, d.outcome) == (Outcome.PASSED, Outcome.PASSED)
        assert c.attempts[0].record_dir != a.attempts[0].record_dir


FLAKY = """
import os
def test_flaky():
    marker = os.path.join(os.environ["MARKS"], "flaky")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise ConnectionResetError("Connection reset by peer")
"""
COUNT = ("import os\ndef test_count():\n"
         "    open(os.path.join(os.environ['MARKS'], 'count-' + __name__), 'a').write('x')\n")


def test_only_failed_files_are_retried_in_a_new_session(make_spec, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = batched(make_spec({"test_a.py": COUNT, "test_f.py": FLAKY + COUNT,
                              "test_z.py": COUNT + "def test_bad():\n    assert False\n"},
                             command="pytest", max_attempts=3, fast_fail=False,
                             env={"MARKS": str(marks)}))
    job = execute(spec, reporter=NullReporter())
    a, f, z = job.results
    assert a.outcome is Outcome.PASSED and len(a.attempts) == 1
    assert f.outcome is Outcome.FLAKY and [x.outcome for x in f.attempts] == [Outcome.FAILED,
                                                                             Outcome.PASSED]
    assert "retriable pattern matched: Connection (refused|reset)" in f.attempts[0].retry_reason
    assert z.outcome is Outcome.FAILED and len(z.attempts) == 1  # no retriable pattern
    assert (marks / "count-test_a").read_text() == "x"  # not run again with the retry
    assert (marks / "count-test_f").read_text() == "xx"
    assert f.attempts[1].record_dir is not None and f.attempts[1].record_dir.name == "attempt-2"


# -- config and the command line ----------------------------------------------------------


def test_config_validates_batch_keys() -> None:
    with pytest.raises(ConfigError) as info:
        validate_config({"stages": {"s": {"backend": "cpu", "command": "python", "batch": True}}})
    [f] = info.value.findings
    assert f.key == "stages.s" and "needs command = \"pytest\"" in f.message
    with pytest.raises(ConfigError) as info:
        validate_config({"stages": {"s": {"backend": "cpu", "batch_max_files": 3}}})
    assert "set 'batch = true' too" in info.value.findings[0].message
    with pytest.raises(ConfigError) as info:
        validate_config({"stages": {"s": {"backend": "cpu", "batch": True, "batch_max_files": 0}}})
    assert info.value.findings[0].key == "stages.s.batch_max_files"
    for args in (["-n", "2"], ["-nauto"], ["-x", "--numprocesses=4"]):
        with pytest.raises(ConfigError) as info:
            validate_config({"stages": {"s": {"backend": "cpu", "batch": True, "extra_args": args}}})
        assert info.value.findings[0].key == "stages.s" and "pytest-xdist" in info.value.findings[0].message
    with pytest.raises(ConfigError) as info:  # a variant's arguments count too
        validate_config({"stages": {"s": {"backend": "cpu", "batch": True, "variants": {
            "big": {"runs_on": ["big"], "extra_args": ["-n", "8"]}}}}})
    assert "pytest-xdist" in info.value.findings[0].message
    validate_config({"stages": {"s": {"backend": "cpu", "extra_args": ["-n", "2"]}}})  # alone: fine
    config = validate_config({"stages": {"s": {"backend": "cpu", "command": "auto", "batch": True,
                                               "batch_max_seconds": 60}}})
    settings = stage_settings(config, "s")
    assert settings.batch and settings.batch_max_seconds == 60 and settings.batch_max_files is None


BATCH_TOML = """\
roots = ["tests"]

[[implicit]]
path = "tests"
backend = "cpu"
suite = "unit"
est_time = 1

[stages.unit]
backend = "cpu"
command = "pytest"
batch = true
shards = 1
"""


def test_run_command_records_junit_testcases_and_per_file_history(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(BATCH_TOML)
    (root / "tests" / "test_a.py").write_text("import time\ndef test_a():\n    time.sleep(0.3)\n")
    (root / "tests" / "test_b.py").write_text(textwrap.dedent("""
        def test_b1(): pass
        def test_b2(): assert 0, "b2 broke"
    """))
    junit = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    proc = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                           "--stage", "unit", "--junit", str(junit), "--display", "plain"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "pytest session of 2 files" in proc.stdout
    assert "[2/2] tests/test_b.py: FAILED" in proc.stdout
    names = [(c.get("name"), [x.tag for x in c if x.tag in ("failure", "error")])
             for c in ET.parse(junit).iter("testcase")]
    assert names == [("test_a", []), ("test_b1", []), ("test_b2", ["failure"])]
    db = sqlite3.connect(root / ".testfleet" / "history.db")
    rows = db.execute("select file, outcome, duration from executions where final = 1 "
                      "order by file").fetchall()
    cases = db.execute("select name, outcome from testcases order by id").fetchall()
    db.close()
    assert [(f, o) for f, o, _ in rows] == [("tests/test_a.py", "PASSED"),
                                            ("tests/test_b.py", "FAILED")]
    assert rows[0][2] >= 0.3  # the file's own time, measured inside the session
    assert cases == [("test_a", "PASSED"), ("test_b1", "PASSED"), ("test_b2", "FAILED")]


def test_dry_run_shows_the_sessions(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text(BATCH_TOML.replace("batch = true",
                                                            "batch = true\nbatch_max_files = 2"))
    for name in ("a", "b", "c"):
        (root / "tests" / f"test_{name}.py").write_text("def test_x(): pass\n")
    proc = subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), "run",
                           "--stage", "unit", "--dry-run"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "tests/test_" in line]
    assert ["session 1" in rows[0], "session 1" in rows[1], "alone" in rows[2]] == [True] * 3


def test_a_session_records_its_files_in_one_history_write(make_spec, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from testfleet.config import load_project
    from testfleet.runner.hooks import RunHooks
    from testfleet.store.core import Store

    spec = batched(make_spec({f"test_{n}.py": "def test_x(): pass\ndef test_y(): pass\n"
                              for n in "abc"}, command="pytest"))
    (spec.root / "testfleet.toml").write_text(
        'roots = ["."]\n[stages.stage-x]\nbackend = "cpu"\ncommand = "pytest"\n')
    calls: list[tuple[str, int]] = []
    for name in ("record_executions", "record_testcases"):
        original = getattr(Store, name)

        def spy(self: Store, rows: object, *more: object, _name: str = name,
                _orig: object = original) -> None:
            calls.append((_name, len(rows)))  # type: ignore[arg-type]
            _orig(self, rows, *more)  # type: ignore[operator]

        monkeypatch.setattr(Store, name, spy)
    db = tmp_path / "h.db"
    hooks = RunHooks(load_project(spec.root), warn=NullReporter().warning, database=str(db))
    job = execute(spec, reporter=NullReporter(), hooks=hooks)
    hooks.close()
    assert [r.outcome for r in job.results] == [Outcome.PASSED] * 3
    assert calls == [("record_executions", 3), ("record_testcases", 6)]
    rows = sqlite3.connect(db).execute("select file, outcome, final from executions "
                                       "order by file").fetchall()
    assert rows == [(f"test_{n}.py", "PASSED", 1) for n in "abc"]
