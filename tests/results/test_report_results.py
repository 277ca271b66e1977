"""The report's results section in every format, from real runs; and its negatives."""

from __future__ import annotations

import json
import re

from .conftest import as_json, cli


def test_results_section_in_every_format(fleet) -> None:
    root = fleet(runs=4, split="103")
    data = as_json(cli(root, "report", "--format", "json"))["results"]
    assert data["available"] and data["runs"] == 20
    assert data["stages"] == [{"stage": "s-py", "files": 4, "runs": 16, "passes": 11,
                               "pass_rate": 0.6875, "last_outcome": "FAILED",
                               "last_run_id": "104"}]
    failing = data["failing"]
    assert [(f["file"], f["streak"], f["first_commit"], f["complete"]) for f in failing] == [
        ("tests/test_broken.py", 4, "c" * 40, False)]
    assert {f["file"]: f["strip"] for f in data["files"]}["tests/test_split.py"] == "PPFP"
    assert {(v["file"], v["state"], v["quarantined"]) for v in data["flaky"]} == {
        ("tests/test_broken.py", "broken", False), ("tests/test_flip.py", "flaky", True),
        ("tests/test_split.py", "flaky", True)}

    md = cli(root, "report", "--format", "markdown").stdout
    assert "### Results" in md and "`PPFP`" in md
    # #26: "Failing now" is the report's first section, before the results
    assert md.index("### ✖ Failing now (1 file in 1 stage, 1 broken)") < md.index("### Results")
    assert "flaky \\(quarantined\\)" in md and "≥4 runs since" in md

    text = cli(root, "report", "--format", "text", "--width", "200").stdout
    assert "Results per stage" in text and "69% (11/16)" in text
    assert text.index("FAILING NOW (1 file in 1 stage, 1 broken)") < text.index("Results per stage")

    html = cli(root, "report", "--format", "html").stdout
    section = html[html.index('<section id="results">'):]
    section = section[:section.index("</section>")]
    assert '<a href="#results">results</a>' in html
    assert section.count('<svg class="strip"') == 4 and "<script" not in html
    # each run is one cell with a tooltip, linked to its CI run
    assert section.count('class="run passed"') == 7 and section.count('class="run flaky"') == 4
    assert section.count('class="run failed"') == 5
    assert 'href="https://github.com/octo/fleet/actions/runs/103"' in section
    assert re.search(r"<title>FAILED \d{4}-\d\d-\d\d \d\d:\d\d cccccccccc: exit status 1</title>",
                     section)


def test_no_results_and_no_history_are_notes_not_errors(fleet) -> None:
    root = fleet(runs=0)
    data = as_json(cli(root, "report", "--format", "json"))
    assert data["results"]["available"] is False and "no results" in data["results"]["note"]
    html = cli(root, "report", "--format", "html").stdout
    assert '<section id="results"><h2>Results</h2><p class="note">' in html
    assert '<svg class="strip"' not in html
    off = json.loads(cli(root, "report", "--format", "json", "--no-history").stdout)
    assert off["results"] is None
