"""The report tells the truth about failures (#26 item 4), in every format.

A stage whose file failed 7 runs in a row is *broken*, one whose last run failed is
*failing*: the headline, the cards, the coverage matrix and the JSON say so, with the
stage's last run (when, and its CI run link); "Failing now" comes right after the
headline; the metric-gate table reads the same verdicts as "Failing now"; the title is
the project's name, not its folder's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import truth_fleet as fleet

from testfleet.app.report import gather
from testfleet.config import load_project
from testfleet.report.model import Report
from testfleet.report.render_html import render_html
from testfleet.report.render_json import render_json
from testfleet.report.render_markdown import render_markdown
from testfleet.report.render_text import render_text

NOW = dt.datetime(2026, 5, 8, tzinfo=dt.timezone.utc)
BROKEN_STAGE, BROKEN_FILE = fleet.BROKEN
FAILING_STAGE, FAILING_FILE = fleet.FAILING
GATED_STAGE, GATED_FILE = fleet.GATED
RUN_107 = "https://github.com/octo/gpu-fleet/actions/runs/107"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    root = fleet.build(tmp_path_factory.mktemp("tmpabc123") / "tmp.Xy7Qk2")
    return gather(load_project(root), now=NOW)


def _matrix_rows(html: str) -> dict[str, str]:
    matrix = html[html.index('<section id="matrix"'):]
    matrix = matrix[:matrix.index("</section>")]
    return {m.group(1): m.group(0) for m in re.finditer(
        r'<tr[^>]*><td class="mono nw stage">([^<]+)</td>.*?</tr>', matrix, re.S)}


def test_health_of_each_stage(report: Report) -> None:
    health = {h.stage: h for h in report.health}
    assert health[BROKEN_STAGE].state == "broken"
    assert health[BROKEN_STAGE].streak == 7 and health[BROKEN_STAGE].file == BROKEN_FILE
    assert health[FAILING_STAGE].state == "failing" and health[FAILING_STAGE].streak == 1
    assert health[GATED_STAGE].state == "failing"
    assert health["stage-c-4-gpu-h200"].state == "passing"
    assert fleet.DORMANT not in health  # nothing recorded: no health, not "passing"
    last = health[BROKEN_STAGE].last
    assert last.outcome == "FAILED" and last.ci_run_id == "107" and last.url == RUN_107


def test_headline_names_the_broken_and_failing_stages_first(report: Report) -> None:
    headline = report.headline()
    assert headline.startswith("3 stages failing"), headline
    # every run read failed: "≥", as "Failing now" says (older history may be pruned)
    assert f"{BROKEN_STAGE} broken (≥7 runs in a row)" in headline
    assert headline.index("failing") < headline.index("registrations can run")


def test_html_cards_and_matrix_show_failing_stages_red(report: Report) -> None:
    html = render_html(report)
    card = re.search(r'<div class="kpi (\w+)" id="kpi-failing"><div class="n">(\d+)</div>'
                     r'<div class="l">([^<]+)</div>', html)
    assert card and card.group(1) == "bad" and card.group(2) == "3", card
    assert "1 broken" in card.group(3)
    rows = _matrix_rows(html)
    assert len(rows) == 12
    broken = rows[BROKEN_STAGE]
    assert '<span class="pill broken"' in broken and ">broken<" in broken
    assert "pill active" not in broken and "7 runs in a row" in broken
    assert f'href="{RUN_107}"' in broken and "2026-05-07" in broken
    assert '<span class="pill failing"' in rows[FAILING_STAGE]
    assert '<span class="pill failing"' in rows[GATED_STAGE]
    assert "pill active" in rows["stage-c-4-gpu-h200"]
    assert "passed" in rows["stage-c-4-gpu-h200"].lower()
    assert "pill dormant" in rows[fleet.DORMANT]


def test_failing_now_is_the_first_section_after_the_headline(report: Report) -> None:
    html = render_html(report)
    body = html[html.index('<p class="headline'):]
    sections = re.findall(r'<section[^>]* id="([\w-]+)"', body)
    assert sections[0] == "failing", sections
    failing = body[body.index('<section class="failing-now" id="failing">'):]
    failing = failing[:failing.index("</section>")]
    assert BROKEN_FILE.split("/")[-1] in failing and FAILING_FILE.split("/")[-1] in failing
    assert f'href="{RUN_107}"' in failing
    # the results section no longer repeats the table
    results = body[body.index('<section id="results">'):]
    assert "results-failing" not in results

    text = render_text(report, width=160)
    assert text.index("FAILING NOW") < text.index("COVERAGE HOLES") < text.index("Coverage matrix")
    assert text.index(report.headline()[:40]) < text.index("FAILING NOW")
    md = render_markdown(report)
    assert md.index("Failing now") < md.index("Coverage holes") < md.index("Coverage matrix")


def test_text_and_markdown_matrices_say_broken_and_failing(report: Report) -> None:
    text = render_text(report, width=200)
    line = next(ln for ln in text.splitlines() if BROKEN_STAGE in ln and "cuda" in ln)
    assert "broken" in line and "active" not in line, line
    assert "2026-05-07" in line
    md = render_markdown(report)
    row = next(ln for ln in md.splitlines() if ln.startswith(f"| `{BROKEN_STAGE}`"))
    assert "broken" in row and f"]({RUN_107})" in row, row
    row = next(ln for ln in md.splitlines() if ln.startswith(f"| `{FAILING_STAGE}`"))
    assert "failing" in row


def test_json_health_and_schema(report: Report) -> None:
    from importlib import resources

    import jsonschema

    data = json.loads(render_json(report))
    schema = json.loads(resources.files("testfleet.report").joinpath(
        "schema/report-1.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)
    stages = {s["name"]: s for s in data["stages"]}
    health = stages[BROKEN_STAGE]["health"]
    assert health["state"] == "broken" and health["streak"] == 7
    assert health["last_run"]["url"] == RUN_107 and health["last_run"]["outcome"] == "FAILED"
    assert stages[fleet.DORMANT]["health"] is None
    assert data["failing_stages"] == sorted([BROKEN_STAGE, FAILING_STAGE, GATED_STAGE])
    assert data["broken_stages"] == [BROKEN_STAGE]
    bad = json.loads(render_json(report))
    bad["stages"][0]["health"] = {"state": "green"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_gate_table_and_failing_now_read_the_same_verdict(report: Report) -> None:
    """The gated file failed by its enforced gate in run 107 (a run that wrote no baseline):
    the gate table must say FAIL for run 107, not the PASS of the last stored baseline run."""
    [gate] = [g for g in report.history.gates if g.file == GATED_FILE]
    assert (gate.last_verdict, gate.last_mode, gate.last_source) == ("FAIL", "enforced", "result")
    assert gate.last_ci_run_id == "107" and gate.last_url == RUN_107
    assert gate.runs == 6  # baseline runs stored: still the metric store's count
    assert report.results is not None
    [failing] = [f for f in report.results.failing if f.file == GATED_FILE]
    assert failing.last.ci_run_id == gate.last_ci_run_id and failing.last.gate_status == "FAIL"
    data = json.loads(render_json(report))
    [row] = data["history"]["gates"]
    assert row["last_verdict"] == "FAIL" and row["last_mode"] == "enforced"
    assert "FAIL" in render_text(report, width=200).split("Metric gates")[1][:2000]
    html = render_html(report)
    gates = html[html.index('<section id="gates">'):]
    assert '<span class="pill bad">FAIL</span>' in gates[:gates.index("</section>")]


def _tf(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "TESTFLEET_"))}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "testfleet.cli.main", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=300, env=full)


def test_demo_gate_table_agrees_with_failing_now(example_project: Path) -> None:
    """The demo's sequence for real: two nightly baseline runs, a shadow drift, then the
    drift with enforcement on, which fails the file. The gate row and "Failing now" agree."""
    loss = "tests/unit/test_train_curve_loss.py"
    for _ in range(2):
        r = _tf(example_project, "run", "--file", loss, "--cadence", "nightly", "--display", "plain")
        assert r.returncode == 0, r.stdout + r.stderr
    r = _tf(example_project, "run", "--file", loss, "--display", "plain",
            env={"FLEET_DRIFT": "0.05"})
    assert r.returncode == 0, r.stdout + r.stderr  # shadow: reported, not failed
    r = _tf(example_project, "run", "--file", loss, "--display", "plain",
            env={"FLEET_DRIFT": "0.05", "TESTFLEET_GATE_ENFORCE": "1"})
    assert r.returncode == 1, r.stdout + r.stderr
    r = _tf(example_project, "report", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    [failing] = [f for f in data["results"]["failing"] if f["file"] == loss]
    assert "metric gate failed" in failing["last_reason"]
    rows = [g for g in data["history"]["gates"] if g["file"] == loss]
    assert rows and all(g["last_verdict"] == "FAIL" and g["last_mode"] == "enforced"
                        for g in rows), rows
    assert {s["name"]: s["health"]["state"] for s in data["stages"]
            if s["health"]}["stage-b-cpu"] == "failing"
    assert data["project"] == "fleet-example"


# -- the project's name -------------------------------------------------------------


@pytest.mark.parametrize(("files", "expected"), [
    ({"pyproject.toml": '[project]\nname = "gpu-fleet"\n\n[tool.testfleet]\nroots = ["tests"]\n'},
     "gpu-fleet"),
    ({"pyproject.toml": '[tool.poetry]\nname = "poetry-fleet"\n\n[tool.testfleet]\n'
                        'roots = ["tests"]\n'}, "poetry-fleet"),
    ({"testfleet.toml": 'roots = ["tests"]\n',
      "pyproject.toml": '[project]\nname = "beside"\n'}, "beside"),
    ({"testfleet.toml": 'roots = ["tests"]\n'}, "tmp.Xy7Qk2"),  # nothing better: the folder
    ({"testfleet.toml": 'roots = ["tests"]\n', "pyproject.toml": "not [valid toml"},
     "tmp.Xy7Qk2"),
    ({"pyproject.toml": '[project]\nname = ""\n\n[tool.testfleet]\nroots = ["tests"]\n'},
     "tmp.Xy7Qk2"),
])
def test_project_name(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    from testfleet.app.project_name import project_name

    root = tmp_path / "tmp.Xy7Qk2"
    (root / "tests").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    config = root / ("testfleet.toml" if "testfleet.toml" in files else "pyproject.toml")
    project = load_project(root, config)
    assert project_name(project) == expected
    html = render_html(gather(project, now=NOW, history=False))
    assert f"<title>{expected} · testfleet report</title>" in html
    assert f"<h1>{expected}" in html


def test_the_report_title_is_the_project_name_not_the_temp_folder(report: Report) -> None:
    assert report.project == "gpu-fleet"
    html = render_html(report)
    assert "<title>gpu-fleet · testfleet report</title>" in html
    assert "tmp.Xy7Qk2" not in html and "tmpabc123" not in html
    assert render_markdown(report).startswith("## testfleet report — gpu-fleet")


def test_a_hostile_project_name_is_escaped(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "<script>x</script> @octo/team | **b**\\n# h"\n\n[tool.testfleet]\n'
        'roots = ["tests"]\n', encoding="utf-8")
    report = gather(load_project(root), now=NOW, history=False)
    html = render_html(report)
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    md = render_markdown(report).splitlines()[0]
    assert "<script>" not in md and "@octo" not in md.replace("@\u200b", "") and "\\|" in md
    assert report.project == "<script>x</script> @octo/team | **b** # h"  # one line


# -- section order ------------------------------------------------------------------


def test_every_format_follows_the_one_section_order(report: Report) -> None:
    from testfleet.report import sections

    order = sections.ORDER
    assert order[:4] == ("failing", "incidents", "holes", "dormant")
    assert order.index("matrix") < order.index("ledger")
    html = render_html(report)
    ids = [i for i in re.findall(r'<section[^>]* id="([\w-]+)"', html) if i in order]
    assert ids == sorted(ids, key=order.index), ids
    nav = re.findall(r'<a href="#([\w-]+)">', html[html.index('<nav class="toc">'):
                                                    html.index("</nav>")])
    assert nav == [i for i in order if f'id="{i}"' in html], nav
