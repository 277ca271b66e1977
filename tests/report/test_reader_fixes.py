"""What a reader of the report tripped on (#14): flat trend charts by the dozen, the
coverage-hole text said four times, paths broken mid-name, and drift in two notations."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from report_helpers import NOW, config, fleet

from testfleet.report import fmt
from testfleet.report.collect import build_report
from testfleet.report.model import HistorySection, TrendPoint, TrendSeries
from testfleet.report.render_html import render_html
from testfleet.report.render_markdown import render_markdown
from testfleet.report.render_text import render_text
from testfleet.report.trends import split, worth_drawing

LOSS = "tests/unit/test_train_curve_loss.py"


@pytest.mark.parametrize(("value", "shown"), [
    (1 / 338, "0.0030\u00d7"), (0.02, "0.020\u00d7"), (0.008, "0.0080\u00d7"), (0.11, "0.11\u00d7"),
    (0.0995, "0.10\u00d7"), (1.0, "1.0\u00d7"), (2.22, "2.2\u00d7"), (9.96, "10\u00d7"),
    (338.4, "338\u00d7"), (0.0, "0\u00d7"),
])
def test_drift_factor_has_one_notation(value: float, shown: str) -> None:
    assert fmt.factor(value) == shown


def _series(step: int, values: list[float], trusted: list[bool] | None = None) -> TrendSeries:
    flags = trusted or [True] * len(values)
    return TrendSeries(LOSS, "train/grad_norm", step,
                       tuple(TrendPoint(f"2026-05-0{i + 1}", v, t)
                             for i, (v, t) in enumerate(zip(values, flags, strict=True))),
                       reference=values[0], band=(values[0] * 0.9, values[0] * 1.1),
                       label="stage-b-cpu")


def test_only_trends_with_something_to_see_are_drawn() -> None:
    flat = [_series(step, [1.5 + step, 1.5 + step, 1.5 + step]) for step in range(30)]
    moved = _series(-1, [0.30, 0.31, 0.45])
    same_but_untrusted = _series(40, [2.0, 2.0, 2.0], [True, False, True])
    single = _series(41, [3.0])
    assert not worth_drawing(flat[0]) and not worth_drawing(single)
    assert worth_drawing(moved) and worth_drawing(same_but_untrusted)
    moving, folded = split([*flat, moved, same_but_untrusted, single])
    assert moving == [moved, same_but_untrusted]
    assert [(f.metric, f.steps_text(), f.runs) for f in folded] == [
        ("train/grad_norm", "31 steps (0\u201341)", 3)]

    r = build_report(project="p", config=config(), registrations=fleet(), now=NOW,
                     history=HistorySection(True, trends=(*flat, moved, same_but_untrusted)))
    html = render_html(r)
    trends = html[html.index('<section id="trends">'):]
    trends = trends[:trends.index("</section>")]
    assert trends.count('aria-label="trend of') == 2  # not 32
    rows = re.findall(r'<table class="flat-trends">.*?<tbody>(.*?)</tbody>', trends, re.S)
    assert len(rows) == 1 and rows[0].count("<tr>") == 1 and "30 steps (0\u201329)" in rows[0]
    for out in (render_text(r, width=160), render_markdown(r).replace("\\", "")):
        assert "30 flat trend coordinate(s)" in out
        assert "Metric trends that moved" in out and "0.3 \u2026 0.45" in out


def test_every_trend_flat_draws_no_chart_and_no_legend() -> None:
    r = build_report(project="p", config=config(), registrations=fleet(), now=NOW,
                     history=HistorySection(True, trends=(_series(0, [1.0, 1.0]),)))
    html = render_html(r)
    assert 'aria-label="trend of' not in html and "trusted run</span>" not in html
    assert 'id="flat-trends"' in html


def _tf(*args: str, cwd: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "testfleet.cli.main", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_coverage_hole_is_said_once_in_every_format(example_project: Path) -> None:
    """The example has two holes (stage and backend). The plan's warnings and the check
    rules each restate them; the report says each once, in its holes section."""
    _tf("plan", "--cadence", "nightly", "--format", "json", "--output", "plan.json",
        cwd=example_project)
    plan_text = (example_project / "plan.json").read_text(encoding="utf-8")
    assert "coverage hole: stage" in plan_text and "no enabled coverage at all" in plan_text
    outs = {f: _tf("report", "--plan", "plan.json", "--format", f, "--width", "160",
                   cwd=example_project) if f == "text" else
            _tf("report", "--plan", "plan.json", "--format", f, cwd=example_project)
            for f in ("text", "markdown", "html")}
    for name, out in outs.items():
        flat = " ".join(out.replace("│", " ").split()).replace("\\", "")
        assert "coverage hole: " not in flat, name  # neither the plan's nor the rule's text
        assert "no enabled coverage at all" not in flat, name
        assert flat.count("1 registration that would run is held back") == 2, name  # two holes
        # the dormant reason: in the hole and in the dormant stage's own entry, nowhere else
        assert flat.count("restore when #2230") == 2, name
    # the check command still reports them: only the report de-duplicates
    assert "coverage-hole" in _tf("check", cwd=example_project)


def _first_column_cells(table: str) -> list[list[str]]:
    """The first column of a rich table, one list of fragments per row."""
    rows: list[list[str]] = []
    for line in table.splitlines():
        if not line.startswith("│"):
            continue
        cell = line.split("│")[1].strip()
        if cell.startswith("tests/"):
            rows.append([cell])
        elif cell and rows:
            rows[-1].append(cell)
    return rows


@pytest.mark.parametrize("width", [120, 100])
def test_text_paths_break_only_after_a_slash(example_project: Path, width: int) -> None:
    out = _tf("report", "--width", str(width), cwd=example_project)
    assert max(len(line) for line in out.splitlines()) <= width
    ledger = out[out.index("Disabled ledger"):]
    ledger = ledger[:ledger.index("\n\n")]
    rows = _first_column_cells(ledger)
    assert len(rows) == 10
    for fragments in rows:
        path = [f for f in fragments if "·" not in f]  # the backend · suite line follows
        assert all(f.endswith("/") for f in path[:-1]), fragments
        assert re.fullmatch(r"tests/[\w/.]+\.py:\d+", "".join(path)), fragments
