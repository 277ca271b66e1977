"""Render the GitHub Actions workflow that consumes a testfleet plan.

The workflow is generated from the configuration, not written by hand, because the
only things it must agree with the configuration on are exactly the things people
forget to keep in sync: how many dependency waves the stages form, which cron
strings exist, which cadences a manual run may pick. Everything that changes per
run (jobs, shards, runners, containers) comes from the plan at run time.

Security properties the tests hold the output to:

* the ``plan`` job runs on a hosted runner with read-only contents and no secrets;
* no ``run:`` script contains a ``${{ }}`` expression at all: every value a run
  step needs (workflow inputs, matrix fields, step outputs) travels through
  ``env:``, so no PR-controlled string (label, branch, title) can become shell code;
* checkouts do not persist credentials; every action is pinned to a commit;
* an empty wave asks for no runner (its job is skipped by ``if:``).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from testfleet import __version__
from testfleet.config import Config

#: Actions pinned to the commit of a release (``# vX.Y.Z`` comments let Dependabot
#: and Renovate update them). Verified against the actions' published release tags.
PINNED_ACTIONS: dict[str, tuple[str, str]] = {
    "actions/checkout": ("11bd71901bbe5b1630ceea73d27597364c9af683", "v4.2.2"),
    "actions/setup-python": ("a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "actions/upload-artifact": ("ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
    "actions/download-artifact": ("d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
}

DEFAULT_INSTALL = "pip install testfleet"
WORKFLOW_PATH = ".github/workflows/testfleet.yml"
PLAN_ARTIFACT = "testfleet-plan"
JUNIT_DIR = "testfleet-junit"
MAX_MATRIX = 256  # GitHub's limit of jobs per matrix


@dataclass(frozen=True)
class WorkflowOptions:
    """What a project may choose about its workflow; the defaults suit most trees.

    ``install`` is the shell command that puts ``testfleet`` on PATH (the package
    from PyPI by default; ``pip install -e .`` for a project that pins its own).
    ``push_branches`` adds post-merge runs; ``diff_pruning`` lets PR plans skip GPU
    stages that the PR's changes cannot affect (the merge commit's first parent is
    the base, so no extra fetch of a PR-named ref is needed).
    """

    name: str = "testfleet"
    install: str = DEFAULT_INSTALL
    python_version: str = "3.12"
    plan_runner: str = "ubuntu-latest"
    push_branches: tuple[str, ...] = ()
    diff_pruning: bool = True
    plan_timeout_minutes: int = 15
    job_timeout_minutes: int = 360
    artifact_retention_days: int = 14
    database_secret: str | None = None
    config: str | None = None  # repo-relative config file, when it is not found from the root
    waves: int | None = None  # override; default: the depth of the stages' needs graph


def stage_waves(config: Config) -> dict[str, int]:
    """Each stage's wave: 0 without ``needs``, else one more than its deepest need.

    Dormant stages count too, so that re-enabling a stage never needs a new
    workflow. (The config loader has already rejected cycles and unknown needs.)
    """
    waves: dict[str, int] = {}

    def wave(name: str, trail: tuple[str, ...] = ()) -> int:
        if name in waves:
            return waves[name]
        if name in trail or name not in config.stages:  # defensive: validated upstream
            return 0
        needs = config.stages[name].needs
        value = 0 if not needs else 1 + max(wave(n, (*trail, name)) for n in needs)
        waves[name] = value
        return value

    for name in config.stages:
        wave(name)
    return waves


def wave_count(config: Config) -> int:
    """How many wave jobs the workflow needs (at least one, so it is never empty)."""
    return max(1, 1 + max(stage_waves(config).values(), default=0))


# -- small YAML helpers -------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z0-9_./-][A-Za-z0-9_./ -]*$")


def yaml_str(value: str) -> str:
    """A YAML scalar for ``value``: plain when unambiguous, else double-quoted JSON
    (JSON strings are valid YAML double-quoted scalars)."""
    reserved = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}
    if (_PLAIN.match(value) and value.lower() not in reserved and not value.endswith(" ")
            and not re.fullmatch(r"[-+.0-9eE_]+", value)):
        return value
    return json.dumps(value, ensure_ascii=False)


def expr_str(value: str) -> str:
    """A string literal inside a ``${{ }}`` expression (single quotes, doubled)."""
    return "'" + value.replace("'", "''") + "'"


def _uses(action: str) -> str:
    sha, version = PINNED_ACTIONS[action]
    return f"{action}@{sha} # {version}"


def _block(text: str, indent: int) -> list[str]:
    pad = " " * indent
    return [pad + line if line else "" for line in text.strip("\n").split("\n")]


# -- the workflow -------------------------------------------------------------

def _cli(opts: WorkflowOptions) -> str:
    """The ``testfleet`` invocation, pointed at the config when it is not at the root."""
    return f"testfleet --config {shlex.quote(opts.config)}" if opts.config else "testfleet"


def ignored_label_expr(config: Config) -> str:
    """True for a ``labeled`` event whose label cannot change the plan.

    Such a run plans nothing, cancels nothing (its own concurrency group) and
    reports its summary check under another name, so adding a ``documentation``
    label neither re-runs GPU stages nor turns a failing required check green.
    """
    policy = config.policy
    parts = [f"startsWith(github.event.label.name, {expr_str(policy.label_prefix)})"]
    names = {policy.nightly_label, policy.bypass_label, *policy.scope_labels,
             *(policy.authorize_labels or ())}
    parts += [f"github.event.label.name == {expr_str(n)}" for n in sorted(names)
              if n and not n.startswith(policy.label_prefix)]
    return f"(github.event.action == 'labeled' && !({' || '.join(parts)}))"


def _triggers(config: Config, opts: WorkflowOptions) -> list[str]:
    cadences = sorted(config.policy.cadences, key=lambda c: (config.policy.cadences[c].rank, c))
    lines = ["on:", "  pull_request:", "    types: [opened, synchronize, reopened, labeled]"]
    if opts.push_branches:
        lines += ["  push:", "    branches:"]
        lines += [f"      - {yaml_str(b)}" for b in opts.push_branches]
    if config.policy.schedules:
        lines.append("  schedule:")
        for cron, cadence in sorted(config.policy.schedules.items()):
            lines.append(f"    - cron: {json.dumps(' '.join(cron.split()))}  # {cadence}")
    lines += [
        "  workflow_dispatch:",
        "    inputs:",
        "      cadence:",
        "        description: How broad the run is",
        "        type: choice",
        "        options:",
        *[f"          - {yaml_str(c)}" for c in cadences],
        "        default: regular",
        "      match_all_labels:",
        "        description: Include every registered label",
        "        type: boolean",
        "        default: false",
        "  workflow_call:",
        "    inputs:",
        "      cadence:",
        "        description: Cadence override (" + ", ".join(cadences) + "); empty = from the event",
        "        type: string",
        "        required: false",
        "        default: ''",
    ]
    return lines


def _plan_job(config: Config, opts: WorkflowOptions, waves: int) -> list[str]:
    outputs = ["waves", "has_jobs", "cadence", "bypass_fastfail", "write_baseline", "digest"]
    for i in range(waves):
        outputs += [f"matrix_{i}", f"has_jobs_{i}"]
    plan_script = f"""
set -euo pipefail
case "$GITHUB_EVENT_NAME" in
  pull_request|pull_request_target|push|schedule|workflow_dispatch) args=(--github) ;;
  *) args=(--event workflow_call) ;;  # called by a workflow of another event
esac
if [ -n "${{CADENCE:-}}" ]; then args+=(--cadence "$CADENCE"); fi
{'if [ "$GITHUB_EVENT_NAME" = "pull_request" ]; then args+=(--diff-base HEAD^1); fi' if opts.diff_pruning else ''}
{_cli(opts)} plan "${{args[@]}}" --format github --plan-file plan.json
{_cli(opts)} plan "${{args[@]}}" --format markdown >> "$GITHUB_STEP_SUMMARY"
"""
    guard_script = f"""
if [ "${{WAVES:-0}}" -gt {waves} ]; then
  echo "::error title=testfleet::the plan has $WAVES waves but this workflow has {waves} wave jobs; regenerate it with 'testfleet init --github --force'"
  exit 1
fi
python3 - <<'PY'
import collections, json, sys
plan = json.load(open("plan.json", encoding="utf-8"))
sizes = collections.Counter(job["wave"] for job in plan["jobs"])
big = {{wave: n for wave, n in sizes.items() if n > {MAX_MATRIX}}}
for wave, n in sorted(big.items()):
    print(f"::error title=testfleet::wave {{wave}} has {{n}} jobs; a GitHub matrix holds at most {MAX_MATRIX} (lower max_shards or split stages)")
sys.exit(1 if big else 0)
PY
"""
    lines = [
        "  plan:",
        "    name: plan",
        "    # A label that cannot change the plan does not re-run CI.",
        f"    if: ${{{{ !{ignored_label_expr(config)} }}}}",
        f"    runs-on: {yaml_str(opts.plan_runner)}",
        "    permissions:",
        "      contents: read",
        f"    timeout-minutes: {opts.plan_timeout_minutes}",
        "    outputs:",
        *[f"      {o}: ${{{{ steps.plan.outputs.{o} }}}}" for o in outputs],
        "    steps:",
        f"      - uses: {_uses('actions/checkout')}",
        "        with:",
        "          persist-credentials: false",
        # depth 2: the base commit, whose config decides a fork's trust (and the diff base)
        "          fetch-depth: 2",
        f"      - uses: {_uses('actions/setup-python')}",
        "        with:",
        f"          python-version: {json.dumps(opts.python_version)}",
        "      - name: Install testfleet",
        "        run: |",
        *_block(opts.install, 10),
        "      - name: Plan",
        "        id: plan",
        "        env:",
        "          CADENCE: ${{ inputs.cadence }}",
        "        run: |",
        *[ln for ln in _block(plan_script, 10) if ln.strip()],
        "      - name: Check the plan fits this workflow",
        "        env:",
        "          WAVES: ${{ steps.plan.outputs.waves }}",
        "        run: |",
        *_block(guard_script, 10),
        f"      - uses: {_uses('actions/upload-artifact')}",
        "        with:",
        f"          name: {PLAN_ARTIFACT}",
        "          path: plan.json",
        "          if-no-files-found: error",
        "          overwrite: true",
        f"          retention-days: {opts.artifact_retention_days}",
    ]
    return lines


def _run_script(opts: WorkflowOptions) -> str:
    return f"""
set -euo pipefail
if ! grep -qF "$TESTFLEET_PLAN_DIGEST" plan.json; then
  echo "::error title=testfleet::plan.json is not the plan of this run ($TESTFLEET_PLAN_DIGEST)"
  exit 2
fi
mkdir -p {JUNIT_DIR}
{_cli(opts)} run --plan plan.json --job "$TESTFLEET_JOB_ID" --junit "{JUNIT_DIR}/$TESTFLEET_JOB_ID.xml"
"""


def _wave_job(config: Config, opts: WorkflowOptions, wave: int) -> list[str]:
    needs = ["plan", *[f"wave-{i}" for i in range(wave)]]
    cond = [
        "!cancelled()",
        "needs.plan.result == 'success'",
        f"needs.plan.outputs.has_jobs_{wave} == 'true'",
    ]
    if wave:
        cond.append("(!failure() || needs.plan.outputs.bypass_fastfail == 'true')")
    env = []
    if opts.database_secret:
        env = ["        env:",
               f"          TESTFLEET_DATABASE_URL: ${{{{ secrets.{opts.database_secret} }}}}"]
    lines = [
        f"  wave-{wave}:",
        f"    # Stages at depth {wave} of the 'needs' graph; runs only when the earlier",
        "    # waves succeeded, unless the policy bypasses fast-fail.",
        "    name: ${{ matrix.id }}",
        f"    needs: [{', '.join(needs)}]",
        "    if: >-",
        "      " + " &&\n      ".join(cond),
        "    strategy:",
        "      fail-fast: ${{ needs.plan.outputs.bypass_fastfail != 'true' }}",
        f"      matrix: ${{{{ fromJSON(needs.plan.outputs.matrix_{wave}) }}}}",
        "    runs-on: ${{ matrix.runs_on }}",
        "    # The stage's 'container' from the testfleet config (pin it there as image@sha256:...);",
        "    # an empty string runs the job directly on the runner.",
        "    container: ${{ matrix.container || '' }} # zizmor: ignore[unpinned-images]",
        "    permissions:",
        "      contents: read",
        f"    timeout-minutes: {opts.job_timeout_minutes}",
        "    steps:",
        f"      - uses: {_uses('actions/checkout')}",
        "        with:",
        "          persist-credentials: false",
        f"      - uses: {_uses('actions/setup-python')}",
        "        if: ${{ !matrix.container }}",
        "        with:",
        f"          python-version: {json.dumps(opts.python_version)}",
        "      - name: Install testfleet",
        "        run: |",
        *_block(opts.install, 10),
        f"      - uses: {_uses('actions/download-artifact')}",
        "        with:",
        f"          name: {PLAN_ARTIFACT}",
        "      - name: Run",
        *env[:1],
        *([] if env else ["        env:"]),
        *env[1:],
        "          TESTFLEET_JOB_ID: ${{ matrix.id }}",
        "          TESTFLEET_PLAN_DIGEST: ${{ needs.plan.outputs.digest }}",
        "        run: |",
        *[ln for ln in _block(_run_script(opts), 10) if ln.strip()],
        f"      - uses: {_uses('actions/upload-artifact')}",
        "        if: ${{ !cancelled() }}",
        "        with:",
        "          name: junit-${{ matrix.id }}",
        f"          path: {JUNIT_DIR}/",
        "          if-no-files-found: warn",
        f"          retention-days: {opts.artifact_retention_days}",
    ]
    return lines


def _result_job(config: Config, waves: int) -> list[str]:
    needs = ["plan", *[f"wave-{i}" for i in range(waves)]]
    script = """
set -euo pipefail
echo "job results: $RESULTS"
for result in $RESULTS; do
  case "$result" in
    success|skipped) ;;
    *) echo "::error title=testfleet::a testfleet job ended with '$result'"; exit 1 ;;
  esac
done
"""
    return [
        "  testfleet:",
        "    # One stable check to require in branch protection, whatever the plan holds.",
        f"    name: ${{{{ {ignored_label_expr(config)} && 'testfleet (label ignored)' || 'testfleet' }}}}",
        f"    needs: [{', '.join(needs)}]",
        "    if: ${{ always() }}",
        "    runs-on: ubuntu-latest",
        "    permissions: {}",
        "    timeout-minutes: 5",
        "    steps:",
        "      - name: All jobs passed",
        "        env:",
        "          RESULTS: ${{ join(needs.*.result, ' ') }}",
        "        run: |",
        *[ln for ln in _block(script, 10) if ln.strip()],
    ]


def render_workflow(config: Config, options: WorkflowOptions | None = None) -> str:
    """The workflow YAML for ``config`` (deterministic: same inputs, same bytes)."""
    opts = options or WorkflowOptions()
    waves = opts.waves if opts.waves is not None else wave_count(config)
    if waves < 1:
        raise ValueError("a workflow needs at least one wave")
    lines = [
        f"# Generated by 'testfleet init --github' (testfleet {__version__}).",
        "# The plan decides jobs, shards, runners and containers at run time; this file",
        "# only has to agree with the configuration on waves, schedules and cadences.",
        "# Regenerate it after changing stage 'needs' or 'policy.schedules':",
        "#   testfleet init --github --force",
        f"name: {yaml_str(opts.name)}",
        "",
        *_triggers(config, opts),
        "",
        "permissions: {}",
        "",
        "concurrency:",
        "  # One run per PR (a new push or CI label supersedes the last); other events never wait.",
        "  group: testfleet-${{ github.workflow }}-${{ github.event.pull_request.number || github.run_id }}"
        f"${{{{ {ignored_label_expr(config)} && format('-{{0}}', github.run_id) || '' }}}}",
        "  cancel-in-progress: ${{ github.event_name == 'pull_request' }}",
        "",
        "jobs:",
        *_plan_job(config, opts, waves),
    ]
    for wave in range(waves):
        lines += ["", *_wave_job(config, opts, wave)]
    lines += ["", *_result_job(config, waves)]
    return "\n".join(lines) + "\n"
