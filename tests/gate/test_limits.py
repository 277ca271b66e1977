"""Bounds a pull request cannot push past (issue #17): a gate ``steps`` list is checked in
linear time and refused above :data:`MAX_STEPS`; a record file above
:data:`MAX_RECORD_BYTES` is refused by name, never read into memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import run_cli
from testfleet.gate import records as records_module
from testfleet.gate.records import read_records
from testfleet.gate.spec import MAX_STEPS, validate_steps

GATED = '''\
import os
from pathlib import Path
from testfleet import register_ci_gate, register_cpu_ci

register_cpu_ci(est_time=5, suite="stage-b-cpu", labels=["metrics"])
register_ci_gate(metric_key="train/loss", steps="last", enforce=True,
                 constraint={"rel_up": 0.1, "rel_down": 0.1})

if __name__ == "__main__":
    with open(Path(os.environ["TESTFLEET_RECORD_DIR"], "r.jsonl"), "wb") as fh:
        fh.truncate(int(os.environ["FLEET_SIZE"]))  # sparse: nothing is really written
'''


def test_a_steps_list_above_the_limit_is_one_clear_error() -> None:
    steps, problem = validate_steps(list(range(100_000)))
    assert steps is None
    assert problem == (f"steps lists 100000 step indices; at most {MAX_STEPS} are allowed "
                       "(use 'all' to gate every step)")


def test_a_steps_list_at_the_limit_is_checked_for_duplicates() -> None:
    assert validate_steps(list(range(MAX_STEPS)))[0] == tuple(range(MAX_STEPS))
    values = [*range(MAX_STEPS - 1), 5]
    assert validate_steps(values) == (None, "steps lists step 5 more than once")


def test_check_reports_a_huge_steps_list_with_its_location(tmp_path: Path) -> None:
    """The audit's case, as a real process: 100k entries took more than 120 s in check."""
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "testfleet.toml").write_text('roots = ["tests"]\n[stages.a]\nbackend = "cpu"\n'
                                         'command = "python"\n')
    steps = ",".join(map(str, range(100_000)))
    (root / "tests" / "test_a.py").write_text(
        "from testfleet import register_ci_gate, register_cpu_ci\n"
        'register_cpu_ci(est_time=5, suite="a")\n'
        f'register_ci_gate(metric_key="loss", steps=[{steps}], '
        'constraint={"rel_up": 0.1, "rel_down": 0.1})\n')
    proc = subprocess.run([sys.executable, "-m", "testfleet", "-C", str(root), "check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "3:1  error  steps lists 100000 step indices; at most 10000" in proc.stdout
    assert "[steps] (gate-steps)" in proc.stdout


def test_a_record_file_above_the_cap_is_not_read(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records_module, "MAX_RECORD_BYTES", 100)
    (tmp_path / "small.jsonl").write_text('{"metric": "a", "step": 0, "value": 1}\n')
    (tmp_path / "big.jsonl").write_text('{"metric": "b", "step": 0, "value": 1}\n' * 10)
    records = read_records(tmp_path)
    assert records.get("a") is not None and records.get("b") is None
    assert len(records.unreadable) == 1
    assert "big.jsonl: cannot read: 390 bytes, more than the 100 bytes testfleet reads" in \
        records.unreadable[0]
    assert records.unreadable[0] in records.warnings


def test_gate_evaluate_names_an_oversized_record_file(example_project: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "r.jsonl"
    with open(record, "wb") as fh:
        fh.truncate(records_module.MAX_RECORD_BYTES + 1)  # sparse
    code, _, err = run_cli(capsys, "-C", str(example_project), "gate", "evaluate", "--test",
                           "tests/unit/test_train_curve_loss.py", "--record", str(record),
                           "--database", f"sqlite:///{tmp_path / 'h.db'}")
    assert code == 2, err
    assert f"{record}: cannot read: {records_module.MAX_RECORD_BYTES + 1} bytes, more than " \
           "the 256 MiB testfleet reads" in err


def test_an_enforced_gate_fed_an_oversized_record_fails_the_test(example_project: Path,
                                                                 tmp_path: Path) -> None:
    test = example_project / "tests" / "unit" / "test_gated_big.py"
    test.write_text(GATED)
    env = {**os.environ, "TESTFLEET_GATE_ENFORCE": "1",
           "FLEET_SIZE": str(records_module.MAX_RECORD_BYTES + 1),
           "TESTFLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'h.db'}"}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.run([sys.executable, "-m", "testfleet", "run", "--file",
                           "tests/unit/test_gated_big.py", "--display", "plain"],
                          cwd=example_project, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "internal error" not in out, out
    assert "more than the 256 MiB testfleet reads" in out, out
    assert proc.returncode == 1, out
