"""Capture (metrics.log) and record reading, including killed writers and garbage."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testfleet import metrics
from testfleet.gate.records import read_records


@pytest.fixture
def record_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "records"
    monkeypatch.setenv("TESTFLEET_RECORD_DIR", str(d))
    return d


def test_log_writes_one_flushed_line_per_point(record_dir: Path) -> None:
    metrics.log("train/loss", 1.5, step=0)
    metrics.log("train/loss", 1.25)  # implicit: next step of that key
    metrics.log("train/grad", float("nan"), step=7)
    metrics.log("train/grad", float("inf"), step=8)
    metrics.log("train/grad", -float("inf"), step=9)
    files = list(record_dir.glob("*.jsonl"))
    assert [f.name for f in files] == [f"metrics-{os.getpid()}.jsonl"]
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]  # flushed: readable now
    assert lines[0] == {"v": 1, "metric": "train/loss", "step": 0, "value": 1.5}
    assert lines[1]["step"] == 1
    assert [x["value"] for x in lines[2:]] == ["NaN", "Infinity", "-Infinity"]
    rs = read_records(record_dir)
    grad = rs.series["train/grad"].points
    assert math.isnan(grad[0][1]) and grad[1][1] == math.inf and grad[2][1] == -math.inf


def test_log_is_a_no_op_without_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTFLEET_RECORD_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    metrics.log("x", 1.0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "exc"), [
    (("", 1.0), TypeError), ((3, 1.0), TypeError), (("k", "1.0"), TypeError),
    (("k", True), TypeError), (("k", None), TypeError), (("k", 1.0, -1), ValueError),
    (("k", 1.0, 1.5), ValueError), (("k", 1.0, True), ValueError), (("a\x00b", 1.0), ValueError),
])
def test_log_rejects_bad_arguments_at_the_call(record_dir: Path, args: tuple, exc: type) -> None:
    with pytest.raises(exc):
        metrics.log(*args)


def test_processes_write_their_own_files_and_merge_sorted(record_dir: Path) -> None:
    code = ("import sys; from testfleet import metrics\n"
            "start = int(sys.argv[1])\n"
            "for s in range(start, 20, 2): metrics.log('m', float(s), step=s)\n")
    env = {**os.environ, "TESTFLEET_RECORD_DIR": str(record_dir)}
    for start in ("0", "1"):
        subprocess.run([sys.executable, "-c", code, start], env=env, check=True)
    rs = read_records(record_dir)
    assert len(rs.files) == 2
    assert [s for s, _ in rs.series["m"].points] == list(range(20))


def test_killed_writer_leaves_finished_lines_and_truncated_last_line_warns(tmp_path: Path) -> None:
    f = tmp_path / "metrics-1.jsonl"
    f.write_text('{"v":1,"metric":"m","step":0,"value":1.0}\n{"v":1,"metric":"m","st')
    rs = read_records(tmp_path)
    assert rs.series["m"].points == [(0, 1.0)]
    assert any("truncated last line" in w for w in rs.warnings)
    assert not rs.series["m"].problems


def test_series_form_and_garbage_lines(tmp_path: Path) -> None:
    (tmp_path / "other.jsonl").write_text("\n".join([
        '{"metric": "s", "series": [[2, 0.5], [0, 1.0], [1, "NaN"]]}',
        "this is not json",
        "[1, 2, 3]",
        '{"metric": "bad", "step": 1.5, "value": 1}',
        '{"metric": "bad2", "step": 1, "value": "high"}',
        '{"metric": "bad3", "series": [[0]]}',
        '{"metric": "v2", "v": 2, "step": 0, "value": 1}',
        '{"metric": "nostep", "value": 1}',
        "",
    ]) + "\n")
    (tmp_path / "ignored.txt").write_text("not a record")
    rs = read_records(tmp_path)
    assert [p[0] for p in rs.series["s"].points] == [0, 1, 2]
    assert math.isnan(rs.series["s"].points[1][1])
    assert sum("line skipped" in w for w in rs.warnings) == 2
    for key in ("bad", "bad2", "bad3", "v2", "nostep"):
        assert rs.series[key].problems, key
    assert "other.jsonl:4" in rs.series["bad"].problems[0]


def test_non_utf8_and_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_bytes(b'\xff\xfe{"metric": "m"}\n')
    rs = read_records(tmp_path)
    assert rs.warnings and not rs.series
    missing = read_records(tmp_path / "nope")
    assert missing.missing and "does not exist" in missing.warnings[0]


def test_a_single_record_file_can_be_read(tmp_path: Path) -> None:
    f = tmp_path / "curve.json"
    f.write_text('{"metric": "m", "series": [[0, 1.0]]}\n')
    assert read_records(f).series["m"].points == [(0, 1.0)]


def test_sigkilled_writer_leaves_every_finished_line(record_dir: Path) -> None:
    code = ("import sys, time; from testfleet import metrics\n"
            "for s in range(1000): metrics.log('loss', 1.0 / (s + 1), step=s)\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    env = {**os.environ, "TESTFLEET_RECORD_DIR": str(record_dir)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        proc.kill()  # SIGKILL: no atexit, no buffer flush at exit
    finally:
        proc.wait(timeout=30)
    rs = read_records(record_dir)
    assert [s for s, _ in rs.series["loss"].points] == list(range(1000))
    assert not rs.warnings
