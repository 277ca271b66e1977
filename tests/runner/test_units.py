"""Pure pieces of the runner: settings, capture, retry rules, JUnit, summaries, selection."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from testfleet.config import DEFAULT_FATAL, DEFAULT_RETRIABLE, validate_config
from testfleet.errors import UsageError
from testfleet.planning.jobci import JobCI
from testfleet.runner.capture import OutputCapture, compile_patterns
from testfleet.runner.executor import attempt_outcome, command_argv, record_slug
from testfleet.runner.jobs import make_run_id, parse_shard, select_stage_jobs
from testfleet.runner.junit import build_xml, write_junit
from testfleet.runner.live import LogReporter, gh_escape_property
from testfleet.runner.model import (
    Attempt,
    FileResult,
    JobResult,
    JobSpec,
    Outcome,
    RunItem,
    RunOptions,
    StageSettings,
)
from testfleet.runner.process import ProcessResult
from testfleet.runner.retry import decide
from testfleet.runner.settings import run_options, stage_settings
from testfleet.runner.summary import md_escape, step_summary_markdown

CONFIG = {
    "stages": {
        "a": {"backend": "cpu", "timeout_floor": 10, "grace_seconds": 2, "env": {"X": "1"}},
        "b": {"backend": "cpu", "command": "python"},
    },
    "runner": {"timeout_floor": 60, "timeout_factor": 4, "grace_seconds": 5, "max_attempts": 2},
}


def test_stage_overrides_win_over_runner_defaults() -> None:
    config = validate_config(CONFIG)
    a = stage_settings(config, "a")
    assert (a.timeout_floor, a.timeout_factor, a.grace_seconds, a.env) == (10, 4, 2, {"X": "1"})
    assert a.timeout_for(1) == 10 and a.timeout_for(5) == 20
    b = stage_settings(config, "b")
    assert (b.timeout_floor, b.command) == (60, "python")
    assert b.timeout_for(100) == 400
    assert stage_settings(config, "a", command="python", env={}).env == {}
    with pytest.raises(UsageError, match="unknown stage 'zz'; valid: a, b"):
        stage_settings(config, "zz")


def test_run_options_fast_fail_and_attempts() -> None:
    config = validate_config(CONFIG)
    assert run_options(config).max_attempts == 2
    assert run_options(config, max_attempts=5).max_attempts == 5
    assert run_options(config).fast_fail
    assert not run_options(config, continue_on_error=True).fast_fail
    assert not run_options(config, bypass_fastfail=True).fast_fail


def _capture(tail: int = 64) -> OutputCapture:
    return OutputCapture(compile_patterns(DEFAULT_RETRIABLE), compile_patterns(DEFAULT_FATAL), tail)


def test_capture_keeps_a_bounded_tail_and_remembers_early_matches() -> None:
    cap = _capture(tail=100)
    cap.feed(b"Traceback...\nModuleNotFoundError: No module named 'x'\n")
    for _ in range(1000):
        cap.feed(b"y" * 99 + b"\n")
    cap.feed(b"last line without newline")
    cap.close()
    assert cap.fatal == [r"\bModuleNotFoundError\b"]
    assert cap.tail.endswith("last line without newline")
    assert "earlier bytes of output not kept" in cap.tail
    assert len(cap.tail) < 200


def test_capture_matches_across_chunk_boundaries() -> None:
    cap = _capture()
    cap.feed(b"AssertionError: accur")
    cap.feed(b"acy 0.5 below 0.7\n")
    cap.close()
    assert cap.retriable and not cap.fatal


def test_capture_handles_invalid_utf8() -> None:
    cap = _capture()
    cap.feed(b"\xff\xfe Segmentation fault (core dumped)\n")
    cap.close()
    assert any("segmentation" in p for p in cap.fatal)
    assert "\ufffd" in cap.tail


@pytest.mark.parametrize("outcome, fatal, retriable, attempt, expect", [
    (Outcome.PASSED, [], [], 1, (False, "")),
    (Outcome.TIMEOUT, [], ["r"], 1, (False, "timeouts are not retried")),
    (Outcome.FAILED, ["ImportError"], ["r"], 1, (False, "fatal pattern matched: ImportError")),
    (Outcome.FAILED, [], [], 1, (False, "no retriable pattern matched")),
    (Outcome.FAILED, [], ["acc"], 1, (True, "retriable pattern matched: acc")),
    (Outcome.FAILED, [], ["acc"], 3, (False, "retriable (acc) but no attempts left (3/3)")),
    (Outcome.ERROR, [], ["acc"], 1, (False, "error is not retried")),
])
def test_retry_rules(outcome, fatal, retriable, attempt, expect) -> None:
    d = decide(outcome, fatal=fatal, retriable=retriable, attempt=attempt, max_attempts=3)
    assert (d.retry, d.reason) == expect


def test_default_patterns_classify_typical_failures() -> None:
    retriable = [re.compile(p) for p in DEFAULT_RETRIABLE]
    fatal = [re.compile(p) for p in DEFAULT_FATAL]
    assert any(p.search("AssertionError: accuracy 0.61 < 0.65") for p in retriable)
    assert any(p.search("RuntimeError: CUDA out of memory.") for p in fatal)
    assert any(p.search("TypeError: f() got an unexpected keyword") for p in fatal)
    assert not any(p.search("AssertionError: 1 != 2") for p in retriable)


@pytest.mark.parametrize("res, command, expect", [
    (ProcessResult(0, 1.0), "python", (Outcome.PASSED, "exit status 0")),
    (ProcessResult(1, 1.0), "python", (Outcome.FAILED, "exit status 1")),
    (ProcessResult(5, 1.0), "pytest", (Outcome.FAILED, "pytest collected no tests (exit status 5)")),
    (ProcessResult(5, 1.0), "python", (Outcome.FAILED, "exit status 5")),
    (ProcessResult(-11, 1.0), "python", (Outcome.FAILED, "killed by SIGSEGV")),
    (ProcessResult(-9, 1.0, timed_out=True), "python", (Outcome.TIMEOUT, "timed out after 3s")),
    (ProcessResult(-15, 1.0, interrupted=15), "python", (Outcome.INTERRUPTED, "runner received SIGTERM")),
    (ProcessResult(None, 0.0, error="cannot start"), "python", (Outcome.ERROR, "cannot start")),
])
def test_attempt_outcome(res, command, expect) -> None:
    assert attempt_outcome(res, command, 3.0) == expect


def test_command_argv_and_slug() -> None:
    assert command_argv("python", "t/x.py")[1:] == ["t/x.py"]
    assert command_argv("pytest", "t/x.py")[1:] == ["-m", "pytest", "-p", "testfleet.runner.pytest_report",
                                                    "t/x.py"]
    assert record_slug("tests/a b/test_x.py") == "tests__a_b__test_x"


def _job(tmp_path: Path) -> JobResult:
    settings = StageSettings("st", "cpu", "python", 1.0, 1.0, 1.0)
    items = tuple(RunItem(f"tests/t{i}|<x>.py", 2.0) for i in range(5))
    spec = JobSpec("job-1", settings, items, tmp_path, tmp_path / "r", RunOptions(), "run-1")
    hostile = "line1\n\x00\x1b[31mred\x1b[0m ]]> <&> ``` end"

    def att(n: int, o: Outcome, reason: str) -> Attempt:
        return Attempt(n, o, 1.5, 0, reason, tail=hostile)

    results = [
        FileResult(items[0], 1, Outcome.PASSED, [att(1, Outcome.PASSED, "exit status 0")]),
        FileResult(items[1], 1, Outcome.FLAKY, [att(1, Outcome.FAILED, "exit status 1"),
                                                att(2, Outcome.PASSED, "exit status 0")],
                   message="passed on attempt 2 of 2", gate_lines=["loss ok"]),
        FileResult(items[2], 1, Outcome.FAILED, [att(1, Outcome.FAILED, "exit status 1")],
                   message="exit status 1"),
        FileResult(items[3], 1, Outcome.TIMEOUT, [att(1, Outcome.TIMEOUT, "timed out")],
                   message="timed out after 1s"),
        FileResult(items[4], 1, Outcome.NOT_RUN, message="not run (fast-fail)"),
    ]
    return JobResult(spec, results, 0.0, 9.0)


def test_junit_is_valid_with_hostile_output(tmp_path: Path) -> None:
    job = _job(tmp_path)
    path = tmp_path / "out" / "junit.xml"
    write_junit(job, path)
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "job-1"
    assert suite.get("timestamp") == "1970-01-01T00:00:00+00:00"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == \
        ("5", "1", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("time") for c in cases][:1] == ["1.5"]
    failure = cases[2].find("failure")
    assert failure is not None and "red" in (failure.text or "") and "\x1b" not in failure.text
    assert cases[3].find("error").get("type") == "timeout"  # type: ignore[union-attr]
    assert "fast-fail" in cases[4].find("skipped").get("message")  # type: ignore[union-attr]
    assert "passed on attempt 2" in (cases[1].find("system-out").text or "")  # type: ignore[union-attr]
    assert not list(path.parent.glob(".junit.xml.*"))  # no temp file left behind


def test_junit_build_is_deterministic_bytes(tmp_path: Path) -> None:
    job = _job(tmp_path)
    assert build_xml(job) == build_xml(job)
    assert build_xml(job).startswith(b"<?xml")


def test_step_summary_escapes_hostile_names(tmp_path: Path) -> None:
    md = step_summary_markdown(_job(tmp_path))
    table = [line for line in md.splitlines() if line.startswith("| tests/")]
    assert len(table) == 5
    for row in table:  # every row still has exactly 7 unescaped pipes
        assert len(re.findall(r"(?<!\\)\|", row)) == 7
    assert "<details>" in md and "````text" in md  # fence longer than the ``` in the output
    assert md_escape("a|b<c>") == "a\\|b\\<c\\>"


def test_step_summary_caps_failure_details(tmp_path: Path) -> None:
    job = _job(tmp_path)
    failed = job.results[2]
    job.results = [failed] * 50
    md = step_summary_markdown(job)
    assert md.count("<details>") == 20
    assert "30 more failed files" in md
    failed.attempts[-1].tail = "y" * 64 * 1024  # one 64 KiB line
    assert len(step_summary_markdown(job)) < 300 * 1024


def test_log_reporter_warning_and_annotation(tmp_path: Path) -> None:
    out, err = io.BytesIO(), io.StringIO()
    rep = LogReporter(out=out, err=err, github=True)
    job = _job(tmp_path)
    rep.file_finished(2, job.results[2])
    rep.warning("db down\nsecond line")
    assert out.getvalue().decode().startswith("::error file=tests/t2|<x>.py,title=testfleet%3A FAILED::")
    assert err.getvalue() == "::warning title=testfleet::db down%0Asecond line\n"
    assert gh_escape_property("a,b:c") == "a%2Cb%3Ac"


def test_exit_codes(tmp_path: Path) -> None:
    job = _job(tmp_path)
    assert job.exit_code == 1
    job.results = job.results[:2]
    assert job.exit_code == 0
    job.interrupted_by = 15
    assert job.exit_code == 143
    job.interrupted_by = None
    job.results = []
    assert job.exit_code == 1  # nothing run is never green


def test_parse_shard() -> None:
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "x", "1/0", "-1/2"):
        with pytest.raises(UsageError):
            parse_shard(bad)


def _plan(*jobs: SimpleNamespace, stages: tuple = ()) -> SimpleNamespace:
    return SimpleNamespace(jobs=jobs, stages=stages, policy={"cadence": "regular"},
                           digest="sha256:" + "a" * 64)


def _pjob(stage: str, shard: int, shards: int, files: list[str]) -> SimpleNamespace:
    return SimpleNamespace(id=f"{stage}-{shard}-of-{shards}", stage=stage, backend="cpu",
                           command="pytest", env={}, shard=shard, shards=shards, ci=JobCI(),
                           tests=[SimpleNamespace(file=f, estimate=1.0, source="est_time", command=None)
                                  for f in files])


def test_select_stage_jobs() -> None:
    plan = _plan(_pjob("a", 2, 2, ["x2"]), _pjob("a", 1, 2, ["x1"]))
    assert [i.file for i in select_stage_jobs(plan, "a", None).items] == ["x1", "x2"]
    sel = select_stage_jobs(plan, "a", (2, 2))
    assert sel.job_id == "a-2-of-2" and [i.file for i in sel.items] == ["x2"]
    with pytest.raises(UsageError, match="planned as 2 shard"):
        select_stage_jobs(plan, "a", (1, 3))
    both = select_stage_jobs(plan, "a", None)
    assert (both.job_id, both.shard, both.jobs) == ("a-all-2", 0, ("a-1-of-2", "a-2-of-2"))
    # shards = 3 with two files: shard 3 has no job, and is empty rather than an error (#26)
    fewer = _plan(_pjob("a", 1, 3, ["x1"]), _pjob("a", 2, 3, ["x2"]))
    empty = select_stage_jobs(fewer, "a", (3, 3))
    assert empty.empty and (empty.job_id, empty.shard, empty.shards, empty.jobs) == (
        "a-3-of-3", 3, 3, ())
    assert empty.plan_digest == fewer.digest
    dormant = SimpleNamespace(name="d", status="dormant", reason="runners broken")
    with pytest.raises(UsageError, match="dormant: runners broken"):
        select_stage_jobs(_plan(stages=(dormant,)), "d", None)


def test_run_id_is_filesystem_safe() -> None:
    rid = make_run_id("job/../x y", {"GITHUB_RUN_ID": "12", "GITHUB_RUN_ATTEMPT": "3"})
    assert rid == "12.3-job_.._x_y"
    assert "/" not in make_run_id("a/b", {})


def test_fresh_dir_never_reuses(tmp_path: Path) -> None:
    from testfleet.runner.executor import fresh_dir

    a = fresh_dir(tmp_path / "x", "attempt-1")
    (a / "old.jsonl").write_text("stale")
    b = fresh_dir(tmp_path / "x", "attempt-1")
    assert a.name == "attempt-1" and b.name == "attempt-1.2" and not list(b.iterdir())


def test_file_problem_refuses_paths_outside_the_project(tmp_path: Path) -> None:
    from testfleet.runner.executor import file_problem

    (tmp_path / "t.py").write_text("")
    (tmp_path / "link.py").symlink_to("/etc/hostname")
    assert file_problem(tmp_path, "t.py") == ""
    assert "outside" in file_problem(tmp_path, "../x.py")
    assert "outside" in file_problem(tmp_path, "link.py")
    assert "not a repository-relative" in file_problem(tmp_path, "/etc/passwd")
    assert "not a repository-relative" in file_problem(tmp_path, "-c.py")
    assert "does not exist" in file_problem(tmp_path, "nope.py")


def test_junit_file_mode_follows_the_umask(tmp_path: Path) -> None:
    """A new JUnit file is readable like any file the user creates (0o666 minus the umask),
    not private 0o600 (the temporary file's mode) that an artifact server cannot read; an
    existing file keeps its own mode."""
    import os
    import stat

    path = tmp_path / "junit.xml"
    old = os.umask(0o022)
    try:
        write_junit(_job(tmp_path), path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o640)
        write_junit(_job(tmp_path), path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(old)
