"""A quarantined file counts toward coverage as at risk, never as healthy (#14): in the
plan's stage counts, in the run summary, and in the report's coverage matrix (every
format). Real runs: ``test_flip`` passes only on retry and ``test_split`` failed once on a
commit it passed on, so the plan quarantines both; ``test_broken`` fails every run and is
broken, not at risk."""

from __future__ import annotations

import json

from .conftest import as_json, cli


def test_quarantined_files_are_at_risk_in_plan_summary_and_report(fleet) -> None:
    root = fleet(runs=4, split="103")

    plan = as_json(cli(root, "plan", "--stage", "s-py", "--format", "json"))
    [stage] = [s for s in plan["stages"] if s["name"] == "s-py"]
    assert stage["counts"]["scheduled"] == 4 and stage["counts"]["quarantined"] == 2
    assert "4/4 (2 at risk)" in cli(root, "plan", "--stage", "s-py").stdout
    assert "4 / 4 (2 at risk)" in cli(root, "plan", "--stage", "s-py", "--format",
                                      "markdown").stdout

    report = as_json(cli(root, "report", "--format", "json"))
    [row] = [s for s in report["stages"] if s["name"] == "s-py"]
    assert row["counts"]["at-risk"] == 2 and row["counts"]["enabled"] == 2  # ok and broken
    assert row["counts"]["total"] == 4 and row["counts"]["active"] == 4
    assert report["totals"]["at-risk"] == 2
    assert {b["name"]: b["counts"]["at-risk"] for b in report["backends"]} == {"cpu": 2}
    text = cli(root, "report", "--width", "160").stdout
    matrix = text[text.index("Coverage matrix"):]
    s_py = next(line for line in matrix.splitlines() if line.strip().startswith("s-py"))
    # the counts, in the matrix's column order: enabled, label-gated, nightly-only, at-risk,
    # disabled, total (the status and last-run cells before them hold no bare number)
    counts = [t for t in s_py.split() if t.isdigit()]
    assert counts == ["2", "0", "0", "2", "0", "4"], s_py
    md = cli(root, "report", "--format", "markdown").stdout
    assert "| at-risk |" in md
    html = cli(root, "report", "--format", "html").stdout
    assert '<th class="num">at-risk</th>' in html and "at-risk: 2" in html

    run = cli(root, "run", "--stage", "s-py", "--continue-on-error", "--display", "plain",
              env={"GITHUB_RUN_ID": "105", "GITHUB_SHA": "d" * 40,
                   "GITHUB_STEP_SUMMARY": str(root / "summary.md")})
    assert run.returncode == 1  # test_broken still fails the job
    summary = (root / "summary.md").read_text(encoding="utf-8")
    assert "2 quarantined (at risk, not counted as healthy)" in summary
    # test_split passed twice in a row now (restore_after = 2): only test_flip stays at risk
    after = as_json(cli(root, "report", "--format", "json"))
    assert [s["counts"]["at-risk"] for s in after["stages"] if s["name"] == "s-py"] == [1]


def test_without_quarantine_nothing_is_at_risk(fleet) -> None:
    root = fleet(runs=3, split="")
    config = (root / "testfleet.toml").read_text().replace("quarantine = true", "quarantine = false")
    (root / "testfleet.toml").write_text(config)
    plan = as_json(cli(root, "plan", "--stage", "s-py", "--format", "json"))
    assert [s["counts"]["quarantined"] for s in plan["stages"] if s["name"] == "s-py"] == [0]
    report = json.loads(cli(root, "report", "--format", "json").stdout)
    [row] = [s for s in report["stages"] if s["name"] == "s-py"]
    assert row["counts"]["at-risk"] == 0 and row["counts"]["enabled"] == 4
