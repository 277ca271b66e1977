"""The runner hook end to end on the example project: real processes, real records."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testfleet.config import load_project
from testfleet.gate.hook import FileGateResult, gate_file

LOSS = "tests/unit/test_train_curve_loss.py"
GRAD = "tests/unit/test_train_curve_grad_norm.py"


def produce(project_root: Path, file: str, record_dir: Path, drift: float = 0.0) -> Path:
    env = {**os.environ, "TESTFLEET_RECORD_DIR": str(record_dir), "FLEET_DRIFT": str(drift)}
    subprocess.run([sys.executable, file], cwd=project_root, env=env, check=True,
                   capture_output=True)
    return record_dir


def gate(root: Path, file: str, records: Path, *, write: bool = True, run_id: str = "r",
         database: str | None = None) -> FileGateResult:
    project = load_project(root)
    return gate_file(project, file=file, backend="cpu", suite="stage-b-cpu", record_dir=records,
                     write_baseline=write, run_id=run_id, ci_run_id="4711", commit="abc1234def",
                     database=database)


def statuses(res: FileGateResult) -> list[str]:
    return [r.status for r in res.results]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TESTFLEET_GATE_ENFORCE", "TESTFLEET_DATABASE_URL", "FLEET_DRIFT"):
        monkeypatch.delenv(name, raising=False)


def test_file_without_gate_returns_empty_and_touches_no_store(example_project: Path,
                                                              tmp_path: Path) -> None:
    res = gate(example_project, "tests/unit/test_weight_sync.py", tmp_path / "none")
    assert res == FileGateResult()
    assert not (example_project / ".testfleet" / "history.db").exists()


def test_cold_start_then_pass_then_drift_caught(example_project: Path, tmp_path: Path) -> None:
    first = gate(example_project, LOSS, produce(example_project, LOSS, tmp_path / "1"), run_id="r1")
    assert statuses(first) == ["INACTIVE", "INACTIVE"] and first.trusted and first.written
    second = gate(example_project, LOSS, produce(example_project, LOSS, tmp_path / "2"), run_id="r2")
    assert statuses(second) == ["PASS", "PASS"] and second.trusted
    drifted = gate(example_project, LOSS, produce(example_project, LOSS, tmp_path / "3", 0.05),
                   run_id="r3")
    assert statuses(drifted) == ["FAIL", "FAIL"] and drifted.trusted is False and drifted.written
    assert drifted.results[1].first_fail_step == 10
    assert any("first step out of band: 10" in line for line in drifted.lines)
    assert not drifted.fails_test  # enforcement is off in the example's config
    assert any("outcome is unchanged: enforcement is off" in line for line in drifted.lines)
    # the untrusted drifted run never enters the baseline
    again = gate(example_project, LOSS, produce(example_project, LOSS, tmp_path / "4"), run_id="r4")
    v = again.results[0].verdicts[0]
    assert v.status == "PASS" and v.n == 2 and v.abs_dev == 0.0  # r1, r2; not r3
    assert {d["status"] for d in again.verdicts} == {"PASS"}


def test_enforcement_needs_declaration_and_switch(example_project: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    gate(example_project, LOSS, produce(example_project, LOSS, tmp_path / "1"))
    drifted = produce(example_project, LOSS, tmp_path / "2", 0.05)
    assert not gate(example_project, LOSS, drifted, write=False).fails_test
    monkeypatch.setenv("TESTFLEET_GATE_ENFORCE", "1")
    assert gate(example_project, LOSS, drifted, write=False).fails_test
    # grad_norm's gate is not enforce=True: it reports, never fails the test
    gate(example_project, GRAD, produce(example_project, GRAD, tmp_path / "3"))
    res = gate(example_project, GRAD, produce(example_project, GRAD, tmp_path / "4", 0.05))
    assert statuses(res) == ["FAIL"] and not res.fails_test


def test_shadow_runs_write_nothing(example_project: Path, tmp_path: Path) -> None:
    records = produce(example_project, LOSS, tmp_path / "1")
    for _ in range(2):
        res = gate(example_project, LOSS, records, write=False)
        assert statuses(res) == ["INACTIVE", "INACTIVE"] and not res.written
        assert any("shadow run, nothing written" in line for line in res.lines)


def test_unreachable_store_warns_and_never_fails(example_project: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTFLEET_GATE_ENFORCE", "1")
    records = tmp_path / "rec"
    records.mkdir()
    (records / "m.jsonl").write_text('{"metric": "train/loss", "series": [[0, 5.0], [1, 2.0]]}\n')
    res = gate(example_project, LOSS, records,
               database="postgresql://nobody:secret@127.0.0.1:1/nowhere")
    assert not res.fails_test and not res.written and not res.history_available
    assert any("history unavailable" in line for line in res.lines)
    assert all("secret" not in line for line in res.lines)
    # hard_max=1.0 still reports FAIL, but with no store the outcome is unchanged
    assert res.results[0].status == "FAIL"


def test_missing_records_and_non_finite_values_are_errors(example_project: Path,
                                                          tmp_path: Path) -> None:
    res = gate(example_project, LOSS, tmp_path / "does-not-exist")
    assert statuses(res) == ["ERROR", "ERROR"] and res.trusted is False
    assert any("does not exist" in line for line in res.lines)
    records = tmp_path / "nan"
    records.mkdir()
    (records / "metrics-1.jsonl").write_text(
        "".join(f'{{"metric":"train/loss","step":{s},"value":1.0}}\n' for s in range(39))
        + '{"metric":"train/loss","step":39,"value":"NaN"}\n{"metric":"train/lo')
    res = gate(example_project, LOSS, records)
    assert statuses(res) == ["ERROR", "INACTIVE"]
    assert "NaN" in res.results[0].verdicts[0].message
    assert any("truncated last line" in line for line in res.lines)
    assert res.written and res.trusted is False  # the finite values are stored, untrusted


def test_declaration_errors_are_reported_not_raised(example_project: Path, tmp_path: Path) -> None:
    bad = example_project / "tests" / "unit" / "test_bad_gate.py"
    bad.write_text("from testfleet import register_ci_gate\n"
                   "register_ci_gate(metric_key='x', steps=[], constraint={'rel_up': -1})\n")
    res = gate(example_project, "tests/unit/test_bad_gate.py", tmp_path / "none")
    assert res.findings and not res.results and not res.fails_test
    assert any("test_bad_gate.py:2" in line for line in res.lines)
    assert all(v["status"] == "ERROR" for v in res.verdicts)
    bad.write_text("register_ci_gate(metric_key='x'\n")  # a syntax error
    res = gate(example_project, "tests/unit/test_bad_gate.py", tmp_path / "none")
    assert res.findings[0].code == "gate-syntax"


def test_environment_key_separates_baselines(example_project: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = example_project / "pyproject.toml"
    cfg.write_text(cfg.read_text().replace("window = 20", 'window = 20\nenv_keys = ["FLEET_GPU"]'))
    records = produce(example_project, LOSS, tmp_path / "1")
    monkeypatch.setenv("FLEET_GPU", "h100")
    gate(example_project, LOSS, records)
    assert statuses(gate(example_project, LOSS, records)) == ["PASS", "PASS"]
    monkeypatch.setenv("FLEET_GPU", "mi300x")
    assert statuses(gate(example_project, LOSS, records)) == ["INACTIVE", "INACTIVE"]


def test_postgres_without_schema_degrades_to_a_warning(example_project: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       pg_database: object) -> None:
    """A runner role that cannot create tables, on a database nobody initialised."""
    monkeypatch.setenv("TESTFLEET_GATE_ENFORCE", "1")
    records = produce(example_project, LOSS, tmp_path / "1", drift=5.0)  # breaks hard_max
    res = gate(example_project, LOSS, records, database=pg_database.url_rw)  # type: ignore[attr-defined]
    assert not res.fails_test and not res.written and not res.history_available
    assert any("db init" in line for line in res.lines)


def test_bad_enforce_variable_is_reported(example_project: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTFLEET_GATE_ENFORCE", "sometimes")
    res = gate(example_project, LOSS, produce(example_project, LOSS, tmp_path / "1"), write=False)
    assert any("TESTFLEET_GATE_ENFORCE='sometimes'" in line for line in res.lines)
