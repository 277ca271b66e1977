"""Duration drift and metric-gate history from a real SQLite history database."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from report_helpers import H200, LOSS, config, reg, seed_history

from testfleet.app.report import gather
from testfleet.config import load_project
from testfleet.report.gates import corridor, summarize
from testfleet.report.history import drift_rows, statistic
from testfleet.report.render_html import render_html
from testfleet.report.render_json import render_json

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc).timestamp()


def test_statistic_and_drift_rows() -> None:
    assert statistic([3, 1, 2], "median") == 2
    assert statistic([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "p90") == 9
    assert statistic([float("nan")], "median") != statistic([float("nan")], "median")  # nan
    cfg = config(durations={"drift_factor": 2.0, "min_samples": 2})
    regs = [reg("a.py", est=100), reg("b.py", est=100), reg("c.py", est=100), reg("d.py", est=100),
            reg("e.py", est=100, disabled="x")]
    measured = {("cpu-a", "a.py"): [250, 260, 240],  # 2.5x slower
                ("cpu-a", "b.py"): [150, 150],  # within factor
                ("cpu-a", "c.py"): [40, 45],  # 2.2x faster
                ("cpu-a", "d.py"): [1000],  # too few samples
                ("cpu-a", "e.py"): [1000, 1000]}  # disabled
    rows = drift_rows(regs, measured, cfg)
    assert [(r.file, round(r.factor, 3), r.samples) for r in rows] == [
        ("a.py", 2.5, 3), ("c.py", 0.425, 2)]


def test_corridor_and_summary_verdicts() -> None:
    assert corridor({"rel_up": 0.1, "abs_floor_up": 0.5, "rel_down": 0.5}, 2.0) == (1.0, 2.5)
    assert corridor({}, 1.0) is None

    class H:
        def __init__(self, pk, value, trusted, by=None):
            self.run_pk, self.value, self.trusted, self.untrusted_by = pk, value, trusted, by
            self.run_id, self.recorded_at, self.backend, self.suite = f"r{pk}", T0 + pk, "cpu", "s"
            self.env_key, self.metric_key, self.steps_key = "", "m", '"last"'
            self.constraint_key, self.step = '{"abs_floor_down":0.1,"abs_floor_up":0.1}', -1

    hist = [H(4, 9.0, False, "ci-run 7"), H(3, 1.2, False), H(2, 1.0, True), H(1, 2.0, True)]
    rows, series = summarize("f.py", hist, window=20)
    assert [(r.metric, r.last_verdict, r.runs, r.untrusted_runs, r.coordinates) for r in rows] == [
        ("m", "UNTRUSTED", 4, 2, 1)]
    (s,) = series
    assert [p.value for p in s.points] == [2.0, 1.0, 1.2, 9.0]  # oldest first
    assert s.reference == 1.5 and s.band == (1.4, 1.6)
    rows, _ = summarize("f.py", hist[1:], window=1)
    assert rows[0].last_verdict == "FAIL"


def test_report_with_history(example_project: Path) -> None:
    seed_history(example_project)
    project = load_project(example_project)
    report = gather(project, now=dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc))
    h = report.history
    assert h.available, h.note
    assert [(d.file, d.stage, d.samples) for d in h.drift] == [(H200, "stage-c-4-gpu-h200", 4)]
    assert round(h.drift[0].factor, 2) == 3.0
    (gate,) = [g for g in h.gates if g.file == LOSS]
    assert (gate.metric, gate.runs, gate.untrusted_runs, gate.last_verdict) == (
        "train/loss", 7, 2, "UNTRUSTED")
    (trend,) = [t for t in h.trends if t.file == LOSS]
    assert [p.trusted for p in trend.points] == [True] * 4 + [False, True, False]
    assert trend.reference is not None and abs(trend.reference - 0.3) < 1e-9
    assert trend.band is not None and trend.band[1] > trend.reference > trend.band[0]
    html = render_html(report)
    assert 'id="drift"' in html and 'id="gates"' in html and 'id="trends"' in html
    assert "<polyline" in html
    data = json.loads(render_json(report))
    assert data["history"]["available"] and len(data["history"]["trends"]) == 1


def test_missing_and_corrupt_database_are_notes(example_project: Path) -> None:
    project = load_project(example_project)
    report = gather(project)
    assert not report.history.available and "does not exist" in report.history.note
    db = example_project / ".testfleet" / "history.db"
    db.parent.mkdir(exist_ok=True)
    db.write_bytes(b"this is not sqlite" * 100)
    report = gather(project)
    assert not report.history.available and report.history.note
    assert 'id="history"' in render_html(report)
    report = gather(project, database="postgresql://nobody:s3cret@127.0.0.1:1/none")
    assert not report.history.available and report.history.note
    assert "s3cret" not in render_html(report) and "s3cret" not in render_json(report)
    report = gather(project, history=False)
    assert "not requested" in report.history.note


def test_durations_without_gate_tables_still_show_drift(example_project: Path) -> None:
    """A database whose metric tables are missing keeps its drift and explains the rest."""
    import sqlite3

    seed_history(example_project)
    db = example_project / ".testfleet" / "history.db"
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE gate_values")
    report = gather(load_project(example_project))
    assert report.history.available and report.history.drift
    assert report.history.gates == () and "metric history unreadable" in report.history.note
