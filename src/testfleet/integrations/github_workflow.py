"""Render the GitHub Actions workflow that consumes a testfleet plan.

The workflow is generated from the configuration, not written by hand, because the
only things it must agree with the configuration on are exactly the things people
forget to keep in sync: which stages exist, what they need and their CI job settings, which cron
strings exist, which cadences a manual run may pick. Everything that changes per
run (jobs, shards, timeouts) comes from the plan at run time.

Two workflows (see :mod:`.github_options`): this one runs every stage on pushes,
schedules and manual runs, and on pull requests only the stages on GitHub-hosted runners;
``testfleet-trusted.yml`` (:mod:`.github_trusted`) plans and dispatches a pull request's
self-hosted and ``trusted_only`` stages from the base branch's definition.

Security properties the tests hold the output to:

* the ``plan`` job runs on a hosted runner with read-only contents and no secrets;
* a stage job's runner is written in the file from the stage's ``runs_on``, never read
  from a plan, and a self-hosted stage's job is never dispatched on ``pull_request``;
* no ``run:`` script contains a ``${{ }}`` expression at all: every value a run
  step needs (workflow inputs, matrix fields, step outputs) travels through
  ``env:``, so no PR-controlled string (label, branch, title) can become shell code;
* checkouts do not persist credentials; every action is pinned to a commit;
* a stage without jobs asks for no runner (its job is skipped by ``if:``);
* the file is written from data (:mod:`.yaml_doc`), so every value round-trips.

The stage jobs (one per stage lane: a stage's container options and volumes, its secrets,
setup steps, ``fail-fast`` and ``max-parallel`` are job keys GitHub reads before any
matrix value exists, see :mod:`testfleet.planning.jobci`) are written once, in the stages
workflow both workflows call (:mod:`.github_stages`): job ``stages`` with the plan's
matrices, job ``rescue`` with the rescue wave's. The plan job refuses to go on when the
configuration's runners or CI settings no longer match what those jobs were generated
from. A stage's job ``needs:`` the jobs of the stages its stage needs; a stage's failure
cancels only its own shards (``fail-fast``) and stops only the stages that need it
(unless the policy bypasses fast-fail). A final ``reconcile`` job checks that every
planned file was reported exactly once.
"""

from __future__ import annotations

from typing import Any

from testfleet import __version__
from testfleet.breaker.settings import lane_settings
from testfleet.config import Config
from testfleet.integrations import github_steps as steps
from testfleet.integrations.github_jobs import (
    fits_args,
    plan_job,
    plan_outputs,
    reconcile_job,
    result_job,
)
from testfleet.integrations.github_options import (
    COLLECTION_CACHE as COLLECTION_CACHE,
)
from testfleet.integrations.github_options import (
    DEFAULT_BRANCH_RUN as DEFAULT_BRANCH_RUN,
)
from testfleet.integrations.github_options import (
    HISTORY_ARTIFACT,
    HISTORY_CACHE,
    PLAN_ARTIFACT,
    TRUSTED_WORKFLOW_PATH,
    WorkflowOptions,
    collection_cache_paths,
    history_mode,
    history_path,
    ignored_label_expr,
    reads_cache,
    restore_collection,
    restore_history,
    save_collection,
    stage_job_ids,
    stage_waves,
    trusted_stages,
)
from testfleet.integrations.github_options import (
    WORKFLOW_PATH as WORKFLOW_PATH,
)
from testfleet.integrations.github_options import (
    wave_count as wave_count,
)
from testfleet.integrations.github_rescue import RESCUED_JOB, rescued_job
from testfleet.integrations.github_stages import (
    RESCUE_JOB,
    STAGES_JOB,
    caller_jobs,
    has_stage_jobs,
)
from testfleet.integrations.yaml_doc import REVIEW_WIDTH, Flow, Note, dump
from testfleet.integrations.yaml_text import PINNED_ACTIONS as PINNED_ACTIONS
from testfleet.integrations.yaml_text import expr_str

__all__ = ["WorkflowOptions", "collection_cache_paths", "history_mode", "history_path",
           "render_workflow", "stage_job_ids", "stage_waves", "wave_count"]

#: The plan step's outputs the jobs of this workflow read (the step has more).
PLAN_OUTPUTS = ["has_jobs", "bypass_fastfail", "digest", "stages", "tree_errors"]


def _triggers(config: Config, opts: WorkflowOptions) -> dict[str, Any]:
    cadences = sorted(config.policy.cadences, key=lambda c: (config.policy.cadences[c].rank, c))
    trusted = trusted_stages(config)
    on: dict[str, Any] = {}
    if len(trusted) < len(config.stages) or not config.stages:
        # with testfleet-trusted.yml, only the stages on GitHub-hosted runners (the header says)
        on["pull_request"] = {"types": Flow(["opened", "synchronize", "reopened", "labeled"])}
    if opts.push_branches:
        on["push"] = {"branches": list(opts.push_branches)}
    if config.policy.schedules:
        on["schedule"] = [Note({"cron": " ".join(cron.split())}, eol=cadence)
                          for cron, cadence in sorted(config.policy.schedules.items())]
    on["workflow_dispatch"] = {"inputs": {
        "cadence": {"description": "How broad the run is", "type": "choice",
                    "options": Flow(list(cadences)), "default": "regular"},
        "match_all_labels": {"description": "Include every registered label",
                             "type": "boolean", "default": False},
    }}
    # not required, empty by default: the cadence comes from the event
    on["workflow_call"] = {"inputs": {"cadence": {
        "description": f"Cadence override ({', '.join(cadences)}); empty = from the event",
        "type": "string"}}}
    return on


def _plan_job(config: Config, opts: WorkflowOptions) -> Note:
    mode = history_mode(config, opts)
    plan_env: dict[str, str] = {}
    if mode == "database" and opts.database_read_secret:
        # a read-only role: the plan job never runs test code, but it does check out the PR
        plan_env = {"TESTFLEET_DATABASE_URL": f"${{{{ secrets.{opts.database_read_secret} }}}}"}
    # the plan is refused when this file was not generated for it (runners, CI settings)
    inputs: dict[str, Any] = {"cadence": "${{ inputs.cadence }}",
                              "args": steps.args(*fits_args(WORKFLOW_PATH))}
    if opts.diff_pruning:
        inputs["diff-base"] = "HEAD^1"
    trusted = trusted_stages(config)
    hosted = [name for name in sorted(config.stages) if name not in trusted]
    if trusted and hosted:
        # a pull request plans only the stages on GitHub-hosted runners here
        inputs["stages"] = \
            f"${{{{ github.event_name == 'pull_request' && {expr_str(','.join(hosted))} || '' }}}}"
    body: list[Any] = [
        steps.checkout(fetch_depth=2, before=(
            "depth 2: the base commit, whose config decides a fork's trust (and the diff base)",)),
        steps.setup_python(opts.python_version),
    ]
    if reads_cache(config, opts):
        body.append(restore_history(config, opts))
    body += [
        restore_collection(config, opts),
        steps.action("Plan", "plan", install=opts.install, config=opts.config, step_id="plan",
                     env=plan_env, inputs=inputs),
        save_collection(config, opts),
        steps.upload(PLAN_ARTIFACT, "plan.json", cond=None, if_no_files="error", overwrite=True,
                     retention_days=opts.artifact_retention_days),
    ]
    return plan_job(config, opts, body, plan_outputs(PLAN_OUTPUTS))


def _history_job(config: Config, opts: WorkflowOptions, job_ids: list[str]) -> Note | None:
    """The job that keeps history across runs (none when history is off, or when the
    plan reads the database through its read-only secret and no lane has a breaker).

    cache mode: download every test job's bundle, merge them into the history restored
    from the Actions cache, save it under a new key. database mode: fold the run's
    records into the runner-class breakers (when a lane has one); without a read secret,
    snapshot the database into the cache, for the plan job to read.
    """
    mode = history_mode(config, opts)
    # jobs that write straight to the database bring no bundle to merge: the run's records
    # move the runner-class breakers (#41) in a step of their own
    observe = mode == "database" and bool(lane_settings(config))
    if mode == "off" or (mode == "database" and opts.database_read_secret and not observe):
        return None
    body: list[Any] = [steps.checkout(), steps.setup_python(opts.python_version)]
    if observe:
        body += [
            steps.uses("actions/download-artifact", {"name": PLAN_ARTIFACT}),
            steps.action("Move the runner-class breakers", "breaker-observe",
                         install=opts.install, config=opts.config,
                         env={"TESTFLEET_DATABASE_URL":
                              f"${{{{ secrets.{opts.database_secret} }}}}"},
                         inputs={"args": steps.args("--run-id", "${{ github.run_id }}",
                                                    "--plan", "plan.json")}),
        ]
    if mode == "cache":
        body += [
            restore_history(config, opts),
            steps.uses("actions/download-artifact", {"pattern": f"{HISTORY_ARTIFACT}-*",
                                                     "path": f"{HISTORY_ARTIFACT}-in"}),
            # the plan: a lane it gave jobs that recorded nothing moves its breaker (#41)
            steps.uses("actions/download-artifact", {"name": PLAN_ARTIFACT}),
            steps.action("Merge this run's records", "history-merge", install=opts.install,
                         config=opts.config, inputs={"args": steps.args(
                             f"{HISTORY_ARTIFACT}-in",
                             # a bundle from any other ref is refused, nothing merged
                             "--require-ref",
                             "refs/heads/${{ github.event.repository.default_branch }}",
                             "--plan", "plan.json")}),
        ]
    elif not opts.database_read_secret:
        body += [
            steps.action("Snapshot the database", "history-export",
                         install=None if observe else opts.install, skip_install=observe,
                         config=opts.config,
                         env={"TESTFLEET_DATABASE_URL": f"${{{{ secrets.{opts.database_secret} }}}}"},
                         inputs={"args": steps.args("--output",
                                                    f"{HISTORY_ARTIFACT}-in/snapshot.bundle")}),
            steps.action("Keep it for the plan job", "history-merge", install=None,
                         config=opts.config, skip_install=True,
                         inputs={"args": f"{HISTORY_ARTIFACT}-in"}),
        ]
    if mode == "cache" or not opts.database_read_secret:
        body.append({
            "name": "Save the history",
            "uses": steps.pinned("actions/cache/save"),
            "with": {"path": history_path(config, opts),
                     "key": f"{HISTORY_CACHE}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"},
        })
    return Note({
        "name": "history",
        "needs": Flow(["plan", *job_ids]),
        "if": f"${{{{ !cancelled() && needs.plan.result == 'success' && {DEFAULT_BRANCH_RUN} }}}}",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 30,
        "concurrency": Note({"group": f"{HISTORY_CACHE}-${{{{ github.workflow }}}}",
                             "cancel-in-progress": False}, before=(
            "one merge at a time, so two runs never save histories that miss each other's",)),
        "steps": body,
    }, before=(
        "Only default-branch runs (push, schedule, manual dispatch) write history: no pull",
        "request's artifact is ever merged; baselines only from cadences that write them."))


def render_workflow(config: Config, options: WorkflowOptions | None = None) -> str:
    """The workflow YAML for ``config`` (deterministic: same inputs, same bytes)."""
    opts = options or WorkflowOptions()
    stage_waves(config)  # refuses waits of different events that close a cycle
    trusted = set(trusted_stages(config))
    jobs: dict[str, Any] = {"plan": _plan_job(config, opts)}
    called = [STAGES_JOB, RESCUE_JOB] if has_stage_jobs(config) else []
    if called:
        jobs[STAGES_JOB], rescue = caller_jobs(config, opts, authorized=None)
    history = _history_job(config, opts, called)
    if history is not None:
        jobs["history"] = history
    jobs["reconcile"], rescued = rescued_job(reconcile_job(opts, called[:1], trusted=False),
                                             called[1:])
    if called:
        jobs[RESCUE_JOB] = rescue
    jobs[RESCUED_JOB] = rescued
    jobs["testfleet"] = result_job(config, ["plan", *called[:1], "reconcile", *called[1:],
                                            RESCUED_JOB], "testfleet", rescued=RESCUED_JOB)
    header = (
        f"Generated by 'testfleet init --github' (testfleet {__version__}); regenerate it with",
        "'testfleet init --github --force' (the plan job refuses a plan this file was not",
        "written for). The plan decides jobs, shards and timeouts; the stage jobs, with each",
        "stage's runners and CI settings from the configuration, are in testfleet-stages.yml.",
        "Every job reads contents only.",
        *((f"Pull requests run the self-hosted and trusted_only stages through "
           f"{TRUSTED_WORKFLOW_PATH.rsplit('/', 1)[-1]}.",) if trusted else ()),
    )
    doc = {
        "name": opts.name,
        "on": _triggers(config, opts),
        "permissions": {"contents": "read"},
        "concurrency": Note({
            "group": "testfleet-${{ github.workflow }}-${{ github.event.pull_request.number "
                     "|| github.run_id }}"
                     f"${{{{ {ignored_label_expr(config)} && format('-{{0}}', github.run_id) || '' }}}}",
            "cancel-in-progress": "${{ github.event_name == 'pull_request' }}",
        }, before=("One run per PR (a new push or CI label supersedes the last); other "
                   "events never wait.",)),
        "jobs": jobs,
    }
    return dump(doc, header, blank_between=2, width=REVIEW_WIDTH)
