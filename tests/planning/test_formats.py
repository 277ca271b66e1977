"""Emitters: holes in every format, escaping of untrusted text, GitHub output injection."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from testfleet.planning import make_plan
from testfleet.planning.formats import (
    FORMATS,
    github_output_text,
    md,
    render_markdown,
    render_table,
)
from testfleet.planning.model import Plan
from testfleet.planning.planner import PlanInvariantError, check_invariants
from testfleet.planning.request import PlanRequest
from testfleet.policy import Trigger

from .conftest import make_config, make_project, sample_registrations
from .test_cli_plan import parse_github_output


def dormant_plan(env: dict[str, str] | None = None) -> Plan:
    config = make_config()
    stages = {k: v.model_dump() for k, v in config.stages.items()}
    stages["gpu-mi300x"]["disabled"] = "runners down | see [#12](http://evil) <b>x</b>"
    stages["stage-a-cpu"]["env"] = env or {}
    return make_plan(make_project(make_config(stages=stages)), sample_registrations(),
                     PlanRequest(Trigger(event="pull_request", labels=("run-ci-all",))))


def test_holes_appear_in_every_format() -> None:
    plan = dormant_plan()
    for name in ("table", "json", "markdown", "github"):
        assert "gpu-mi300x" in FORMATS[name](plan), name
    assert "coverage hole" in render_table(plan)
    assert "Coverage holes" in render_markdown(plan)


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
    assert parse_github_output(text) == outputs
    # env from config with a newline stays inside the matrix value
    plan = dormant_plan(env={"X": "a\nhas_jobs=false"})
    parsed = parse_github_output(FORMATS["github"](plan))
    assert parsed["has_jobs"] == "true"
    entry = json.loads(parsed["matrix"])["include"][0]
    assert entry["env"] == {"X": "a\nhas_jobs=false"}


def test_delimiters_are_random() -> None:
    a = github_output_text({"m": "x y"})
    b = github_output_text({"m": "x y"})
    assert a != b and a.startswith("m<<ghadelimiter_")


def test_matrix_entries_have_no_file_lists() -> None:
    plan = dormant_plan()
    outputs = parse_github_output(FORMATS["github"](plan))
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
