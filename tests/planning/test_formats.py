"""Emitters: holes in every format, escaping of untrusted text, GitHub output injection."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from support import github_output_dict
from testfleet.integrations.plan_formats import (
    FORMATS,
    github_output_text,
    md,
    render_markdown,
    render_table,
)
from testfleet.planning import make_plan
from testfleet.planning.model import Plan, StageSummary, seal
from testfleet.planning.planner import PlanInvariantError, check_invariants
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest

from .conftest import make_config, make_project, sample_registrations


def dormant_plan(env: dict[str, str] | None = None) -> Plan:
    config = make_config()
    stages = {k: v.model_dump() for k, v in config.stages.items()}
    stages["gpu-mi300x"]["disabled"] = "runners down | see [#12](http://evil) <b>x</b>"
    stages["stage-a-cpu"]["env"] = env or {}
    return make_plan(make_project(make_config(stages=stages)), sample_registrations(),
                     PlanRequest(Trigger(event="pull_request", labels=("run-ci-all",))))


def test_holes_appear_in_every_format() -> None:
    plan = dormant_plan()
    assert {"table", "json", "markdown", "github", "buildkite"} <= set(FORMATS)
    for name in sorted(FORMATS):  # a format added later is held to the same rule
        assert "gpu-mi300x" in FORMATS[name](plan), name
    assert "coverage hole" in render_table(plan)
    assert "Coverage holes" in render_markdown(plan)
    pipeline = json.loads(FORMATS["buildkite"](plan))
    assert pipeline["env"]["TESTFLEET_COVERAGE_HOLES"] == "gpu-mi300x"
    notice = pipeline["steps"][0]
    assert "buildkite-agent annotate" in " ".join(notice["commands"])
    assert "gpu-mi300x" in notice["env"]["TESTFLEET_ANNOTATION"]


# -- sharding figures (issue 4: makespan, bound, ratio, history share) --------------


def _summary(name: str, **figures: Any) -> StageSummary:
    return StageSummary(name=name, backend="cuda", status="scheduled", reason="", wave=0,
                        counts={"registered": 5, "scheduled": 5}, **figures)


def figures_plan() -> Plan:
    """Hand-set figures, so the expected cells are known exactly."""
    return seal(Plan(
        policy={}, jobs=(), skipped=(), warnings=(),
        stages=(
            _summary("gpu-long", shards=3, makespan=3612.0, lower_bound=3600.5, ratio=1.0032,
                     history_share=0.4),
            _summary("cpu-short", shards=2, makespan=12.0, lower_bound=10.0, ratio=1.2,
                     history_share=0.004),
            _summary("gpu-all-history", shards=1, makespan=600.0, lower_bound=600.0, ratio=1.0,
                     history_share=0.996),
            StageSummary(name="gpu-off", backend="rocm", status="dormant", reason="down",
                         wave=0, counts={"registered": 1}, hole=True),
        ),
    ))


def _sharding_rows(text: str, start: str) -> dict[str, list[str]]:
    """The sharding table's rows by stage, from the table or Markdown text."""
    section = text.split(start, 1)[1]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines()[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|" if "|" in line else None)]
        if not cells or cells[0] in ("", "stage") or cells[0].startswith("-"):
            continue
        if not cells[0].startswith(("gpu-", "cpu-", "stage-")):
            break
        rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize(("render", "start"), [
    (lambda p: render_table(p, width=80), "sharding"),
    (render_markdown, "### Sharding"),
])
def test_sharding_figures_are_shown(render: Any, start: str) -> None:
    text = render(figures_plan())
    rows = _sharding_rows(text, start)
    # shards, makespan min, bound min, ratio, history share
    assert rows["gpu-long"] == ["3", "60.2", "60.0", "1.003", "40%"]
    assert rows["cpu-short"] == ["2", "0.20", "0.17", "1.200", "<1%"]
    assert rows["gpu-all-history"] == ["1", "10.0", "10.0", "1.000", ">99%"]
    assert "gpu-off" not in rows  # nothing split: no made-up 0.0 or 1.000
    assert "max(longest test, total / shards)" in text
    for header in ("makespan min", "bound min", "ratio", "history"):
        assert header in text


def test_sharding_figures_follow_the_plan() -> None:
    """On a real plan, every scheduled stage has a row with its own figures."""
    est = {("tests/fast/test_a.py", "stage-a-cpu"): (50.0, "history"),
           ("tests/e2e/test_meg.py", "gpu-h200"): (1500.0, "history")}
    plan = make_plan(make_project(), sample_registrations(),
                     PlanRequest(Trigger(event="pull_request", labels=("run-ci-all",))), est)
    for render, start in ((render_table, "sharding"), (render_markdown, "### Sharding")):
        rows = _sharding_rows(render(plan), start)
        scheduled = [s for s in plan.stages if s.shards]
        assert set(rows) == {s.name for s in scheduled}
        for s in scheduled:
            assert rows[s.name][3] == f"{s.ratio:.3f}"
            assert rows[s.name][4] == f"{s.history_share * 100:.0f}%"
        assert rows["stage-a-cpu"][4] == "33%"


def test_markdown_escapes_untrusted_text() -> None:
    text = render_markdown(dormant_plan())
    assert "<b>" not in text and "[#12](http://evil)" not in text
    assert md("a|b\nc <x> `y` ${{ z }}") == r"a\|b c \<x\> \`y\` \$\{\{ z \}\}"


def test_table_does_not_interpret_rich_markup() -> None:
    plan = dormant_plan()
    text = render_table(plan)
    assert "[#12](http://evil)" in text  # shown literally, not swallowed as markup


def test_github_heredoc_cannot_be_escaped() -> None:
    outputs = {"matrix": '{"a":"x\\nhas_jobs=false"}', "evil": "line1\nhas_jobs=false\nEOF",
               "has_jobs": "true"}
    text = github_output_text(outputs)
    assert github_output_dict(text) == outputs
    # env from config with a newline stays inside the matrix value
    plan = dormant_plan(env={"X": "a\nhas_jobs=false"})
    parsed = github_output_dict(FORMATS["github"](plan))
    assert parsed["has_jobs"] == "true"
    entry = json.loads(parsed["matrix"])["include"][0]
    assert entry["env"] == {"X": "a\nhas_jobs=false"}


def test_delimiters_are_random() -> None:
    a = github_output_text({"m": "x y"})
    b = github_output_text({"m": "x y"})
    assert a != b and a.startswith("m<<ghadelimiter_")


def test_matrix_entries_have_no_file_lists() -> None:
    plan = dormant_plan()
    outputs = github_output_dict(FORMATS["github"](plan))
    entries = json.loads(outputs["matrix"])["include"]
    assert entries and all("tests" not in e and e["n_tests"] >= 1 for e in entries)
    waves = int(outputs["waves"])
    per_wave = [json.loads(outputs[f"matrix_{w}"])["include"] for w in range(waves)]
    assert sum(len(w) for w in per_wave) == len(entries)
    for w in range(waves):
        assert outputs[f"has_jobs_{w}"] == ("true" if per_wave[w] else "false")


def test_invariant_violations_are_caught() -> None:
    regs = sample_registrations()
    plan = make_plan(make_project(), regs, PlanRequest(Trigger(event="schedule",
                                                               schedule="0 15 * * 6")))
    check_invariants(plan, regs)
    with pytest.raises(PlanInvariantError, match="not accounted exactly once"):
        check_invariants(replace(plan, jobs=plan.jobs[1:]), regs)
    with pytest.raises(PlanInvariantError, match="not accounted exactly once"):
        check_invariants(replace(plan, skipped=(*plan.skipped, plan.skipped[0])), regs)
    with pytest.raises(PlanInvariantError, match="has no tests"):
        check_invariants(replace(plan, jobs=(replace(plan.jobs[0], tests=()), *plan.jobs[1:])),
                         regs)
    with pytest.raises(PlanInvariantError, match="coverage hole"):
        hole = replace(plan.stages[0], hole=True)
        check_invariants(replace(plan, stages=(hole, *plan.stages[1:]), warnings=()), regs)
