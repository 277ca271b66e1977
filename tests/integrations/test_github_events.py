"""`testfleet plan --github` on recorded, real-shape GitHub event payloads.

Each fixture in tests/fixtures/github_events is a payload as GitHub writes it to
GITHUB_EVENT_PATH (trimmed of fields planning never reads, but every field it
does read sits where GitHub puts it). cases.json names the GITHUB_EVENT_NAME each
one arrives with.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import parse_github_output, run_cli

from .conftest import CASES, EVENTS_DIR, MI300X

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# fixture -> (extra CLI args, expected policy fields, stages that must have jobs)
EXPECT: dict[str, tuple[list[str], dict[str, Any], set[str]]] = {
    "pr_same_repo.json": ([], {"event": "pull_request", "cadence": "regular", "fork": False,
                               "include_labels": ["megatron"], "bypass_fastfail": False},
                          {"stage-a-cpu", "stage-b-cpu", "stage-c-4-gpu-h200"}),
    "pr_fork_unlabeled.json": ([], {"event": "pull_request", "fork": True, "authorized": False,
                                    "include_labels": []}, {"stage-a-cpu", "stage-b-cpu"}),
    "pr_fork_labeled.json": ([], {"event": "pull_request", "fork": True, "authorized": True,
                                  "authorized_by": "run-ci-amd", "include_labels": ["amd"]},
                             {"stage-a-cpu", "stage-b-cpu"}),
    "pr_labeled.json": ([], {"event": "pull_request", "fork": False, "include_labels": ["fsdp"]},
                        {"stage-c-4-gpu-h200"}),
    "schedule_nightly.json": ([], {"event": "schedule", "cadence": "nightly",
                                   "bypass_fastfail": True, "write_baseline": True},
                              {"stage-c-4-gpu-h200", "stage-c-8-gpu-h100"}),
    "schedule_weekly.json": ([], {"event": "schedule", "cadence": "weekly",
                                  "bypass_fastfail": True}, {"stage-c-8-gpu-h100"}),
    "workflow_dispatch.json": ([], {"event": "workflow_dispatch", "cadence": "nightly"},
                               {"stage-c-4-gpu-h200"}),
    "workflow_call_push.json": (["--cadence", "release"],
                                {"event": "push", "cadence": "release", "write_baseline": False},
                                {"stage-c-4-gpu-h200", "stage-c-8-gpu-h100"}),
    "pr_hostile.json": ([], {"event": "pull_request", "fork": True,
                             "include_labels": ["megatron"]}, {"stage-a-cpu"}),
}


def test_every_fixture_has_an_expectation_and_a_real_shape() -> None:
    files = {p.name for p in EVENTS_DIR.glob("*.json")} - {"cases.json"}
    assert files == set(CASES) == set(EXPECT)
    for name, meta in CASES.items():
        payload = json.loads((EVENTS_DIR / name).read_text())
        assert "repository" in payload and "full_name" in payload["repository"]
        if meta["event_name"] == "pull_request":
            pr = payload["pull_request"]
            assert payload["number"] == pr["number"]
            for side in ("head", "base"):
                assert {"ref", "sha", "repo", "label"} <= set(pr[side])
            assert all({"id", "name", "color"} <= set(label) for label in pr["labels"])
            assert pr["head"]["repo"]["fork"] == (pr["head"]["repo"]["full_name"]
                                                  != pr["base"]["repo"]["full_name"])
        if payload.get("action") == "labeled":
            assert payload["label"] in payload["pull_request"]["labels"]


def test_a_schedule_fixture_for_each_configured_cron(example_project: Path) -> None:
    config = tomllib.loads((example_project / "pyproject.toml").read_text())
    crons = set(config["tool"]["testfleet"]["policy"]["schedules"])
    recorded = {json.loads((EVENTS_DIR / n).read_text())["schedule"]
                for n, m in CASES.items() if m["event_name"] == "schedule"}
    assert recorded == crons


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_plan_reads_the_recorded_payload(case: str, example_project: Path,
                                         github_env: Callable[[str], dict[str, Path]],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    args, policy, stages = EXPECT[case]
    github_env(case, example_project)
    code, out, err = run_cli(capsys, "-C", str(example_project), "plan", "--github",
                             "--format", "json", *args)
    assert code == 0, err
    plan = json.loads(out)
    for key, value in policy.items():
        assert plan["policy"][key] == value, (key, plan["policy"][key])
    assert stages <= {j["stage"] for j in plan["jobs"]}
    # the dormant stage schedules nothing, whatever the trigger
    assert not [j for j in plan["jobs"] if j["stage"] == MI300X]


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_github_format_outputs_every_wave(case: str, example_project: Path,
                                          github_env: Callable[[str], dict[str, Path]],
                                          capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """What the workflow consumes: one output of each name, matrices per wave whose
    entries are exactly the jobs of the plan file written alongside."""
    args, _, _ = EXPECT[case]
    files = github_env(case, example_project)
    plan_file = tmp_path / "plan.json"
    code, _, err = run_cli(capsys, "-C", str(example_project), "plan", "--github", *args,
                           "--format", "github", "--plan-file", str(plan_file))
    assert code == 0, err
    pairs = parse_github_output(files["output"].read_text())
    names = [n for n, _ in pairs]
    assert len(names) == len(set(names))
    outputs = dict(pairs)
    waves = int(outputs["waves"])
    assert waves == 2  # stage-a-cpu, then everything that needs it
    expected = {"matrix", "has_jobs", "cadence", "bypass_fastfail", "write_baseline", "waves",
                "digest", "coverage_holes"}
    expected |= {f"{k}_{i}" for i in range(waves) for k in ("matrix", "has_jobs")}
    assert expected <= set(outputs)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in outputs)
    plan = json.loads(plan_file.read_text())
    assert outputs["digest"] == plan["digest"]
    seen = []
    for i in range(waves):
        include = json.loads(outputs[f"matrix_{i}"])["include"]
        assert outputs[f"has_jobs_{i}"] == ("true" if include else "false")
        assert all(entry["wave"] == i for entry in include)
        seen += [entry["id"] for entry in include]
    assert sorted(seen) == sorted(j["id"] for j in plan["jobs"])
    # one matrix per stage, read by the stage's job (every configured stage has an entry)
    stages = json.loads(outputs["stages"])
    assert set(stages) == {s["name"] for s in plan["stages"]}
    by_stage = [e["id"] for entry in stages.values() for e in entry["matrix"]["include"]]
    assert sorted(by_stage) == sorted(seen)
    for name, entry in stages.items():
        assert entry["has_jobs"] is bool(entry["matrix"]["include"])
        assert all(e["stage"] == name for e in entry["matrix"]["include"])
    assert outputs["has_jobs"] == ("true" if plan["jobs"] else "false")
