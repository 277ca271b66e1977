"""#27 S1: `testfleet check` warns about any workflow that lets a fork choose its runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import run_cli
from testfleet.config import load_project
from testfleet.integrations.github_trusted import render_trusted_workflow
from testfleet.integrations.github_workflow import render_workflow
from testfleet.integrations.workflow_audit import audit_workflow

#: The shape testfleet generated before #27: planned by the PR's own action, runner from it.
OLD_DESIGN = """\
on:
  pull_request:
    types: [opened, synchronize]
jobs:
  plan:
    runs-on: ubuntu-latest
    outputs:
      stages: ${{ steps.plan.outputs.stages }}
    steps:
      - uses: actions/checkout@v4
      - id: plan
        uses: ./.github/actions/testfleet
        with:
          command: plan
  gpu:
    needs: [plan]
    strategy:
      matrix: ${{ fromJSON(needs.plan.outputs.stages)['gpu'].matrix }}
    runs-on: ${{ matrix.runs_on }}
    steps:
      - run: echo hi
"""


def test_the_old_generated_design_is_flagged_naming_file_job_and_line() -> None:
    findings = audit_workflow(OLD_DESIGN, ".github/workflows/ci.yml")
    assert [(f.code, f.file, f.line) for f in findings] == [
        ("fork-chosen-runner", ".github/workflows/ci.yml", 19)]
    assert "job gpu" in findings[0].message and "job plan" in findings[0].message
    assert "./.github/actions/testfleet" in findings[0].message
    # a plan made by a script from the PR's checkout is the same thing
    scripted = OLD_DESIGN.replace("        uses: ./.github/actions/testfleet\n        with:\n"
                                  "          command: plan\n", "        run: python plan.py\n")
    assert [f.code for f in audit_workflow(scripted, "x.yml")] == ["fork-chosen-runner"]
    # on push only, nobody but the repository's writers edits it
    assert audit_workflow(OLD_DESIGN.replace("pull_request:", "push:"), "x.yml") == []


SELF_HOSTED = """\
on: [pull_request, push]
jobs:
  h200:
    runs-on: [self-hosted, h200]
    steps: [{run: nvidia-smi}]
  grouped:
    runs-on: {group: gpus}
    steps: [{run: nvidia-smi}]
  hosted:
    runs-on: ubuntu-latest
    steps: [{run: pytest}]
"""


def test_a_self_hosted_job_on_pull_request_is_flagged_unless_kept_from_prs() -> None:
    findings = audit_workflow(SELF_HOSTED, "w.yml")
    assert [(f.code, f.line) for f in findings] == [("fork-self-hosted", 4),
                                                     ("fork-self-hosted", 7)]
    assert "self-hosted, h200" in findings[0].message and "group:gpus" in findings[1].message
    guarded = SELF_HOSTED.replace("    runs-on: [self-hosted, h200]\n",
                                  "    if: github.event_name != 'pull_request'\n"
                                  "    runs-on: [self-hosted, h200]\n")
    assert [f.line for f in audit_workflow(guarded, "w.yml")] == [8]


PWN = """\
on:
  pull_request_target:
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: make test
"""


@pytest.mark.parametrize(("text", "codes"), [
    (PWN, ["fork-executed-checkout"]),
    # checked out as data into a path of its own, nothing run from it: fine
    (PWN.replace("          ref:", "          path: pr\n          ref:"), []),
    # ...unless a local action from that path runs
    (PWN.replace("          ref:", "          path: pr\n          ref:").replace(
        "      - run: make test\n", "      - uses: ./pr/.github/actions/x\n"),
     ["fork-executed-checkout"]),
    (PWN.replace("          ref:", "          path: pr\n          ref:").replace(
        "      - run: make test\n", "      - run: make test\n        working-directory: pr\n"),
     ["fork-executed-checkout"]),
])
def test_pull_request_target_running_the_pull_request_is_flagged(text: str,
                                                                 codes: list[str]) -> None:
    assert [f.code for f in audit_workflow(text, "t.yml")] == codes


def test_the_generated_workflows_have_no_finding(example_project: Path) -> None:
    config = load_project(example_project).config
    trusted = render_trusted_workflow(config)
    assert trusted is not None
    assert audit_workflow(render_workflow(config), "testfleet.yml") == []
    assert audit_workflow(trusted, "testfleet-trusted.yml") == []


def test_check_reports_it_on_the_workflow_file(example_project: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    subprocess.run(["git", "init", "-q", str(example_project)], check=True)
    workflows = example_project / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "gpu.yml").write_text(OLD_DESIGN)
    code, out, _ = run_cli(capsys, "-C", str(example_project), "check", "--format", "json",
                           "--no-cache")
    assert code == 0  # a warning
    assert '"code": "fork-chosen-runner"' in out and '"file": ".github/workflows/gpu.yml"' in out
    assert '"line": 19' in out
    code, _, _ = run_cli(capsys, "-C", str(example_project), "check", "--strict", "--no-cache")
    assert code == 1
    (workflows / "gpu.yml").write_text("on: [pull_request\n")
    code, out, _ = run_cli(capsys, "-C", str(example_project), "check", "--format", "json",
                           "--no-cache")
    assert code == 0 and '"code": "workflow-unreadable"' in out
