"""The composite GitHub Action: testfleet's plan, run and history steps for any workflow.

A project that already has its own reusable "run a CI stage" workflow needs only
two things from testfleet: a ``plan`` step in one job and a ``run --plan --job`` step
in another. This action is those steps (and ``history-export``/``history-merge`` for the
history loop: each command is the CLI's, its words joined by a hyphen). The generated workflow uses the same file, vendored at
``.github/actions/testfleet/action.yml`` by ``testfleet init --github``, so there is
one implementation; ``action.yml`` at the root of this repository is the same text
(a test keeps it current).

Safety: every input reaches testfleet through ``env:`` only, never through a
``${{ }}`` inside ``run:``; ``testfleet action`` (:mod:`.action_step`) turns them into
command lines. ``args`` is one argument per line, so no value is ever split or evaluated
by a shell. The install command is the
one string that is meant to be shell code; it comes from the calling workflow
(the committed ``[tool.testfleet.ci] install``), never from the event.

Pinning: used as ``owner/testfleet@<sha>``, the action installs the testfleet source it
was checked out with (``$GITHUB_ACTION_PATH``); vendored into a project, it is given the
install of the testfleet that generated it (see :mod:`testfleet.integrations.install`),
and without one falls back to ``testfleet==<the version that rendered it>`` from the
index. ``actions/setup-python`` is pinned to a commit like every action of the generated
workflow.
"""

from __future__ import annotations

from testfleet import __version__
from testfleet.integrations.action_step import COMMANDS as _STEP_COMMANDS
from testfleet.integrations.action_step import OLD_COMMANDS as _OLD_COMMANDS

ACTION_PATH = ".github/actions/testfleet/action.yml"
LOCAL_ACTION = "./.github/actions/testfleet"

#: The action's commands (each the CLI's, its words joined by a hyphen), and old names.
COMMANDS = {name: " ".join(words) for name, words in _STEP_COMMANDS.items()}
OLD_COMMANDS = _OLD_COMMANDS

#: What ``plan`` writes to ``$GITHUB_OUTPUT`` and the action exposes.
PLAN_OUTPUTS = {
    "matrix": "every job of the plan as one matrix ({\"include\": [...]})",
    "stages": "per stage: {\"<stage>\": {\"has_jobs\": bool, \"matrix\": {...}}}",
    "has_jobs": "'true' when the plan has any job",
    "waves": "how many dependency waves the plan has",
    "cadence": "the resolved cadence",
    "bypass_fastfail": "'true' when later stages run even after a failure",
    "write_baseline": "'true' when this run's cadence writes metric baselines",
    "coverage_holes": "how many stages run nothing although configured",
    "coverage_hole_stages": "their names (JSON list)",
    "digest": "the plan's digest (a run step checks its plan file against it)",
    "tree_errors": "'true' when registrations were rejected (planned as 'invalid'; fail the run on it)",
    "authorized": "'false' for a fork's pull request without an authorizing label (give its jobs no secret)",
}

#: What ``reconcile`` writes to ``$GITHUB_OUTPUT`` with ``TESTFLEET_RESCUE_OUT`` (#40).
RECONCILE_OUTPUTS = {
    "has_rescue": "'true' when files of lost shards go to the rescue wave",
    "rescue": "per stage lane, the rescue jobs: {\"<lane>\": {\"has_jobs\": bool, \"matrix\": {...}}}",
}

_INSTALL = r"""
set -euo pipefail
if [ -n "${TESTFLEET_INSTALL:-}" ]; then
  bash -euo pipefail -c "$TESTFLEET_INSTALL"
elif grep -qsE '^name = "testfleet"$' "${GITHUB_ACTION_PATH:-.}/pyproject.toml"; then
  # used as owner/repo@sha: install the testfleet source this action was checked out with
  python3 -m pip install "$GITHUB_ACTION_PATH[runner]"
else
  python3 -m pip install "testfleet[runner]==$TESTFLEET_VERSION"
fi
testfleet --version
"""


def _indent(text: str, pad: int) -> list[str]:
    return [" " * pad + line if line else "" for line in text.strip("\n").split("\n")]


def render_action(version: str = __version__, *, vendored: bool = False) -> str:
    """The action's YAML (deterministic for a version). ``vendored``: the copy ``init
    --github`` writes into a project, without the Marketplace's author and branding."""
    from testfleet.integrations.yaml_text import uses as _uses
    from testfleet.integrations.yaml_text import yaml_str

    lines = [
        f"# testfleet {version}: plan, run and history steps for GitHub Actions.",
        "# Rendered by testfleet (testfleet.integrations.action); 'testfleet init --github'",
        f"# vendors it at {ACTION_PATH}.",
        "name: testfleet",
        "description: Plan, run and record a testfleet CI fleet (plan, run, history-export, history-merge).",
        *(() if vendored else ("author: testfleet maintainers", "branding:", "  icon: layers",
                                "  color: blue")),
        "inputs:",
        "  command:",
        f"    description: \"One of: {', '.join(COMMANDS)} (each the CLI's command, words "
        "joined by a hyphen: history-export = testfleet history export; 'record' is its "
        "deprecated old name).\"",
        "    required: true",
        "  args:",
        "    description: Extra arguments, one per line (never split or evaluated by a shell); for history-merge a directory stands for the files in it.",
        "  version:",
        "    description: The testfleet version to install (pinned; the version this action belongs to).",
        f"    default: {yaml_str(version)}",
        "  install:",
        "    description: A shell command that installs testfleet instead (e.g. pip install -r requirements-dev.txt); 'none' skips installing. Empty = this action's own testfleet source when it is used as owner/repo@ref, else the pinned version from the index.",
        "  python-version:",
        "    description: Set up this Python first (empty = use the runner's or container's).",
        "  config:",
        "    description: The testfleet config file, when it is not found from the working directory.",
        "  working-directory:",
        "    description: Where to run testfleet.",
        "    default: '.'",
        "  plan-file:",
        "    description: The plan file plan writes and run reads.",
        "    default: plan.json",
        "  cadence:",
        "    description: plan only; a cadence override (empty = from the event).",
        "  diff-base:",
        "    description: plan only; on pull_request, prune stages the diff against this ref cannot affect (e.g. HEAD^1).",
        "  stages:",
        "    description: plan only; plan only these stages (comma-separated; empty = all).",
        "  job:",
        "    description: run only; the plan job id (matrix.id).",
        "  plan-digest:",
        "    description: run only; refuse a plan file whose digest is not this one (the plan output 'digest').",
        "  rescue-digest:",
        "    description: run only; run a rescue job of rescue.json (next to the plan file), whose digest must be this one.",
        "  junit-dir:",
        "    description: run only; JUnit goes to <junit-dir>/<job>.xml.",
        "    default: testfleet-junit",
        "  status-dir:",
        "    description: run writes its job status to <status-dir>/<job>.json; reconcile reads it when args names no status location.",
        "    default: testfleet-status",
        "outputs:",
    ]
    for name, text in [*[(n, "plan only; " + t) for n, t in PLAN_OUTPUTS.items()],
                       *[(n, "reconcile only; " + t) for n, t in RECONCILE_OUTPUTS.items()]]:
        lines += [
            f"  {name}:",
            f"    description: {yaml_str(text)}",
            f"    value: ${{{{ steps.testfleet.outputs.{name} }}}}",
        ]
    lines += [
        "runs:",
        "  using: composite",
        "  steps:",
        "    - name: Set up Python",
        "      if: inputs.python-version != ''",
        f"      uses: {_uses('actions/setup-python')}",
        "      with:",
        "        python-version: ${{ inputs.python-version }}",
        "    - name: Install testfleet",
        "      if: inputs.install != 'none'",
        "      shell: bash",
        "      env:",
        "        TESTFLEET_INSTALL: ${{ inputs.install }}",
        "        TESTFLEET_VERSION: ${{ inputs.version }}",
        "      run: |",
        *_indent(_INSTALL, 8),
        "    - name: testfleet",
        "      id: testfleet",
        "      shell: bash",
        "      working-directory: ${{ inputs.working-directory }}",
        "      env:",
        "        TESTFLEET_COMMAND: ${{ inputs.command }}",
        "        TESTFLEET_ARGS: ${{ inputs.args }}",
        "        TESTFLEET_CONFIG: ${{ inputs.config }}",
        "        TESTFLEET_PLAN_FILE: ${{ inputs.plan-file }}",
        "        TESTFLEET_CADENCE: ${{ inputs.cadence }}",
        "        TESTFLEET_DIFF_BASE: ${{ inputs.diff-base }}",
        "        TESTFLEET_STAGES: ${{ inputs.stages }}",
        "        TESTFLEET_JOB: ${{ inputs.job }}",
        "        TESTFLEET_PLAN_DIGEST: ${{ inputs.plan-digest }}",
        "        TESTFLEET_RESCUE_DIGEST: ${{ inputs.rescue-digest }}",
        "        TESTFLEET_JUNIT_DIR: ${{ inputs.junit-dir }}",
        "        TESTFLEET_STATUS_DIR: ${{ inputs.status-dir }}",
        # the inputs above become command lines in testfleet itself (testfleet.integrations.action_step)
        "      run: testfleet action",
    ]
    return "\n".join(lines) + "\n"
