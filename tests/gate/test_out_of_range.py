"""Numbers no metric can hold (issue #17): an integer beyond the float range or a step
>= 2**63 is an ERROR verdict for the runner (an enforced ERROR fails the test) and bad
input (exit 2) for ``gate evaluate`` — never "internal error (verdict unchanged)"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import run_cli
from testfleet.gate.records import read_records

HUGE = "9" * 5000
LINES = {
    "huge-value": '{"metric": "train/loss", "step": 0, "value": ' + HUGE + "}\n",
    "float-overflow": '{"metric": "train/loss", "step": 0, "value": 1' + "0" * 320 + "}\n",
    "huge-step": '{"metric": "train/loss", "step": ' + str(2**63) + ', "value": 0.5}\n',
    "huge-series-step": '{"metric": "train/loss", "series": [[' + HUGE + ", 0.5]]}\n",
}

GATED = '''\
import os, sys
from pathlib import Path
from testfleet import register_ci_gate, register_cpu_ci

register_cpu_ci(est_time=5, suite="stage-b-cpu", labels=["metrics"])
register_ci_gate(metric_key="train/loss", steps="last", enforce=True,
                 constraint={"rel_up": 0.1, "rel_down": 0.1})

if __name__ == "__main__":
    Path(os.environ["TESTFLEET_RECORD_DIR"], "r.jsonl").write_text(os.environ["FLEET_LINE"])
'''


@pytest.mark.parametrize("case", sorted(LINES))
def test_records_mark_the_metric_broken_and_out_of_range(case: str, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(LINES[case])
    records = read_records(path)
    series = records.get("train/loss")
    assert series is not None and series.problems and not series.points
    assert len(records.out_of_range) == 1 and "r.jsonl:1" in records.out_of_range[0]


@pytest.mark.parametrize("case", sorted(LINES))
def test_gate_evaluate_refuses_them_with_exit_2(case: str, example_project: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "r.jsonl"
    record.write_text(LINES[case])
    code, _, err = run_cli(capsys, "-C", str(example_project), "gate", "evaluate", "--test",
                           "tests/unit/test_train_curve_loss.py", "--record", str(record),
                           "--database", f"sqlite:///{tmp_path / 'h.db'}")
    assert code == 2, err
    assert "a number no metric can hold" in err and "r.jsonl:1" in err


@pytest.mark.parametrize("case", ["huge-value", "huge-step"])
def test_an_enforced_gate_on_them_fails_the_test(case: str, example_project: Path,
                                                 tmp_path: Path) -> None:
    test = example_project / "tests" / "unit" / "test_gated_hostile.py"
    test.write_text(GATED)
    env = {**os.environ, "TESTFLEET_GATE_ENFORCE": "1", "FLEET_LINE": LINES[case],
           "TESTFLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'h.db'}"}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.run([sys.executable, "-m", "testfleet", "run", "--file",
                           "tests/unit/test_gated_hostile.py", "--output", "plain",
                           "--junit", str(tmp_path / "j.xml")],
                          cwd=example_project, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert "internal error" not in out and "Traceback" not in out, out
    assert "ERROR" in out and "beyond" in out, out
    assert proc.returncode == 1, out


def test_write_baseline_that_wrote_nothing_does_not_exit_0(
        example_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "rec"
    records.mkdir()
    env = {**os.environ, "TESTFLEET_RECORD_DIR": str(records)}
    subprocess.run([sys.executable, "tests/unit/test_train_curve_loss.py"], cwd=example_project,
                   env=env, check=True, capture_output=True, timeout=120)
    # a directory where the SQLite file must be: nothing can be written
    (tmp_path / "blocked.db").mkdir()
    code, out, err = run_cli(capsys, "-C", str(example_project), "gate", "evaluate", "--test",
                             "tests/unit/test_train_curve_loss.py", "--record", str(records),
                             "--write-baseline", "--database",
                             f"sqlite:///{tmp_path / 'blocked.db'}")
    assert code == 1, out + err
    assert "nothing was written" in err
    json.dumps(out)  # printable
