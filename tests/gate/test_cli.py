"""`testfleet gate evaluate | history | untrust` on both engines, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testfleet.cli.main import main

LOSS = "tests/unit/test_train_curve_loss.py"


def tf(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def produce(root: Path, records: Path, drift: float = 0.0, file: str = LOSS) -> str:
    env = {**os.environ, "TESTFLEET_RECORD_DIR": str(records), "FLEET_DRIFT": str(drift)}
    subprocess.run([sys.executable, file], cwd=root, env=env, check=True, capture_output=True)
    return str(records)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TESTFLEET_GATE_ENFORCE", "TESTFLEET_DATABASE_URL", "GITHUB_RUN_ID", "GITHUB_SHA"):
        monkeypatch.delenv(name, raising=False)


def test_evaluate_history_untrust_flow(example_project: Path, tmp_path: Path, store_url: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = str(example_project)
    db = ("--database", store_url)
    code, out, _ = tf(capsys, "-C", root, "gate", "evaluate", "--test", LOSS, "--record",
                      produce(example_project, tmp_path / "1"), "--write-baseline",
                      "--run-id", "good-1", "--commit", "a" * 40, *db)
    assert code == 0 and "INACTIVE" in out and "run trusted; baseline written" in out
    code, out, _ = tf(capsys, "-C", root, "gate", "evaluate", "--test", LOSS, "--record",
                      produce(example_project, tmp_path / "2"), "--write-baseline",
                      "--run-id", "good-2", "--ci-run-id", "77", *db)
    assert code == 0 and "PASS" in out
    drifted = produce(example_project, tmp_path / "3", 0.05)
    code, out, _ = tf(capsys, "-C", root, "gate", "evaluate", "--test", LOSS, "--record",
                      drifted, "--format", "json", *db)
    assert code == 1
    doc = json.loads(out)
    assert doc["trusted"] is False and not doc["written"]
    assert [s["status"] for s in doc["specs"]] == ["FAIL", "FAIL"]
    assert doc["specs"][1]["first_fail_step"] == 10

    code, out, _ = tf(capsys, "-C", root, "gate", "history", "--test", LOSS, "--format", "json",
                      "--metric", "train/loss", *db)
    rows = json.loads(out)["values"]
    assert code == 0 and len(rows) == 10 and {r["run_id"] for r in rows} == {"good-1", "good-2"}
    code, out, _ = tf(capsys, "-C", root, "gate", "history", "--test", LOSS, *db)
    assert code == 0 and "good-2" in out and "last (39)" in out

    code, out, _ = tf(capsys, "-C", root, "gate", "untrust", "--ci-run-id", "77", *db)
    assert code == 0 and out.startswith("1 gated run marked untrusted")
    code, out, _ = tf(capsys, "-C", root, "gate", "untrust", "--commit", "aaaaaaa", *db)
    assert code == 0 and out.startswith("1 gated run marked untrusted")
    code, out, _ = tf(capsys, "-C", root, "gate", "untrust", "--run-id", "good-1", *db)
    assert out.startswith("0 gated runs")
    # nothing trusted is left: the next run is a cold start again
    code, out, _ = tf(capsys, "-C", root, "gate", "evaluate", "--test", LOSS, "--record",
                      drifted, *db)
    assert code == 0 and "cold start" in out


@pytest.mark.parametrize(("args", "needle"), [
    (["evaluate", "--test", LOSS, "--record", "/nonexistent/records"], "no such file or directory"),
    (["evaluate", "--test", "tests/unit/nope.py", "--record", "."], "no such test file"),
    (["evaluate", "--test", "../../etc/passwd", "--record", "."], "no such test file"),
    (["evaluate", "--test", "tests/unit/test_weight_sync.py", "--record", "."], "declares no"),
    (["evaluate", "--test", LOSS, "--record", ".", "--suite", "stage-zz"], "unknown stage"),
    (["untrust"], "exactly one"),
    (["untrust", "--run-id", "a", "--commit", "b"], "exactly one"),
    (["untrust", "--run-id", " "], "must not be empty"),
    (["evaluate", "--test", LOSS, "--record", ".", "--run-id", "r1\nPASS"],
     "--run-id 'r1\\nPASS': contains a control character (U+000A)"),
    (["evaluate", "--test", LOSS, "--record", ".", "--ci-run-id", "7\x1b[2J"],
     "--ci-run-id '7\\x1b[2J': contains a control character (U+001B)"),
    (["evaluate", "--test", LOSS, "--record", ".", "--commit", "abc\r"], "--commit 'abc\\r': contains"),
    (["history", "--test", LOSS, "--database", "mysql://x/y"], "unsupported database URL"),
])
def test_bad_input_is_a_clear_error(example_project: Path, capsys: pytest.CaptureFixture[str],
                                    args: list[str], needle: str) -> None:
    code, out, err = tf(capsys, "-C", str(example_project), "gate", *args)
    assert code == 2, (out, err)
    assert needle in err and "Traceback" not in err


def test_control_characters_from_the_environment_name_the_variable(
        example_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SHA", "abc\ndef")
    code, _, err = tf(capsys, "-C", str(example_project), "gate", "evaluate", "--test", LOSS,
                      "--record", ".")
    assert code == 2 and "--commit (from $GITHUB_SHA) 'abc\\ndef': contains a control character" in err


def test_history_prints_hostile_keys_as_data(example_project: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    test = example_project / "tests" / "unit" / "test_hostile.py"
    key = "[bold red]x[/bold red]'; DROP TABLE gate_runs; --"
    test.write_text("from testfleet import register_ci_gate, register_cpu_ci\n"
                    "register_cpu_ci(est_time=1, suite='stage-b-cpu')\n"
                    f"register_ci_gate(metric_key={key!r}, steps='last', "
                    "constraint={'rel_up': 0.1, 'rel_down': 0.1})\n")
    rec = tmp_path / "r.jsonl"
    rec.write_text(json.dumps({"metric": key, "series": [[0, 1.0]]}) + "\n")
    code, out, _ = tf(capsys, "-C", str(example_project), "gate", "evaluate", "--test",
                      "tests/unit/test_hostile.py", "--record", str(rec), "--write-baseline")
    assert code == 0
    code, out, _ = tf(capsys, "-C", str(example_project), "gate", "history", "--test",
                      "tests/unit/test_hostile.py", "--metric", key, "--format", "json")
    assert json.loads(out)["values"][0]["metric_key"] == key
    code, out, _ = tf(capsys, "-C", str(example_project), "gate", "history", "--test",
                      "tests/unit/test_hostile.py")
    assert "[bold red]x" in out


def test_check_reports_gate_errors_with_file_and_line(example_project: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (example_project / "tests" / "unit" / "test_bad_gate.py").write_text(
        "from testfleet import register_ci_gate, register_cpu_ci\n"
        "register_cpu_ci(est_time=1, suite='stage-b-cpu')\n"
        "register_ci_gate(metric_key='a', steps=[1, 1], constraint={'rel_up': 1, 'rel_up': 2,"
        " 'rel_down': 0.1})\n"
        "register_ci_gate(metric_key='b', steps='last', constraint={'rel_up': -1})\n"
        "register_ci_gate(metric_key='train/grad_norm', min_history=True)\n"
        "def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n")
    code, out, _ = tf(capsys, "-C", str(example_project), "check", "--format", "json")
    assert code == 1
    found = [f for f in json.loads(out)["findings"] if f["file"] == "tests/unit/test_bad_gate.py"]
    got = {(f["line"], f["code"]) for f in found}
    assert {(3, "gate-steps"), (3, "gate-duplicate-key"), (4, "gate-constraint"),
            (5, "gate-min-history")} <= got
    # the example's own gates are valid: the defaults filled train/grad_norm there
    assert not [f for f in json.loads(out)["findings"] if "train_curve" in f["file"]]


def test_relative_record_follows_dash_c(example_project: Path, tmp_path: Path, store_url: str,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`-C DIR` runs as if started in DIR: a relative --record is DIR's, not the shell's."""
    produce(example_project, example_project / "recs")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = tf(capsys, "-C", str(example_project), "gate", "evaluate", "--test", LOSS,
                        "--record", "recs", "--database", store_url)
    assert code == 0, (out, err)
    assert "INACTIVE" in out and "cold start" in out
