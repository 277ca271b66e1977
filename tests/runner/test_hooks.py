"""History and gate hooks: they record and gate, and they never change a verdict by failing."""

from __future__ import annotations

import io
import sqlite3
import sys
import types
from pathlib import Path

import pytest

from testfleet.config import load_project
from testfleet.runner.hooks import RunHooks, current_commit, history_outcome
from testfleet.runner.live import LogReporter
from testfleet.runner.loop import execute
from testfleet.runner.model import Attempt, Outcome
from testfleet.runner.reporting import NullReporter

FLAKY = """
import os, sys
marker = sys.argv[0] + ".ran"
if not os.path.exists(marker):
    open(marker, "w").close()
    raise AssertionError("score 0.2 below 0.3")
"""


def _project(spec) -> object:
    (spec.root / "testfleet.toml").write_text(
        'roots = ["."]\n[stages.stage-x]\nbackend = "cpu"\ncommand = "python"\n')
    return load_project(spec.root)


def test_every_attempt_is_recorded(make_spec, tmp_path: Path) -> None:
    spec = make_spec({"test_flaky.py": FLAKY, "test_ok.py": "print(1)\n"}, max_attempts=2)
    project = _project(spec)
    reporter = NullReporter()
    db = tmp_path / "h.db"
    hooks = RunHooks(project, warn=reporter.warning, database=str(db),
                     environ={"GITHUB_RUN_ID": "99", "GITHUB_SHA": "f" * 40})
    job = execute(spec, reporter=reporter, hooks=hooks)
    hooks.close()
    assert job.exit_code == 0 and not reporter.warnings
    rows = sqlite3.connect(db).execute(
        "select file, outcome, attempt, commit_sha, ci_run_id from executions order by id").fetchall()
    assert rows == [("test_flaky.py", "FAILED", 1, "f" * 40, "99"),
                    ("test_flaky.py", "FLAKY", 2, "f" * 40, "99"),
                    ("test_ok.py", "PASSED", 1, "f" * 40, "99")]


def test_database_failure_is_one_warning_and_no_verdict_change(make_spec, tmp_path: Path) -> None:
    spec = make_spec({"test_a.py": "print(1)\n", "test_b.py": "print(2)\n"})
    project = _project(spec)
    reporter = NullReporter()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    hooks = RunHooks(project, warn=reporter.warning, database=str(blocker / "h.db"))
    job = execute(spec, reporter=reporter, hooks=hooks)
    assert job.exit_code == 0
    assert len(reporter.warnings) == 1 and "history database unavailable" in reporter.warnings[0]


def _fake_gate(monkeypatch: pytest.MonkeyPatch, behaviour) -> list[dict]:
    calls: list[dict] = []
    module = types.ModuleType("testfleet.gate.hook")

    def gate_file(project, **kwargs):
        calls.append(kwargs)
        return behaviour(kwargs)

    module.gate_file = gate_file  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "testfleet.gate.hook", module)
    return calls


def test_gate_is_called_for_passing_files_with_the_passing_attempts_records(
        make_spec, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_gate(monkeypatch, lambda kw: types.SimpleNamespace(
        fails_test=False, lines=[f"gate: {kw['file']} ok"], verdicts=[],
        status="PASS", mode="shadow"))
    spec = make_spec({"test_flaky.py": FLAKY, "test_bad.py": "raise SystemExit(1)\n"},
                     max_attempts=2, fast_fail=False)
    project = _project(spec)
    hooks = RunHooks(project, warn=NullReporter().warning, record_history=False,
                     write_baseline=True)
    job = execute(spec, reporter=NullReporter(), hooks=hooks)
    assert [c["file"] for c in calls] == ["test_flaky.py"]  # never for a failed file
    call = calls[0]
    assert call["record_dir"] == job.results[0].attempts[1].record_dir
    assert call["suite"] == "stage-x" and call["backend"] == "cpu"
    assert call["write_baseline"] is True and call["run_id"] == "run-1"
    assert job.results[0].gate_lines == ["gate: test_flaky.py ok"]


def test_gate_failure_fails_the_file(make_spec, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gate(monkeypatch, lambda kw: types.SimpleNamespace(
        fails_test=True, lines=["gate: loss 3.1 above mean 2.0 x 1.1"], verdicts=[],
        status="FAIL", mode="enforced"))
    spec = make_spec({"test_a.py": "print(1)\n", "test_b.py": "print(2)\n"})
    hooks = RunHooks(_project(spec), warn=NullReporter().warning, record_history=False)
    job = execute(spec, reporter=NullReporter(), hooks=hooks)
    assert [r.outcome for r in job.results] == [Outcome.FAILED, Outcome.NOT_RUN]
    assert job.results[0].gate_failed
    assert job.results[0].message == "metric gate failed: loss 3.1 above mean 2.0 x 1.1"
    assert job.exit_code == 1


def test_gate_failure_note_names_the_failing_declaration_once(
        make_spec, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = ["gate: warning: 2 record file(s) skipped",
             "gate: PASS     grad_norm: value 1.2",
             "gate: FAIL     loss (enforced): value 3.1, reference 2 (mean of 5)",
             "gate: test_a.py: run untrusted; NOT written"]
    _fake_gate(monkeypatch, lambda kw: types.SimpleNamespace(fails_test=True, lines=lines,
                                                            verdicts=[], status="FAIL",
                                                            mode="enforced"))
    spec = make_spec({"test_a.py": "print(1)\n"})
    out = io.BytesIO()
    job = execute(spec, reporter=LogReporter(out=out, err=io.StringIO()),
                  hooks=RunHooks(_project(spec), warn=NullReporter().warning, record_history=False))
    note = "metric gate failed: FAIL loss (enforced): value 3.1, reference 2 (mean of 5)"
    assert job.results[0].message == note
    assert note in out.getvalue().decode()  # the summary's note column
    assert job.results[0].gate_lines == lines  # the full lines are still logged as they are


def test_gate_exception_is_a_warning(make_spec, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(kw):
        raise RuntimeError("kaputt")

    _fake_gate(monkeypatch, boom)
    spec = make_spec({"test_a.py": "print(1)\n"})
    reporter = NullReporter()
    hooks = RunHooks(_project(spec), warn=reporter.warning, record_history=False)
    job = execute(spec, reporter=reporter, hooks=hooks)
    assert job.exit_code == 0
    assert "RuntimeError: kaputt" in reporter.warnings[0]


def test_real_gate_without_declarations_is_silent(make_spec) -> None:
    spec = make_spec({"test_a.py": "print(1)\n"})
    reporter = NullReporter()
    hooks = RunHooks(_project(spec), warn=reporter.warning, record_history=False)
    job = execute(spec, reporter=reporter, hooks=hooks)
    assert job.exit_code == 0 and not reporter.warnings and job.results[0].gate_lines == []


def test_history_outcome_vocabulary() -> None:
    def a(n: int, o: Outcome) -> Attempt:
        return Attempt(n, o, 1.0, 0, "")

    assert history_outcome(a(1, Outcome.PASSED)) == "PASSED"
    assert history_outcome(a(2, Outcome.PASSED)) == "FLAKY"
    assert history_outcome(a(1, Outcome.INTERRUPTED)) == "ERROR"
    assert history_outcome(a(1, Outcome.TIMEOUT)) == "TIMEOUT"


def test_commit_from_env_or_git(tmp_path: Path) -> None:
    assert current_commit(tmp_path, {"GITHUB_SHA": "abc"}) == "abc"
    assert current_commit(tmp_path, {}) is None or len(current_commit(tmp_path, {}) or "") == 40
