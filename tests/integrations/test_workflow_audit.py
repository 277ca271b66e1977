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


MILES_CI = Path(__file__).resolve().parents[1] / "fixtures" / "real_trees" / "miles-ci"

#: miles' reusable GPU job (#36 item 3): its caller picks the runner through an input.
CALLED = """\
on:
  workflow_call:
    inputs:
      runs_on: {type: string, required: true}
jobs:
  run:
    runs-on: ${{ fromJSON(inputs.runs_on) }}
    steps:
      - run: make test
"""
CALLER = """\
on: {events}
jobs:
  gpu:
    uses: ./.github/workflows/_gpu.yml
    with:
      runs_on: '{runs_on}'
"""


def _calls(tmp_path: Path, caller: str, called: str = CALLED, **more: str) -> list[tuple[str, int]]:
    """check's findings, as (code, line), for a repository holding ``caller`` (ci.yml), the
    called ``_gpu.yml`` and ``more`` workflows."""
    from testfleet.integrations.workflow_audit import audit_tree

    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    for name, text in {"ci.yml": caller, "_gpu.yml": called, **more}.items():
        (workflows / name).write_text(text)
    return [(f.code, f.line) for f in audit_tree(tmp_path)]


def test_miles_choosing_its_gpu_runners_through_a_reusable_workflow_is_flagged() -> None:
    """#36 item 3: pr-test.yml (pull_request) calls _run-ci.yml with runs_on '["h200",
    "4gpu"]' and pr-test-rocm.yml calls _run-ci-rocm.yml with the MI350s: both warned, at the
    call, naming the called workflow, its job and the runners; the CPU stage on
    ubuntu-latest (the same pattern) is not."""
    from testfleet.integrations.workflow_audit import audit_tree

    found = {(f.file, f.line, f.code): f.message for f in audit_tree(MILES_CI)}
    assert set(found) == {(".github/workflows/pr-test.yml", 24, "fork-self-hosted"),
                          (".github/workflows/pr-test-rocm.yml", 24, "fork-self-hosted")}
    assert found[(".github/workflows/pr-test.yml", 24, "fork-self-hosted")].startswith(
        "job stage-c-4-gpu-h200 calls .github/workflows/_run-ci.yml, whose job run runs on "
        "h200, 4gpu, in a workflow triggered by pull_request")
    assert "runs on self-hosted, amd, mi350, 4gpu" in \
        found[(".github/workflows/pr-test-rocm.yml", 24, "fork-self-hosted")]


@pytest.mark.parametrize(("events", "runs_on", "expected"), [
    ("[pull_request]", '["h200", "4gpu"]', [("fork-self-hosted", 4)]),
    ("[pull_request]", '["self-hosted", "h200"]', [("fork-self-hosted", 4)]),
    # only ever given hosted labels: nothing to say
    ("[pull_request]", '["ubuntu-latest"]', []),
    ("[pull_request]", "ubuntu-22.04", []),
    # no pull request reaches it
    ("[push, schedule]", '["h200", "4gpu"]', []),
    # pull_request_target reads the base's files: the fork cannot edit the call
    ("[pull_request_target]", '["h200", "4gpu"]', []),
])
def test_a_call_is_read_with_the_callers_inputs(tmp_path: Path, events: str, runs_on: str,
                                                expected: list[tuple[str, int]]) -> None:
    assert _calls(tmp_path, CALLER.format(events=events, runs_on=runs_on)) == expected


def test_what_keeps_a_called_job_from_pull_requests_or_hides_its_runner(tmp_path: Path) -> None:
    """The caller's or the called job's if: keeps pull requests out; a runner the caller
    computes at run time is not guessed from the called workflow's default; an input left
    out takes its default; a nested call is followed."""
    caller = CALLER.format(events="[pull_request]", runs_on='["h200"]')
    guard = "    if: github.event_name != 'pull_request'\n"
    assert _calls(tmp_path / "a", caller.replace("    uses:", guard + "    uses:", 1)) == []
    assert _calls(tmp_path / "b", caller, CALLED.replace("    runs-on:", guard + "    runs-on:")) == []
    with_default = CALLED.replace("required: true}", "default: '[\"h200\"]'}")
    computed = caller.replace("'[\"h200\"]'", "${{ needs.pick.outputs.runner }}")
    assert _calls(tmp_path / "c", computed, with_default) == []
    assert _calls(tmp_path / "d", "on: pull_request\njobs:\n  gpu:\n    uses: ./.github/workflows/"
                                  "_gpu.yml\n", with_default) == [("fork-self-hosted", 4)]
    nested = ("on:\n  workflow_call:\n    inputs:\n      runs_on: {type: string}\njobs:\n"
              "  inner:\n    uses: ./.github/workflows/_gpu.yml\n    with:\n"
              "      runs_on: ${{ inputs.runs_on }}\n")
    assert _calls(tmp_path / "e", caller.replace("_gpu.yml", "_outer.yml"),
                  **{"_outer.yml": nested}) == [("fork-self-hosted", 4)]
    # a call out of the repository, or to a file that is not there, says nothing
    outside = caller.replace("./.github/workflows/_gpu.yml", "./../../etc/x.yml")
    assert _calls(tmp_path / "f", outside) == []


def test_a_pull_request_workflow_calling_the_generated_one_has_no_finding(
        example_project: Path, tmp_path: Path) -> None:
    """testfleet.yml keeps its self-hosted jobs from pull requests with its own if:, which
    holds for the caller's event too."""
    text = render_workflow(load_project(example_project).config)
    caller = "on: [pull_request]\njobs:\n  ci:\n    uses: ./.github/workflows/testfleet.yml\n"
    assert _calls(tmp_path, caller, **{"testfleet.yml": text}) == []
